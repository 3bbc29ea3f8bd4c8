"""The client's exceptions: one per kind of error answer, chosen by HTTP status."""

from __future__ import annotations

import email.utils
from datetime import UTC, datetime

import httpx

from ..errors import CognisError


class MemoryAPIError(CognisError):
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
    """409: e.g. a memory that other writes kept replacing while it was being updated."""


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
