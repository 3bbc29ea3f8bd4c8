"""A real cognis-memory HTTP server for the agent-integration tests.

uvicorn serves the real app on a free 127.0.0.1 port from its own thread and event loop;
the app's lifespan starts and closes the service there, so the tests talk to it only over
HTTP, like an agent would. ``FaultFront`` sits in front of the app (real HTTP, real app
behind it) and can answer the next requests with an error status, delay them, or run them
and then lose the answer, so the client's retries are tested against a server that counts
what reached it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from cognis_dev.http_server import serve_in_thread
from starlette.types import ASGIApp, Receive, Scope, Send

from cognis_memory.api.app import create_app
from cognis_memory.config import Settings
from cognis_memory.service import MemoryService
from cognis_memory.stores.embedded import EmbeddedStore

API_KEYS = "agent-key=acme,agent-read=acme:read,other-key=globex"


@dataclass
class Fault:
    path_suffix: str  # applies to requests whose path ends with this
    times: int  # how many requests it hits
    status: int = 503
    retry_after: str | None = "0"
    delay_s: float = 0.0  # sleep before answering (a slow server)
    after_app: bool = False  # run the real app first, then replace its answer (a lost response)


@dataclass
class FaultFront:
    app: ASGIApp
    faults: list[Fault] = field(default_factory=list)
    seen: list[tuple[str, str]] = field(default_factory=list)  # (method, path) of every request

    def count(self, method: str, suffix: str) -> int:
        return sum(1 for m, p in self.seen if m == method and p.endswith(suffix))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.seen.append((scope["method"], scope["path"]))
        fault = next((f for f in self.faults if f.times > 0 and scope["path"].endswith(f.path_suffix)), None)
        if fault is None:
            await self.app(scope, receive, send)
            return
        fault.times -= 1
        if fault.delay_s:
            await asyncio.sleep(fault.delay_s)
        if fault.after_app:

            async def swallow(message: dict) -> None:
                return None

            await self.app(scope, receive, swallow)
        headers = [(b"content-type", b"application/json")]
        if fault.retry_after is not None:
            headers.append((b"retry-after", fault.retry_after.encode()))
        body = b'{"error": {"code": "dependency_unavailable", "message": "injected fault", "field": null}}'
        await send({"type": "http.response.start", "status": fault.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


@dataclass
class LiveServer:
    url: str
    front: FaultFront


@pytest.fixture
def live_server(tmp_path, embedder) -> Iterator[LiveServer]:
    """The real app on the embedded store, served over HTTP by uvicorn in a thread."""
    settings = Settings(data_dir=tmp_path, run_worker=False, api_keys=API_KEYS, metrics_enabled=False)
    store = EmbeddedStore(
        settings.embedded.resolved_sqlite_path, dim=embedder.dim, dim_short=settings.encoder.dim_short
    )
    service = MemoryService(settings, store=store, embedder=embedder)
    front = FaultFront(create_app(service))
    with serve_in_thread(front) as url:
        yield LiveServer(url, front)
