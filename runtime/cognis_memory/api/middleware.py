"""ASGI middleware of the HTTP API, outermost first as :func:`cognis_memory.api.app.create_app` stacks them:

1. :class:`RequestEnvelope` gives each request a server-generated id (``X-Request-Id``; a
   client's own ``X-Request-Id`` is kept, when it is a well-formed id, as the separate
   ``client_request_id``), adds the security headers, and turns any unexpected exception into
   a 500 error body *without* letting it reach the server: an exception that escapes the app
   after the response has been sent makes uvicorn drop the connection, and the client's next
   request on that keep-alive connection failed with ECONNRESET.
2. :class:`~cognis_memory.api.auth.ApiKeyAuth` authenticates ``/v1/`` requests from their
   headers alone, before any of the body is read.
3. :class:`RequestBody` reads the body within the size limit (413 otherwise) and refuses JSON
   nested too deeply with a 422 naming the field, before the framework parses it (Python's JSON
   parser raises RecursionError at about 1,000 levels, which surfaced as a 400 naming no field).
"""

from __future__ import annotations

import json
import uuid
import warnings
from collections.abc import Iterable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import DependencyUnavailableError
from ..telemetry.emitter import Telemetry
from ..validation import ID_PATTERN

#: Headers on every response: no MIME sniffing of JSON bodies, and nothing carrying memories is cached
#: by a browser or an intermediary.
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"cache-control", b"no-store"),
)

#: JSON bodies nested deeper than this are refused before parsing. Legitimate bodies need at most
#: about 20 levels (a message's metadata may be 16 deep, checked exactly by the service).
MAX_JSON_DEPTH = 40

#: Request fields that hold free-form JSON: a too-deep value is reported as that field.
FREEFORM_FIELDS = frozenset({"metadata"})


def error_body(code: str, message: str, field: str | None = None) -> bytes:
    return json.dumps({"error": {"code": code, "message": message, "field": field}}).encode()


async def send_error(
    send: Send,
    status: int,
    code: str,
    message: str,
    field: str | None = None,
    headers: Iterable[tuple[bytes, bytes]] = (),
) -> None:
    """A complete JSON error response (the API's error shape)."""
    body = error_body(code, message, field)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def unavailable_error(exc: DependencyUnavailableError) -> tuple[int, str, str, list[tuple[bytes, bytes]]]:
    """(status, code, message, headers) of the answer to a dependency that is down: 503, retry later."""
    return 503, "dependency_unavailable", f"{exc.dependency} is unavailable; retry later", [(b"retry-after", b"2")]


def request_ids(scope: Scope) -> tuple[str, str | None]:
    """(request id, client request id) set on the request's state by :class:`RequestEnvelope`."""
    state = scope.get("state") or {}
    return state.get("request_id", ""), state.get("client_request_id")


class RequestEnvelope:
    """Request ids, security headers, and the last line of defence for unexpected errors."""

    def __init__(self, app: ASGIApp, telemetry: Telemetry) -> None:
        self.app, self.telemetry = app, telemetry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = uuid.uuid4().hex
        client_rid = None
        for name, value in scope.get("headers", []):
            if name == b"x-request-id":
                text = value.decode("latin-1")
                client_rid = text if ID_PATTERN.fullmatch(text) else None
        state = scope.setdefault("state", {})
        state["request_id"], state["client_request_id"] = rid, client_rid
        extra = [(b"x-request-id", rid.encode()), *SECURITY_HEADERS]
        if client_rid is not None:
            extra.append((b"x-client-request-id", client_rid.encode()))
        started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        except Exception as exc:  # answered here so that the connection stays usable
            self.telemetry.log_error("unhandled_error", request_id=rid, error=exc)
            if started:  # part of a response is out: nothing valid can follow on this connection
                raise
            await send_error(
                send_with_headers, 500, "internal_error", "internal error; the request id is in the X-Request-Id header"
            )


class RequestBody:
    """Reads the request body within ``max_bytes`` and checks JSON nesting, then replays it to the app."""

    def __init__(self, app: ASGIApp, max_bytes: int, max_depth: int = MAX_JSON_DEPTH) -> None:
        self.app, self.max_bytes, self.max_depth = app, max_bytes, max_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = f"body: larger than {self.max_bytes} bytes"
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await send_error(send, 413, "body_too_large", too_large, "body")
                return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await send_error(send, 413, "body_too_large", too_large, "body")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if body and _is_json(scope):
            deep = too_deep_field(body, self.max_depth)
            if deep is not None:
                field = deep or "body"
                await send_error(send, 422, "invalid_input", f"{field}: JSON nested too deeply", field)
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def _is_json(scope: Scope) -> bool:
    for name, value in scope.get("headers", []):
        if name == b"content-type":
            return b"json" in value.lower()
    return False


def too_deep_field(body: bytes, max_depth: int) -> str | None:
    """None when ``body``'s JSON nesting is at most ``max_depth``; otherwise the field that is too deep
    (a path like ``messages[0].metadata``; "" for the body itself). Iterative, so any depth is safe;
    it tracks structure only and leaves validity to the parser."""
    stack: list[list] = []  # per open container: [kind, current key (object) or index (array)]
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if c == 0x22:  # a string: find its end, honouring escapes
            j = i + 1
            while j < n and body[j] != 0x22:
                j += 2 if body[j] == 0x5C else 1
            if stack and stack[-1][0] == "{" and _next_nonspace(body, j + 1) == 0x3A:  # an object key
                try:
                    stack[-1][1] = json.loads(body[i : j + 1])
                except ValueError:
                    stack[-1][1] = "?"
            i = j + 1
            continue
        if c == 0x7B or c == 0x5B:  # { or [
            if len(stack) >= max_depth:
                return _field_of([label for _, label in stack])
            stack.append(["{", None] if c == 0x7B else ["[", 0])
        elif (c == 0x7D or c == 0x5D) and stack:  # } or ]
            stack.pop()
        elif c == 0x2C and stack and stack[-1][0] == "[":  # the next array element
            stack[-1][1] += 1
        i += 1
    return None


def _next_nonspace(body: bytes, i: int) -> int | None:
    while i < len(body) and body[i] in b" \t\r\n":
        i += 1
    return body[i] if i < len(body) else None


def _field_of(path: list[str | int | None]) -> str:
    """The reported field of a too-deep value: the path up to the first free-form field
    (``messages[0].metadata``), else the first named field (``messages``), else the body ("")."""
    labels = [p for p in path if p is not None]
    cut = next((i for i, p in enumerate(labels) if p in FREEFORM_FIELDS), None)
    if cut is None:
        cut = next((i for i, p in enumerate(labels) if isinstance(p, str)), None)
        if cut is None:
            return ""
        labels = labels[cut : cut + 1]
    else:
        labels = labels[: cut + 1]
    out = ""
    for part in labels:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def __getattr__(name: str) -> Any:
    # The outermost middleware was called RequestContext; the old name works, with a warning, for one release.
    if name == "RequestContext":
        warnings.warn(f"{__name__}.RequestContext is deprecated; use RequestEnvelope", DeprecationWarning, stacklevel=2)
        return RequestEnvelope
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
