"""FastAPI application: thin HTTP mapping over :class:`~cognis_memory.service.MemoryService`.

Routes live under ``/v1/users/{user_id}/...``: the tenant comes from the API key, the user
from the path, so every call names its owner explicitly. ``/health`` (liveness) and
``/ready`` (readiness: each store component reachable) are open and reveal no data; the
OpenAPI docs are at ``/docs``. Everything under ``/v1/`` needs ``Authorization: Bearer <key>``
or ``X-API-Key: <key>``, checked before the body is read (:mod:`.auth`); each route declares
whether it reads (:data:`~.auth.ReadKey`) or writes (:data:`~.auth.WriteKey`), and read-only
keys get 403 on writes. The middleware (:mod:`.middleware`) adds a server-generated request id,
the security headers, the body limits, and answers unexpected failures with a 500 body while
keeping the connection usable.

Errors always have the shape ``{"error": {"code", "message", "field"}}``:
422 invalid input (naming the field), 401/403 auth, 404 not found (also for other owners'
ids), 409 conflict, 413 body too large, 503 dependency unavailable (retryable, with
``Retry-After``). Unexpected failures answer 500 without internals.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import FastAPI, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..domain import JobStatus
from ..errors import (
    ConflictError,
    DependencyUnavailableError,
    InvalidInputError,
    NotFoundError,
    PermissionDeniedError,
)
from ..service import MemoryService, MessageIn
from .auth import ApiKeyAuth, ReadKey, WriteKey
from .middleware import RequestBody, RequestContext, request_ids, unavailable_error
from .schemas import (
    AddMessagesBody,
    AddMessagesOut,
    ContextBody,
    ContextMemoryOut,
    ContextOut,
    ErrorOut,
    ForgetOut,
    HistoryOut,
    JobListOut,
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


def _ids(request: Request) -> dict[str, str | None]:
    """The request's ids for the service's log line (set by the RequestContext middleware)."""
    request_id, client_request_id = request_ids(request.scope)
    return {"request_id": request_id, "client_request_id": client_request_id}


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
        if exc.status_code == 400:  # the body could not be parsed (invalid UTF-8)
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

    @app.exception_handler(DependencyUnavailableError)
    async def _unavailable(_: Request, exc: DependencyUnavailableError) -> JSONResponse:
        status, code, message, headers = unavailable_error(exc)
        return _error(status, code, message, **{k.decode(): v.decode() for k, v in headers})

    # -- middleware (added innermost first: RequestContext ends up outermost) ----------------
    app.add_middleware(RequestBody, max_bytes=settings.max_request_bytes)
    app.add_middleware(ApiKeyAuth, service=service)
    app.add_middleware(RequestContext, telemetry=service.telemetry)
    if service.telemetry.tracing is not None:  # outermost: a SERVER span per request, child of its traceparent
        from ..telemetry.tracing import TraceRequests

        app.add_middleware(TraceRequests, tracer=service.telemetry.tracing.tracer)

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
    async def add_messages(user_id: str, body: AddMessagesBody, key: WriteKey, request: Request, response: Response):
        result = await service.add_messages(
            key.tenant_id,
            user_id,
            [MessageIn(**m.model_dump()) for m in body.messages],
            background=body.mode == "async",
            **_ids(request),
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
    async def search(user_id: str, body: SearchBody, key: ReadKey, request: Request):
        res = await service.search(
            key.tenant_id, user_id, body.query, **_ids(request), **body.model_dump(exclude={"query"})
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
    async def context(user_id: str, body: ContextBody, key: ReadKey, request: Request):
        assembled, res = await service.context(
            key.tenant_id, user_id, body.message, **_ids(request), **body.model_dump(exclude={"message"})
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
        key: ReadKey,
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
    async def get_memory(user_id: str, memory_id: str, key: ReadKey):
        return MemoryOut.of(await service.get_memory(key.tenant_id, user_id, memory_id))

    @app.get(
        "/v1/users/{user_id}/memories/{memory_id}/history",
        tags=["memories"],
        response_model=HistoryOut,
        summary="Every version of the memory's chain, oldest first",
    )
    async def memory_history(user_id: str, memory_id: str, key: ReadKey):
        return HistoryOut(versions=[MemoryOut.of(m) for m in await service.history(key.tenant_id, user_id, memory_id)])

    @app.patch(
        "/v1/users/{user_id}/memories/{memory_id}",
        tags=["memories"],
        response_model=MemoryOut,
        summary="Write a new version of a memory",
    )
    async def update_memory(user_id: str, memory_id: str, body: UpdateMemoryBody, key: WriteKey):
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
    async def delete_memory(user_id: str, memory_id: str, key: WriteKey):
        return MemoryOut.of(await service.delete_memory(key.tenant_id, user_id, memory_id))

    @app.delete(
        "/v1/users/{user_id}", tags=["users"], response_model=ForgetOut, summary="Forget a user: hard delete everything"
    )
    async def forget_user(user_id: str, key: WriteKey):
        return ForgetOut(deleted=await service.forget_user(key.tenant_id, user_id))

    @app.get("/v1/users/{user_id}/jobs/{job_id}", tags=["jobs"], response_model=JobOut, summary="Ingest job status")
    async def job_status(user_id: str, job_id: str, key: ReadKey):
        return JobOut.of(await service.get_job(key.tenant_id, user_id, job_id))

    @app.get("/v1/users", tags=["users"], response_model=UserListOut, summary="The tenant's users, paged by user id")
    async def list_users(
        key: ReadKey, limit: Annotated[int, Query(ge=1, le=1000)] = 100, after: Annotated[str | None, Query()] = None
    ):
        page = await service.list_users(key.tenant_id, limit=limit, after=after)
        return UserListOut(
            users=[UserOut.of(u) for u in page], next_after=page[-1].user_id if len(page) == limit else None
        )

    @app.get("/v1/key", tags=["keys"], response_model=KeyOut, summary="The calling key: its tenant, whether read-only")
    async def key_info(key: ReadKey):
        return KeyOut(tenant_id=key.tenant_id, read_only=key.read_only)

    @app.get(
        "/v1/jobs",
        tags=["jobs"],
        response_model=JobListOut,
        summary="The tenant's ingest jobs, e.g. the dead letters (status=dead); paged by id",
    )
    async def list_jobs(
        key: ReadKey,
        status: JobStatus | None = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        after: str | None = None,
    ):
        page = await service.list_jobs(key.tenant_id, status=status, limit=limit, after=after)
        return JobListOut(jobs=[JobOut.of(j) for j in page], next_after=page[-1].id if len(page) == limit else None)

    if settings.inspector:  # static files only; their data comes from the routes above, with the same keys
        from ..ui import inspector_app

        app.mount("/ui", inspector_app(), name="ui")

    return app


def app_from_env() -> FastAPI:
    """ASGI factory for ``uvicorn --factory cognis_memory.api.app:app_from_env``."""
    return create_app(MemoryService.from_settings())
