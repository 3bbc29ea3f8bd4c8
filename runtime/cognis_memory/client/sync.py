"""The synchronous client: :class:`MemoryClient`."""

from __future__ import annotations

import time
from collections.abc import Iterator
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


class MemoryClient:
    """Synchronous client; one method per API operation.

    ``timeout_s`` bounds each attempt (connect, read, write); ``retry`` sets the retry
    policy (``RetryPolicy(max_attempts=1)`` turns retries off); ``transport`` lets a test or
    an embedding application pass any httpx transport.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout_s: float = 10.0,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        self._http = http_client or httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout_s, transport=transport)
        self._headers = _headers(api_key)
        self.retry = retry or RetryPolicy()

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, req: _Request[T]) -> T:
        attempt = 0
        while True:
            result: httpx.Response | Exception
            try:
                result = self._http.request(
                    req.method, req.path, json=req.json, params=req.params, headers=self._headers
                )
            except httpx.TransportError as exc:
                result = exc
            wait = _outcome(self.retry, req, attempt, result)
            if wait is None:
                return _finish(req, result)
            time.sleep(wait)
            attempt += 1

    # -- operations ----------------------------------------------------------------------
    def add_messages(self, user_id: str, messages: list[Any], *, mode: str = "sync") -> AddMessagesOut:
        """Post messages (dicts with ``content`` and optional speaker, role, timestamp, session_id,
        agent_id, client_message_id, scope, metadata). ``mode="async"`` answers after storing
        and extracts in a job (``.job``)."""
        return self._send(_add_messages(user_id, messages, mode))

    def add(self, user_id: str, content: str, *, mode: str = "sync", **fields: Any) -> AddMessagesOut:
        """Post one message."""
        return self.add_messages(user_id, [{"content": content, **fields}], mode=mode)

    def search(self, user_id: str, query: str, **options: Any) -> SearchOut:
        """Search; options are the fields of the search body (``SearchBody`` in
        :mod:`cognis_memory.api.schemas`: limit, explain, the filters such as session_id or kinds, ...)."""
        return self._send(_search(user_id, query, options))

    def context(self, user_id: str, message: str, **options: Any) -> ContextOut:
        """The memories relevant to ``message`` as a text block for a system prompt; options are the fields
        of the context body (``ContextBody`` in :mod:`cognis_memory.api.schemas`: max_tokens (default 800),
        limit (default 20), with_ids, the search filters, ...)."""
        return self._send(_context(user_id, message, options))

    def get(self, user_id: str, memory_id: str) -> MemoryOut:
        return self._send(_memory(user_id, memory_id))

    def history(self, user_id: str, memory_id: str) -> list[MemoryOut]:
        """Every version of the memory's chain, oldest first."""
        return self._send(_history(user_id, memory_id))

    def update(self, user_id: str, memory_id: str, **changes: Any) -> MemoryOut:
        """Write a new version (content, category, event_time)."""
        return self._send(_memory(user_id, memory_id, "PATCH", _plain(changes)))

    def delete(self, user_id: str, memory_id: str) -> MemoryOut:
        """Delete a memory: a tombstone version, history kept."""
        return self._send(_memory(user_id, memory_id, "DELETE"))

    def forget_user(self, user_id: str) -> ForgetOut:
        """Hard-delete everything stored for the user."""
        return self._send(_forget(user_id))

    def list_memories(
        self,
        user_id: str,
        *,
        include_history: bool = False,
        limit: int = 100,
        cursor: str | None = None,
        after: str | None = None,
    ) -> MemoryListOut:
        """One page, in the order the memories were said (oldest first); pass ``next_cursor`` of a page as
        ``cursor`` to get the next. ``after`` (a memory id, the page's ``next_after``) is deprecated."""
        return self._send(_list(user_id, include_history, limit, after, cursor))

    def iter_memories(
        self, user_id: str, *, include_history: bool = False, page_size: int = 100
    ) -> Iterator[MemoryOut]:
        """Every memory of the user, page by page, oldest first."""
        paging: dict[str, str] = {}
        while True:
            page = self.list_memories(user_id, include_history=include_history, limit=page_size, **paging)
            yield from page.memories
            following = next_page(page)
            if following is None:
                return
            paging = following

    def list_session_messages(
        self, user_id: str, session_id: str, *, limit: int = 100, cursor: str | None = None
    ) -> SessionMessageListOut:
        """One page of a session's messages as they were sent, in timestamp order; pass ``next_cursor`` of a
        page as ``cursor`` to get the next."""
        return self._send(_session_messages(user_id, session_id, limit, cursor))

    def iter_session_messages(
        self, user_id: str, session_id: str, *, page_size: int = 100
    ) -> Iterator[SessionMessageOut]:
        """Every message of the session, page by page, in timestamp order."""
        cursor: str | None = None
        while True:
            page = self.list_session_messages(user_id, session_id, limit=page_size, cursor=cursor)
            yield from page.messages
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def job(self, user_id: str, job_id: str) -> JobOut:
        return self._send(_job(user_id, job_id))

    def wait_for_job(self, user_id: str, job_id: str, *, timeout_s: float = 60.0, poll_s: float = 0.2) -> JobOut:
        """Poll an ingest job until it is done or dead; ``TimeoutError`` after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            job = self.job(user_id, job_id)
            if job.status in _JOB_DONE:
                return job
            if time.monotonic() >= deadline:
                raise TimeoutError(f"job {job_id} still {job.status} after {timeout_s} s")
            time.sleep(poll_s)

    def list_jobs(self, *, status: str | None = None, limit: int = 100, after: str | None = None) -> JobListOut:
        """One page of the tenant's ingest jobs (every user's), ordered by id; ``status="dead"`` lists the
        dead letters. Pass ``next_after`` of a page as ``after`` to get the next."""
        return self._send(_jobs(status, limit, after))

    def iter_jobs(self, *, status: str | None = None, page_size: int = 100) -> Iterator[JobOut]:
        """Every job of the tenant (of one status), page by page."""
        after: str | None = None
        while True:
            page = self.list_jobs(status=status, limit=page_size, after=after)
            yield from page.jobs
            if page.next_after is None:
                return
            after = page.next_after

    def health(self) -> dict[str, Any]:
        return self._send(_raw("GET", "/health"))
