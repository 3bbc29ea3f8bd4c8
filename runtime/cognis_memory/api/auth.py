"""Authentication and per-route authorization of the HTTP API.

Authentication happens first, in :class:`ApiKeyAuth`, from the request's headers alone: a
request under ``/v1/`` without a known key is answered 401 before a byte of its body is read or
parsed, so a client without a key cannot make the server read a 16 MB body, and broken JSON without a
key is a 401, not a 422.
The key record is left on the request's state.

Authorization is explicit per route: every route declares :data:`ReadKey` or :data:`WriteKey`.
A read-only key passes :data:`ReadKey` (reads, searches, context) and gets 403 from
:data:`WriteKey`. Nothing depends on a route's name or HTTP method.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader, HTTPBearer
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import DependencyUnavailableError, PermissionDeniedError
from ..service import MemoryService
from ..stores.values import ApiKeyRecord
from .middleware import send_error, unavailable_error

#: Paths that need a key (everything of the versioned API); /health, /ready and the docs are open.
PROTECTED_PREFIX = "/v1/"

# Declared on the dependencies so that the OpenAPI document shows both ways to send the key;
# the check itself is done by ApiKeyAuth before the route runs.
_bearer = HTTPBearer(auto_error=False, description="`Authorization: Bearer <key>`")
_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="`X-API-Key: <key>`")


def key_from_headers(headers: list[tuple[bytes, bytes]]) -> str:
    """The API key of a request: ``Authorization: Bearer <key>``, else ``X-API-Key``."""
    bearer = header = ""
    for name, value in headers:
        if name == b"authorization":
            text = value.decode("latin-1")
            if text[:7].lower() == "bearer ":
                bearer = text[7:].strip()
        elif name == b"x-api-key":
            header = value.decode("latin-1").strip()
    return bearer or header


class ApiKeyAuth:
    """ASGI middleware: 401 for ``/v1/`` requests without a valid key, before the body is read."""

    def __init__(self, app: ASGIApp, service: MemoryService) -> None:
        self.app, self.service = app, service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(PROTECTED_PREFIX):
            await self.app(scope, receive, send)
            return
        key = key_from_headers(scope.get("headers", []))
        settings = self.service.settings
        record: ApiKeyRecord | None
        if settings.api.auth_disabled and not key:
            record = ApiKeyRecord(key_hash="", tenant_id=settings.api.auth_disabled_tenant)
        else:
            try:
                record = await self.service.authenticate(key)
            except DependencyUnavailableError as exc:  # the key store is down: retryable, like any other request
                status, code, message, headers = unavailable_error(exc)
                await send_error(send, status, code, message, headers=headers)
                return
        if record is None:
            await send_error(
                send, 401, "unauthorized", "missing or unknown API key", headers=[(b"www-authenticate", b"Bearer")]
            )
            return
        scope.setdefault("state", {})["api_key"] = record
        await self.app(scope, receive, send)


def _record(request: Request) -> ApiKeyRecord:
    record = getattr(request.state, "api_key", None)
    if record is None:  # a route under /v1/ always has one; anything else is a wiring error
        raise RuntimeError("route reached without authentication")
    return record


async def read_access(
    request: Request,
    _bearer_key: Annotated[object, Security(_bearer)] = None,
    _header_key: Annotated[object, Security(_header)] = None,
) -> ApiKeyRecord:
    """Any valid key: reads, searches and context."""
    return _record(request)


async def write_access(
    request: Request,
    _bearer_key: Annotated[object, Security(_bearer)] = None,
    _header_key: Annotated[object, Security(_header)] = None,
) -> ApiKeyRecord:
    """A key that may change data (not read-only)."""
    record = _record(request)
    if record.read_only:
        raise PermissionDeniedError("this API key is read-only")
    return record


ReadKey = Annotated[ApiKeyRecord, Depends(read_access)]
WriteKey = Annotated[ApiKeyRecord, Depends(write_access)]
