"""Every route of the API and every dependency it declares is a coroutine: FastAPI runs a plain ``def`` endpoint
or dependency on its thread pool, a thread hop (and a wait for a free thread) per request and call."""

from __future__ import annotations

import inspect
from typing import Any

from fastapi.routing import APIRoute

from cognis_memory.api.routes import ROUTERS


def _runs_on_the_loop(call: Any) -> bool:
    """A coroutine function, or an instance whose class's ``__call__`` is one (``HTTPBearer``, ``APIKeyHeader``)."""
    return inspect.iscoroutinefunction(call) or inspect.iscoroutinefunction(type(call).__call__)


def test_no_route_or_dependency_runs_on_the_thread_pool() -> None:
    on_threads: list[str] = []

    def walk(path: str, dependant: Any) -> None:
        if dependant.call is not None and not _runs_on_the_loop(dependant.call):
            on_threads.append(f"{path}: {getattr(dependant.call, '__qualname__', dependant.call)!r}")
        for dependency in dependant.dependencies:
            walk(path, dependency)

    routes = [r for router in ROUTERS for r in router.routes if isinstance(r, APIRoute)]
    assert any(r.path.startswith("/v1/") for r in routes)
    for route in routes:
        walk(route.path, route.dependant)
    assert on_threads == []
