"""Python clients for the HTTP API: :class:`MemoryClient` (sync) and :class:`AsyncMemoryClient`.

>>> from cognis_memory.client import MemoryClient
>>> with MemoryClient("http://127.0.0.1:8080", api_key="demo-key") as mem:
...     mem.add("alice", "I moved to Lisbon last month", speaker="Alice")
...     for hit in mem.search("alice", "Where does Alice live?").results:
...         print(hit.score, hit.memory.content)
...     print(mem.context("alice", "Any tips for my neighbourhood?").text)

Both clients have the same methods; the async one's are coroutines (and ``iter_memories``
is an async iterator). Results are the API's own response models (``SearchOut``,
``MemoryOut``, ...). Errors are raised as :class:`MemoryAPIError` subclasses chosen by
status (:class:`InvalidRequest`, :class:`NotFound`, ...) carrying the server's ``code``,
``message``, ``field`` and the request id.

Retries: 429, 502, 503 and 504 answers and transport errors (connection refused or reset,
timeouts) are retried with exponential backoff and full jitter, honouring ``Retry-After``
(see :class:`RetryPolicy`), but only for requests that are safe to repeat: reads, searches,
deletes, and message posts, which are made idempotent by giving every message without a
``client_message_id`` a fresh one before the first attempt (the server stores a message id
once). ``update`` writes a new version each time, so it is retried only when the connection
could not be opened (the request never left).

For agents: :mod:`cognis_memory.agent_tools` turns a client into Bedrock Converse tools.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from .api.schemas import (
    AddMessagesOut,
    ContextOut,
    ForgetOut,
    HistoryOut,
    JobListOut,
    JobOut,
    MemoryListOut,
    MemoryOut,
    MessageBody,
    SearchOut,
)

__all__ = [
    "AddMessagesOut", "AsyncMemoryClient", "AuthenticationError", "Conflict", "ContextOut", "ForgetOut",
    "InvalidRequest", "JobListOut", "JobOut", "MemoryAPIError", "MemoryClient", "MemoryConnectionError",
    "MemoryListOut", "MemoryOut", "MessageBody", "NotFound", "PayloadTooLarge", "PermissionDenied", "RateLimited",
    "RetryPolicy", "SearchOut", "ServerError", "ServiceUnavailable",
]  # fmt: skip

T = TypeVar("T")


# -- errors -------------------------------------------------------------------------------
class MemoryAPIError(Exception):
    """An error answer from the API. ``status`` is the HTTP status (0: no answer at all)."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        field: str | None = None,
        request_id: str | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}" if status else f"{code}: {message}")
        self.status, self.code, self.message, self.field = status, code, message, field
        self.request_id, self.retry_after_s = request_id, retry_after_s


class InvalidRequest(MemoryAPIError):
    """400/422: the request was refused; ``field`` names the offending field."""


class AuthenticationError(MemoryAPIError):
    """401: missing or unknown API key."""


class PermissionDenied(MemoryAPIError):
    """403: the key may not do this (read-only keys may only read and search)."""


class NotFound(MemoryAPIError):
    """404: no such memory/job for this tenant and user."""


class Conflict(MemoryAPIError):
    """409: e.g. updating a memory that is no longer the current version."""


class PayloadTooLarge(MemoryAPIError):
    """413: the body is over the server's limit."""


class RateLimited(MemoryAPIError):
    """429: too many requests (retried by default)."""


class ServiceUnavailable(MemoryAPIError):
    """502/503/504: a dependency is down; retried by default, raised when the retries are spent."""


class ServerError(MemoryAPIError):
    """Any other 5xx."""


class MemoryConnectionError(MemoryAPIError):
    """The server could not be reached or did not answer in time (after the retries)."""


_BY_STATUS: dict[int, type[MemoryAPIError]] = {
    400: InvalidRequest, 401: AuthenticationError, 403: PermissionDenied, 404: NotFound, 409: Conflict,
    413: PayloadTooLarge, 422: InvalidRequest, 429: RateLimited, 502: ServiceUnavailable,
    503: ServiceUnavailable, 504: ServiceUnavailable,
}  # fmt: skip


def _retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def error_from_response(r: httpx.Response) -> MemoryAPIError:
    """The typed exception for an error answer, with the server's message when it sent one."""
    try:
        body = r.json()
        detail = body.get("error") if isinstance(body, dict) else None
    except ValueError:
        detail = None
    if not isinstance(detail, dict):
        detail = {"code": "http_error", "message": (r.text or r.reason_phrase)[:300]}
    cls = _BY_STATUS.get(r.status_code, ServerError if r.status_code >= 500 else MemoryAPIError)
    return cls(
        r.status_code,
        str(detail.get("code") or "http_error"),
        str(detail.get("message") or r.reason_phrase),
        field=detail.get("field"),
        request_id=r.headers.get("x-request-id"),
        retry_after_s=_retry_after(r.headers.get("retry-after")),
    )


# -- retries ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff with full jitter: attempt n waits uniform(0, min(max, base * 2**n)),
    or the server's ``Retry-After`` when it sent one (capped at ``max_delay_s``)."""

    max_attempts: int = 4
    base_delay_s: float = 0.25
    max_delay_s: float = 8.0
    retry_statuses: frozenset[int] = frozenset({429, 502, 503, 504})

    def delay(self, attempt: int, retry_after_s: float | None) -> float:
        if retry_after_s is not None:
            return min(self.max_delay_s, retry_after_s)
        return random.uniform(0.0, min(self.max_delay_s, self.base_delay_s * (2**attempt)))


NO_RETRIES = RetryPolicy(max_attempts=1)


@dataclass(slots=True)
class _Request(Generic[T]):
    """One API call, independent of sync or async transport."""

    method: str
    path: str
    parse: Callable[[Any], T]
    json: Any = None
    params: dict[str, Any] | None = None
    idempotent: bool = True  # safe to send twice


def _outcome(policy: RetryPolicy, req: _Request[Any], attempt: int, result: httpx.Response | Exception) -> float | None:
    """Seconds to wait before another attempt, or None to stop (return or raise)."""
    if attempt + 1 >= policy.max_attempts:
        return None
    if isinstance(result, Exception):
        never_sent = isinstance(result, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout))
        return policy.delay(attempt, None) if (req.idempotent or never_sent) else None
    if result.status_code in policy.retry_statuses and req.idempotent:
        return policy.delay(attempt, _retry_after(result.headers.get("retry-after")))
    return None


def _finish(req: _Request[T], result: httpx.Response | Exception) -> T:
    if isinstance(result, Exception):
        kind = "timeout" if isinstance(result, httpx.TimeoutException) else "connection_error"
        raise MemoryConnectionError(0, kind, f"{req.method} {req.path}: {result!r}") from result
    if result.status_code >= 400:
        raise error_from_response(result)
    try:
        return req.parse(result.json())
    except ValueError as exc:  # not JSON, or not the documented shape (pydantic's errors are ValueErrors)
        raise ServerError(
            result.status_code,
            "invalid_response",
            f"{req.method} {req.path}: the answer is not the API's: {exc}"[:500],
            request_id=result.headers.get("x-request-id"),
        ) from exc


def _seg(value: str) -> str:
    """One URL path segment, percent-encoded. Ids are not trusted to be URL-safe: unquoted, a memory id
    ``..`` turned ``DELETE /v1/users/alice/memories/..`` into ``DELETE /v1/users/alice`` (forget the
    user), and a user id ``../users/bob`` addressed bob. ``.``/``..`` are encoded too: clients resolve them."""
    return "%2E" * len(value) if value in (".", "..") else quote(str(value), safe="")


def _model(cls: type[BaseModel]) -> Callable[[Any], Any]:
    return cls.model_validate


def _plain(value: Any) -> Any:
    """Request bodies: models and datetimes as JSON; ``None`` options are left out."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _with_message_ids(messages: list[dict[str, Any]] | list[Any]) -> list[dict[str, Any]]:
    """Every message gets a ``client_message_id`` so a retried post cannot store it twice."""
    out = []
    for m in messages:
        body = _plain(m)
        if not isinstance(body, dict):
            raise TypeError("messages: each message must be a dict or a MessageBody")
        body.setdefault("client_message_id", f"cli-{uuid.uuid4().hex}")
        out.append(body)
    return out


def _user(user_id: str) -> str:
    return f"/v1/users/{_seg(user_id)}"


# Request builders shared by both clients ---------------------------------------------------
def _add_messages(user_id: str, messages: list[Any], mode: str) -> _Request[AddMessagesOut]:
    body = {"messages": _with_message_ids(messages), "mode": mode}
    return _Request("POST", f"{_user(user_id)}/messages", _model(AddMessagesOut), json=body)


def _search(user_id: str, query: str, options: dict[str, Any]) -> _Request[SearchOut]:
    return _Request("POST", f"{_user(user_id)}/search", _model(SearchOut), json=_plain({"query": query, **options}))


def _context(user_id: str, message: str, options: dict[str, Any]) -> _Request[ContextOut]:
    body = _plain({"message": message, **options})
    return _Request("POST", f"{_user(user_id)}/context", _model(ContextOut), json=body)


def _memory(user_id: str, memory_id: str, method: str = "GET", body: Any = None) -> _Request[MemoryOut]:
    req = _Request(method, f"{_user(user_id)}/memories/{_seg(memory_id)}", _model(MemoryOut), json=body)
    req.idempotent = method != "PATCH"
    return req


def _history(user_id: str, memory_id: str) -> _Request[list[MemoryOut]]:
    path = f"{_user(user_id)}/memories/{_seg(memory_id)}/history"
    return _Request("GET", path, lambda body: HistoryOut.model_validate(body).versions)


def _list(user_id: str, include_history: bool, limit: int, after: str | None) -> _Request[MemoryListOut]:
    params: dict[str, Any] = {"include_history": str(include_history).lower(), "limit": limit}
    if after:
        params["after"] = after
    return _Request("GET", f"{_user(user_id)}/memories", _model(MemoryListOut), params=params)


def _forget(user_id: str) -> _Request[ForgetOut]:
    return _Request("DELETE", _user(user_id), _model(ForgetOut))


def _job(user_id: str, job_id: str) -> _Request[JobOut]:
    return _Request("GET", f"{_user(user_id)}/jobs/{_seg(job_id)}", _model(JobOut))


def _jobs(status: str | None, limit: int, after: str | None) -> _Request[JobListOut]:
    params: dict[str, Any] = {"limit": limit}
    if status:
        params["status"] = status
    if after:
        params["after"] = after
    return _Request("GET", "/v1/jobs", _model(JobListOut), params=params)


def _raw(method: str, path: str) -> _Request[dict[str, Any]]:
    return _Request(method, path, lambda body: body)


def _headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


_JOB_DONE = ("done", "dead")


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
        """Search; options are the search body's fields (limit, scopes, session_id, categories,
        kinds, agent_id, time_from, time_to, include_history, explain, now, recipe)."""
        return self._send(_search(user_id, query, options))

    def context(self, user_id: str, message: str, **options: Any) -> ContextOut:
        """The memories relevant to ``message`` as a text block for a system prompt; options:
        max_tokens (default 800), limit (default 20), with_ids, and the search filters (session_id,
        scopes, categories, kinds, agent_id, time_from, time_to, include_history, now, recipe)."""
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
        self, user_id: str, *, include_history: bool = False, limit: int = 100, after: str | None = None
    ) -> MemoryListOut:
        """One page; pass ``next_after`` of a page as ``after`` to get the next."""
        return self._send(_list(user_id, include_history, limit, after))

    def iter_memories(
        self, user_id: str, *, include_history: bool = False, page_size: int = 100
    ) -> Iterator[MemoryOut]:
        """Every memory of the user, page by page."""
        after: str | None = None
        while True:
            page = self.list_memories(user_id, include_history=include_history, limit=page_size, after=after)
            yield from page.memories
            if page.next_after is None:
                return
            after = page.next_after

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
        self, user_id: str, *, include_history: bool = False, limit: int = 100, after: str | None = None
    ) -> MemoryListOut:
        return await self._send(_list(user_id, include_history, limit, after))

    async def iter_memories(
        self, user_id: str, *, include_history: bool = False, page_size: int = 100
    ) -> AsyncIterator[MemoryOut]:
        after: str | None = None
        while True:
            page = await self.list_memories(user_id, include_history=include_history, limit=page_size, after=after)
            for m in page.memories:
                yield m
            if page.next_after is None:
                return
            after = page.next_after

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
