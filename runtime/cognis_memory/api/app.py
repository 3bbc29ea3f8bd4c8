"""FastAPI application: thin HTTP mapping over :class:`~cognis_memory.service.MemoryService`.

Routes live under ``/v1/users/{user_id}/...``: the tenant comes from the API key, the user
from the path, so every call names its owner explicitly. ``/health`` (liveness) and
``/ready`` (readiness: each store component reachable) are open and reveal no data; the
OpenAPI docs are at ``/docs``. Everything else needs ``Authorization: Bearer <key>`` or
``X-API-Key: <key>``; read-only keys may search and read but not write.

Errors always have the shape ``{"error": {"code", "message", "field"}}``:
422 invalid input (naming the field), 401/403 auth, 404 not found (also for other owners'
ids), 409 conflict, 413 body too large, 503 dependency unavailable (retryable, with
``Retry-After``). Unexpected failures answer 500 without internals.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import ConflictError, DependencyUnavailable, InvalidInputError, NotFoundError, PermissionDeniedError
from ..service import MemoryService, MessageIn
from ..stores.base import ApiKeyRecord
from .schemas import (
    AddMessagesBody,
    AddMessagesOut,
    ContextBody,
    ContextMemoryOut,
    ContextOut,
    ErrorOut,
    ForgetOut,
    HistoryOut,
    JobOut,
    KeyOut,
    MemoryListOut,
    MemoryOut,
    MessageOut,
    SearchBody,
    SearchHitOut,
    SearchOut,
    UpdateMemoryBody,
    UserListOut,
    UserOut,
)

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorOut, "description": "Missing or unknown API key"},
    403: {"model": ErrorOut, "description": "The key may not do this (read-only)"},
    404: {"model": ErrorOut, "description": "Not found for this tenant and user"},
    422: {"model": ErrorOut, "description": "Invalid input; `field` names it"},
    503: {"model": ErrorOut, "description": "A dependency is unavailable; retry later"},
}


def _error(status: int, code: str, message: str, field: str | None = None, **headers: str) -> JSONResponse:
    return JSONResponse(
        status_code=status, content={"error": {"code": code, "message": message, "field": field}}, headers=headers
    )


class BodySizeLimit:
    """Reject bodies over ``max_bytes`` with 413, whether or not Content-Length is sent."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await _error(413, "body_too_large", f"body: larger than {self.max_bytes} bytes", "body")(
                    scope, receive, send
                )
                return
        seen, too_large = 0, False

        async def limited() -> Message:
            nonlocal seen, too_large
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    too_large = True
                    raise _BodyTooLarge()
            return message

        async def guarded_send(message: Message) -> None:
            # FastAPI turns an exception raised while reading the body into its own 400
            # response; once the limit was hit, that answer is dropped for the 413 below.
            if not too_large:
                await send(message)

        try:
            await self.app(scope, limited, guarded_send)
        except _BodyTooLarge:
            pass
        if too_large:
            await _error(413, "body_too_large", f"body: larger than {self.max_bytes} bytes", "body")(
                scope, receive, send
            )


class _BodyTooLarge(Exception):
    pass


class _Unauthorized(Exception):
    pass


def _field_path(loc: tuple | list) -> str:
    """Pydantic's location as a field path: ("body", "messages", 0, "content") -> messages[0].content."""
    out = ""
    for i, part in enumerate(loc):
        if i == 0 and part in ("body", "query", "path", "header"):
            continue  # only the first element is the location; a field may be called "query"
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


async def api_key(
    request: Request,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
    x_api_key: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> ApiKeyRecord:
    """The caller's key record; read-only keys may only read and search."""
    service: MemoryService = request.app.state.service
    key = x_api_key
    if authorization and authorization.lower().startswith("bearer "):
        key = authorization[7:].strip()
    if service.settings.auth_disabled and not key:
        return ApiKeyRecord(key_hash="", tenant_id=service.settings.auth_disabled_tenant)
    record = await service.authenticate(key or "")
    if record is None:
        raise _Unauthorized()
    route = request.scope.get("route")
    is_search = request.method == "POST" and getattr(route, "name", None) in ("search", "context")
    if record.read_only and request.method not in ("GET", "HEAD") and not is_search:
        raise PermissionDeniedError("this API key is read-only")
    return record


Key = Annotated[ApiKeyRecord, Depends(api_key)]


def create_app(service: MemoryService, *, manage_lifecycle: bool = True) -> FastAPI:
    """The ASGI app. With ``manage_lifecycle`` the app starts and closes the service."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if manage_lifecycle:
            await service.start()
        try:
            yield
        finally:
            if manage_lifecycle:
                await service.close()

    app = FastAPI(
        title="cognis-memory",
        version="1.0.0",
        description="Long-term memory for conversational agents: store what users said, recall it later.",
        lifespan=lifespan,
        responses=ERROR_RESPONSES,
    )
    app.state.service = service
    settings = service.settings
    max_body = max(1 << 20, settings.max_message_bytes * settings.max_messages_per_request + (1 << 20))

    # -- errors -------------------------------------------------------------------------
    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        first = errors[0] if errors else {}
        field = _field_path(first.get("loc", ())) or "body"
        msg = first.get("msg", "invalid input")
        if first.get("type") == "extra_forbidden":
            msg = "unknown field"
        if first.get("type") == "json_invalid":
            field, msg = "body", "not valid JSON"
        return _error(422, "invalid_input", f"{field}: {msg}", field)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:  # the body could not be parsed (invalid UTF-8, broken JSON, too deep)
            return _error(400, "invalid_body", "body: not valid UTF-8 JSON", "body")
        codes = {404: "not_found", 405: "method_not_allowed"}
        return _error(exc.status_code, codes.get(exc.status_code, "http_error"), str(exc.detail))

    @app.exception_handler(InvalidInputError)
    async def _invalid(_: Request, exc: InvalidInputError) -> JSONResponse:
        return _error(422, "invalid_input", str(exc), exc.field)

    @app.exception_handler(NotFoundError)
    async def _not_found(_: Request, exc: NotFoundError) -> JSONResponse:
        return _error(404, "not_found", str(exc))

    @app.exception_handler(ConflictError)
    async def _conflict(_: Request, exc: ConflictError) -> JSONResponse:
        return _error(409, "conflict", str(exc))

    @app.exception_handler(PermissionDeniedError)
    async def _forbidden(_: Request, exc: PermissionDeniedError) -> JSONResponse:
        return _error(403, "forbidden", str(exc))

    @app.exception_handler(DependencyUnavailable)
    async def _unavailable(_: Request, exc: DependencyUnavailable) -> JSONResponse:
        return _error(
            503, "dependency_unavailable", f"{exc.dependency} is unavailable; retry later", **{"Retry-After": "2"}
        )

    @app.exception_handler(RecursionError)
    async def _too_deep(_: Request, exc: RecursionError) -> JSONResponse:
        return _error(422, "invalid_input", "body: JSON nested too deeply", "body")

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        service.telemetry.log_error("unhandled_error", request_id=getattr(request.state, "request_id", None), error=exc)
        return _error(500, "internal_error", "internal error; the request id is in the X-Request-Id header")

    # -- request ids --------------------------------------------------------------------
    @app.middleware("http")
    async def _request_id(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        incoming = request.headers.get("x-request-id", "")
        rid = incoming if 0 < len(incoming) <= 128 and incoming.isprintable() else uuid.uuid4().hex
        request.state.request_id = rid
        response = await call_next(request)
        response.headers["X-Request-Id"] = rid
        return response

    app.add_middleware(BodySizeLimit, max_bytes=max_body)
    if service.telemetry.tracing is not None:  # outermost: a SERVER span per request, child of its traceparent
        from ..telemetry.tracing import TraceRequests

        app.add_middleware(TraceRequests, tracer=service.telemetry.tracing.tracer)

    @app.exception_handler(_Unauthorized)
    async def _unauth(_: Request, exc: Exception) -> JSONResponse:
        return _error(401, "unauthorized", "missing or unknown API key", **{"WWW-Authenticate": "Bearer"})

    def rid(request: Request) -> str:
        return request.state.request_id

    # -- routes -------------------------------------------------------------------------
    @app.get("/health", tags=["health"], summary="Liveness")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/ready", tags=["health"], summary="Readiness: every store component reachable")
    async def ready() -> JSONResponse:
        ok, checks = await service.readiness()
        return JSONResponse(status_code=200 if ok else 503, content={"ready": ok, "checks": checks})

    @app.post(
        "/v1/users/{user_id}/messages",
        tags=["messages"],
        response_model=AddMessagesOut,
        status_code=201,
        summary="Add messages (sync: all stages; async: store now, extract in a job)",
    )
    async def add_messages(user_id: str, body: AddMessagesBody, key: Key, request: Request, response: Response):
        result = await service.add_messages(
            key.tenant_id,
            user_id,
            [MessageIn(**m.model_dump()) for m in body.messages],
            background=body.mode == "async",
            request_id=rid(request),
        )
        if result.job is not None:
            response.status_code = 202
        return AddMessagesOut(
            messages=[MessageOut.of(m, c) for m, c in zip(result.messages, result.created, strict=True)],
            memories=[MemoryOut.of(m) for m in result.raw_memories],
            job=JobOut.of(result.job) if result.job else None,
            extraction=result.extraction,
        )

    @app.post("/v1/users/{user_id}/search", tags=["search"], response_model=SearchOut, summary="Search memories")
    async def search(user_id: str, body: SearchBody, key: Key, request: Request):
        res = await service.search(
            key.tenant_id, user_id, body.query, request_id=rid(request), **body.model_dump(exclude={"query"})
        )
        return SearchOut(
            results=[
                SearchHitOut(
                    memory=MemoryOut.of(h.memory),
                    score=h.score,
                    scores=h.scores if body.explain else None,
                    history=[MemoryOut.of(v) for v in h.history],
                )
                for h in res.hits
            ],
            degraded=res.degraded,
            query_analysis=res.analysis.to_dict(),
            explain=res.explain,
        )

    @app.post(
        "/v1/users/{user_id}/context",
        tags=["search"],
        response_model=ContextOut,
        summary="Relevant memories as a compact text block for a system prompt, sized to a token budget",
    )
    async def context(user_id: str, body: ContextBody, key: Key, request: Request):
        assembled, res = await service.context(
            key.tenant_id, user_id, body.message, request_id=rid(request), **body.model_dump(exclude={"message"})
        )
        return ContextOut(
            text=assembled.text,
            tokens=assembled.tokens,
            memories=[
                ContextMemoryOut(memory=MemoryOut.of(i.memory), history=[MemoryOut.of(v) for v in i.history])
                for i in assembled.items
            ],
            omitted=assembled.omitted,
            degraded=res.degraded,
            query_analysis=res.analysis.to_dict(),
        )

    @app.get("/v1/users/{user_id}/memories", tags=["memories"], response_model=MemoryListOut, summary="List memories")
    async def list_memories(
        user_id: str,
        key: Key,
        include_history: bool = False,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        after: str | None = None,
    ):
        page = await service.list_memories(
            key.tenant_id, user_id, include_history=include_history, limit=limit, after=after
        )
        return MemoryListOut(
            memories=[MemoryOut.of(m) for m in page], next_after=page[-1].id if len(page) == limit else None
        )

    @app.get("/v1/users/{user_id}/memories/{memory_id}", tags=["memories"], response_model=MemoryOut)
    async def get_memory(user_id: str, memory_id: str, key: Key):
        return MemoryOut.of(await service.get_memory(key.tenant_id, user_id, memory_id))

    @app.get(
        "/v1/users/{user_id}/memories/{memory_id}/history",
        tags=["memories"],
        response_model=HistoryOut,
        summary="Every version of the memory's chain, oldest first",
    )
    async def memory_history(user_id: str, memory_id: str, key: Key):
        return HistoryOut(versions=[MemoryOut.of(m) for m in await service.history(key.tenant_id, user_id, memory_id)])

    @app.patch(
        "/v1/users/{user_id}/memories/{memory_id}",
        tags=["memories"],
        response_model=MemoryOut,
        summary="Write a new version of a memory",
    )
    async def update_memory(user_id: str, memory_id: str, body: UpdateMemoryBody, key: Key):
        return MemoryOut.of(
            await service.update_memory(
                key.tenant_id,
                user_id,
                memory_id,
                content=body.content,
                category=body.category,
                event_time=body.event_time,
            )
        )

    @app.delete(
        "/v1/users/{user_id}/memories/{memory_id}",
        tags=["memories"],
        response_model=MemoryOut,
        summary="Delete a memory (tombstone version; history kept)",
    )
    async def delete_memory(user_id: str, memory_id: str, key: Key):
        return MemoryOut.of(await service.delete_memory(key.tenant_id, user_id, memory_id))

    @app.delete(
        "/v1/users/{user_id}", tags=["users"], response_model=ForgetOut, summary="Forget a user: hard delete everything"
    )
    async def forget_user(user_id: str, key: Key):
        return ForgetOut(deleted=await service.forget_user(key.tenant_id, user_id))

    @app.get("/v1/users/{user_id}/jobs/{job_id}", tags=["jobs"], response_model=JobOut, summary="Ingest job status")
    async def job_status(user_id: str, job_id: str, key: Key):
        return JobOut.of(await service.get_job(key.tenant_id, user_id, job_id))

    @app.get("/v1/users", tags=["users"], response_model=UserListOut, summary="The tenant's users, paged by user id")
    async def list_users(
        key: Key, limit: Annotated[int, Query(ge=1, le=1000)] = 100, after: Annotated[str | None, Query()] = None
    ):
        page = await service.list_users(key.tenant_id, limit=limit, after=after)
        return UserListOut(
            users=[UserOut.of(u) for u in page], next_after=page[-1].user_id if len(page) == limit else None
        )

    @app.get("/v1/key", tags=["keys"], response_model=KeyOut, summary="The calling key: its tenant, whether read-only")
    async def key_info(key: Key):
        return KeyOut(tenant_id=key.tenant_id, read_only=key.read_only)

    if settings.inspector:  # static files only; their data comes from the routes above, with the same keys
        from ..ui import inspector_app

        app.mount("/ui", inspector_app(), name="ui")

    return app


def app_from_env() -> FastAPI:
    """ASGI factory for ``uvicorn --factory cognis_memory.api.app:app_from_env``."""
    return create_app(MemoryService.from_settings())
