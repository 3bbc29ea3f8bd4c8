"""What both clients share: the retry policy, one API call as a transport-free :class:`_Request`, the
request builders, and how an answer (or a transport error) becomes a result or an exception."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from ..api.schemas import (
    AddMessagesOut,
    ContextOut,
    ForgetOut,
    HistoryOut,
    JobListOut,
    JobOut,
    MemoryListOut,
    MemoryOut,
    SearchOut,
    SessionMessageListOut,
)
from .errors import MemoryConnectionError, ServerError, _retry_after, error_from_response

T = TypeVar("T")


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


def _list(
    user_id: str, include_history: bool, limit: int, after: str | None, cursor: str | None = None
) -> _Request[MemoryListOut]:
    params: dict[str, Any] = {"include_history": str(include_history).lower(), "limit": limit}
    if cursor:
        params["cursor"] = cursor
    if after:
        params["after"] = after
    return _Request("GET", f"{_user(user_id)}/memories", _model(MemoryListOut), params=params)


def _session_messages(user_id: str, session_id: str, limit: int, cursor: str | None) -> _Request[SessionMessageListOut]:
    params: dict[str, Any] = {"limit": limit}
    if cursor:
        params["cursor"] = cursor
    path = f"{_user(user_id)}/sessions/{_seg(session_id)}/messages"
    return _Request("GET", path, _model(SessionMessageListOut), params=params)


def next_page(page: MemoryListOut) -> dict[str, str] | None:
    """The paging argument of the page after ``page`` (``cursor``; ``after`` from a server of an earlier
    release, which answers no cursor), or None after the last page."""
    if page.next_cursor is not None:
        return {"cursor": page.next_cursor}
    return {"after": page.next_after} if page.next_after is not None else None


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
