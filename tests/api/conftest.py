"""One API environment per test module: an embedded-store service with the real MiniLM model,
the FastAPI app over it (ASGI, no server), captured telemetry and three API keys.

Keys: ``key-a`` (tenant-a), ``key-a-read`` (tenant-a, read-only), ``key-b`` (tenant-b).
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest_asyncio

from tests.conftest import CapturedTelemetry

KEY_A, KEY_A_READ, KEY_B = "key-a", "key-a-read", "key-b"
TENANT_A, TENANT_B = "tenant-a", "tenant-b"
API_KEYS = f"{KEY_A}={TENANT_A},{KEY_A_READ}={TENANT_A}:read,{KEY_B}={TENANT_B}"


class ApiEnv:
    def __init__(self, service: Any, captured: CapturedTelemetry, db_path: Path) -> None:
        from cognis_memory.api.app import create_app

        self.service = service
        self.captured = captured
        self.db_path = db_path
        self.app = create_app(service, manage_lifecycle=False)

    def client(self, key: str | None = KEY_A, *, raise_app_exceptions: bool = True) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        transport = httpx.ASGITransport(app=self.app, raise_app_exceptions=raise_app_exceptions)
        return httpx.AsyncClient(transport=transport, base_url="http://testserver", headers=headers, timeout=60)

    def count(self, table: str, tenant: str | None = None, user: str | None = None) -> int:
        """Rows of a table straight from the SQLite file (optionally of one owner)."""
        sql, params = f"SELECT count(*) FROM {table}", []
        if tenant is not None:
            sql += " WHERE tenant_id = ? AND user_id = ?"
            params = [tenant, user]
        with sqlite3.connect(self.db_path) as conn:
            return conn.execute(sql, params).fetchone()[0]

    def table_counts(self) -> dict[str, int]:
        return {t: self.count(t) for t in ("messages", "memories", "memories_fts", "jobs")}

    def log_lines(self, event: str | None = None) -> list[dict[str, Any]]:
        return [r for r in self.captured.log_lines() if event is None or r.get("event") == event]


async def build_env(tmp_path: Path, embedder: Any, *, llm: Any = None, **settings: Any) -> ApiEnv:
    from cognis_memory.config import Settings
    from cognis_memory.service import MemoryService
    from cognis_memory.stores.embedded import EmbeddedStore

    captured = CapturedTelemetry()
    cfg = Settings(data_dir=tmp_path, run_worker=False, api_keys=API_KEYS, **settings)
    store = EmbeddedStore(cfg.embedded.resolved_sqlite_path, dim=embedder.dim, dim_short=cfg.encoder.dim_short)
    service = MemoryService(cfg, store=store, embedder=embedder, llm=llm, telemetry=captured.telemetry)
    await service.start()
    return ApiEnv(service, captured, cfg.embedded.resolved_sqlite_path)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def api_env(tmp_path_factory, embedder) -> AsyncIterator[ApiEnv]:
    """Shared by the tests of one module (each test uses its own user ids)."""
    env = await build_env(tmp_path_factory.mktemp("api"), embedder)
    yield env
    await env.service.close()


async def add(client: httpx.AsyncClient, user: str, *messages: dict[str, Any] | str, **body: Any) -> dict[str, Any]:
    """POST messages (strings become ``{"content": s}``) and return the JSON answer (2xx asserted)."""
    msgs = [{"content": m} if isinstance(m, str) else m for m in messages]
    r = await client.post(f"/v1/users/{user}/messages", json={"messages": msgs, **body})
    assert r.status_code in (201, 202), r.text
    return r.json()


async def search(client: httpx.AsyncClient, user: str, query: str, **body: Any) -> dict[str, Any]:
    r = await client.post(f"/v1/users/{user}/search", json={"query": query, **body})
    assert r.status_code == 200, r.text
    return r.json()


async def listing(client: httpx.AsyncClient, user: str, *, include_history: bool = True) -> list[dict[str, Any]]:
    r = await client.get(
        f"/v1/users/{user}/memories", params={"include_history": str(include_history).lower(), "limit": 1000}
    )
    assert r.status_code == 200, r.text
    return r.json()["memories"]
