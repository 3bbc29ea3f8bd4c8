"""The asynchronous client: :class:`AsyncMemoryClient` (the same methods as coroutines)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx

from ..api.schemas import (
    AddMessagesOut,
    ContextOut,
    ForgetOut,
    JobListOut,
    JobOut,
    MemoryListOut,
    MemoryOut,
    SearchOut,
    SessionMessageListOut,
    SessionMessageOut,
)
from .requests import (
    _JOB_DONE,
    RetryPolicy,
    T,
    _add_messages,
    _context,
    _finish,
    _forget,
    _headers,
    _history,
    _job,
    _jobs,
    _list,
    _memory,
    _outcome,
    _plain,
    _raw,
    _Request,
    _search,
    _session_messages,
    next_page,
)


class AsyncMemoryClient:
    """Asynchronous client: the methods of :class:`MemoryClient`, as coroutines."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout_s: float = 10.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self._http = http_client or httpx.AsyncClient(
            base_url=base_url.rstrip("/"), timeout=timeout_s, transport=transport
        )
        self._headers = _headers(api_key)
        self.retry = retry or RetryPolicy()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _send(self, req: _Request[T]) -> T:
        attempt = 0
        while True:
            result: httpx.Response | Exception
            try:
                result = await self._http.request(
                    req.method, req.path, json=req.json, params=req.params, headers=self._headers
                )
            except httpx.TransportError as exc:
                result = exc
            wait = _outcome(self.retry, req, attempt, result)
            if wait is None:
                return _finish(req, result)
            await asyncio.sleep(wait)
            attempt += 1

    async def add_messages(self, user_id: str, messages: list[Any], *, mode: str = "sync") -> AddMessagesOut:
        return await self._send(_add_messages(user_id, messages, mode))

    async def add(self, user_id: str, content: str, *, mode: str = "sync", **fields: Any) -> AddMessagesOut:
        return await self.add_messages(user_id, [{"content": content, **fields}], mode=mode)

    async def search(self, user_id: str, query: str, **options: Any) -> SearchOut:
        return await self._send(_search(user_id, query, options))

    async def context(self, user_id: str, message: str, **options: Any) -> ContextOut:
        return await self._send(_context(user_id, message, options))

    async def get(self, user_id: str, memory_id: str) -> MemoryOut:
        return await self._send(_memory(user_id, memory_id))

    async def history(self, user_id: str, memory_id: str) -> list[MemoryOut]:
        return await self._send(_history(user_id, memory_id))

    async def update(self, user_id: str, memory_id: str, **changes: Any) -> MemoryOut:
        return await self._send(_memory(user_id, memory_id, "PATCH", _plain(changes)))

    async def delete(self, user_id: str, memory_id: str) -> MemoryOut:
        return await self._send(_memory(user_id, memory_id, "DELETE"))

    async def forget_user(self, user_id: str) -> ForgetOut:
        return await self._send(_forget(user_id))

    async def list_memories(
        self,
        user_id: str,
        *,
        include_history: bool = False,
        limit: int = 100,
        cursor: str | None = None,
        after: str | None = None,
    ) -> MemoryListOut:
        return await self._send(_list(user_id, include_history, limit, after, cursor))

    async def iter_memories(
        self, user_id: str, *, include_history: bool = False, page_size: int = 100
    ) -> AsyncIterator[MemoryOut]:
        paging: dict[str, str] = {}
        while True:
            page = await self.list_memories(user_id, include_history=include_history, limit=page_size, **paging)
            for m in page.memories:
                yield m
            following = next_page(page)
            if following is None:
                return
            paging = following

    async def list_session_messages(
        self, user_id: str, session_id: str, *, limit: int = 100, cursor: str | None = None
    ) -> SessionMessageListOut:
        return await self._send(_session_messages(user_id, session_id, limit, cursor))

    async def iter_session_messages(
        self, user_id: str, session_id: str, *, page_size: int = 100
    ) -> AsyncIterator[SessionMessageOut]:
        cursor: str | None = None
        while True:
            page = await self.list_session_messages(user_id, session_id, limit=page_size, cursor=cursor)
            for m in page.messages:
                yield m
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def job(self, user_id: str, job_id: str) -> JobOut:
        return await self._send(_job(user_id, job_id))

    async def wait_for_job(self, user_id: str, job_id: str, *, timeout_s: float = 60.0, poll_s: float = 0.2) -> JobOut:
        deadline = time.monotonic() + timeout_s
        while True:
            job = await self.job(user_id, job_id)
            if job.status in _JOB_DONE:
                return job
            if time.monotonic() >= deadline:
                raise TimeoutError(f"job {job_id} still {job.status} after {timeout_s} s")
            await asyncio.sleep(poll_s)

    async def list_jobs(self, *, status: str | None = None, limit: int = 100, after: str | None = None) -> JobListOut:
        return await self._send(_jobs(status, limit, after))

    async def iter_jobs(self, *, status: str | None = None, page_size: int = 100) -> AsyncIterator[JobOut]:
        after: str | None = None
        while True:
            page = await self.list_jobs(status=status, limit=page_size, after=after)
            for j in page.jobs:
                yield j
            if page.next_after is None:
                return
            after = page.next_after

    async def health(self) -> dict[str, Any]:
        return await self._send(_raw("GET", "/health"))
