"""FastAPI application: thin HTTP mapping over :class:`~cognis_memory.service.MemoryService`.

Each resource's routes are a module of :mod:`.routes` (an ``APIRouter``), the error bodies come
from :mod:`.errors`; this module only assembles them with the middleware. Routes live under
``/v1/users/{user_id}/...``: the tenant comes from the API key, the user from the path, so every call names its owner explicitly. ``/health`` (liveness) and
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

The docs pages (Swagger UI at ``/docs``, ReDoc at ``/redoc``) load their scripts and styles from
this app (:data:`DOCS_ASSETS_PATH`, files of the ``fastapi-offline`` dependency) instead of a CDN,
so they work on a machine without network access like the rest of the service.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from ..service import MemoryService
from .auth import ApiKeyAuth
from .errors import ERROR_RESPONSES, install_error_handlers
from .middleware import RequestBody, RequestEnvelope
from .routes import ROUTERS

#: Where the docs pages' JavaScript, CSS and icon are served (open, like ``/docs`` itself).
DOCS_ASSETS_PATH = "/docs-assets"


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

    # FastAPIOffline is FastAPI with /docs and /redoc built by FastAPI's own get_swagger_ui_html and
    # get_redoc_html, pointed at the Swagger UI and ReDoc files it ships, mounted at DOCS_ASSETS_PATH.
    app = FastAPIOffline(
        static_url=DOCS_ASSETS_PATH,
        title="cognis-memory",
        version="1.0.0",
        description="Long-term memory for conversational agents: store what users said, recall it later.",
        lifespan=lifespan,
        responses=ERROR_RESPONSES,
    )
    app.state.service = service
    settings = service.settings
    install_error_handlers(app)

    # -- middleware (added innermost first: RequestEnvelope ends up outermost) ----------------
    app.add_middleware(RequestBody, max_bytes=settings.api.max_request_bytes)
    app.add_middleware(ApiKeyAuth, service=service)
    app.add_middleware(RequestEnvelope, telemetry=service.telemetry)
    if service.telemetry.tracing is not None:  # outermost: a SERVER span per request, child of its traceparent
        from ..telemetry.tracing import TraceRequests

        app.add_middleware(TraceRequests, tracer=service.telemetry.tracing.tracer)

    for router in ROUTERS:
        app.include_router(router)
    if settings.api.inspector:  # static files only; their data comes from the routes, with the same keys
        from ..ui import inspector_app

        app.mount("/ui", inspector_app(), name="ui")
    return app


def app_from_env() -> FastAPI:
    """ASGI factory for ``uvicorn --factory cognis_memory.api.app:app_from_env``."""
    return create_app(MemoryService.from_settings())
