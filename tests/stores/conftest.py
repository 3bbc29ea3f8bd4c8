"""Fixtures of the store tests: every store kind on real backends, fresh namespaces, data helpers.

* ``harness`` (session scope, parametrized ``embedded`` / ``dual`` / ``opensearch``): one open
  store per kind, shared by the contract tests; each test uses fresh tenant ids (uuid), so the
  tests do not see each other's data.
* ``fresh_harness`` (function scope, same parameters): a store in a namespace of its own (new
  SQLite file, new PostgreSQL database, new OpenSearch index prefix) for tests of global
  operations such as job claiming.
* ``Harness.raw_counts(owner)`` counts the owner's records *directly in the backend* (SQL in
  SQLite/PostgreSQL, ``_count`` in OpenSearch), bypassing the store under test.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import psycopg
import pytest
import pytest_asyncio

from cognis_memory.domain import Owner
from cognis_memory.stores.dual import DualStore
from cognis_memory.stores.embedded import EmbeddedStore
from cognis_memory.stores.filters import owner_token
from cognis_memory.stores.opensearch import OpenSearchKeywordIndex, OpenSearchStore
from cognis_memory.stores.postgres import PostgresStore
from tests.stores.helpers import DIM, DIM_SHORT, STORE_KINDS, Harness, create_database, new_prefix, os_client


async def _embedded_harness(path: Path) -> Harness:
    store = EmbeddedStore(path, dim=DIM, dim_short=DIM_SHORT)
    await store.open()

    async def raw_counts(owner: Owner) -> dict[str, int]:
        with sqlite3.connect(path) as conn:
            key = (owner.tenant_id, owner.user_id)
            return {
                t: conn.execute(f"SELECT count(*) FROM {t} WHERE tenant_id = ? AND user_id = ?", key).fetchone()[0]
                for t in ("memories", "messages", "jobs")
            } | {
                "fts": conn.execute(
                    "SELECT count(*) FROM memories_fts WHERE owner = ?", (owner_token(owner),)
                ).fetchone()[0]
            }

    return Harness("embedded", store.roles(), raw_counts, [store.close])


async def _dual_harness(server_dsn: str, os_url: str) -> Harness:
    dsn = create_database(server_dsn)
    keyword = OpenSearchKeywordIndex(os_client(os_url), index_prefix=new_prefix(), replicas=0, refresh=True)
    store = DualStore(PostgresStore(dsn, dim=DIM, dim_short=DIM_SHORT, pool_max=4), keyword)
    await store.open()

    async def raw_counts(owner: Owner) -> dict[str, int]:
        out: dict[str, int] = {}
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            for t in ("memories", "messages", "jobs", "outbox"):
                cur = await conn.execute(
                    f"SELECT count(*) FROM {t} WHERE tenant_id = %s AND user_id = %s", (owner.tenant_id, owner.user_id)
                )
                row = await cur.fetchone()
                out[t] = int(row[0]) if row else -1
        await keyword.refresh_now()
        out["opensearch"] = await keyword.count(tenant_id=owner.tenant_id, user_id=owner.user_id)
        return out

    return Harness("dual", store.roles(), raw_counts, [store.close])


async def _opensearch_harness(os_url: str) -> Harness:
    store = OpenSearchStore(
        os_client(os_url), index_prefix=new_prefix(), dim=DIM, dim_short=DIM_SHORT, replicas=0, refresh=True
    )
    await store.open()

    async def raw_counts(owner: Owner) -> dict[str, int]:
        out: dict[str, int] = {}
        client = store.client
        query = {
            "query": {
                "bool": {"filter": [{"term": {"tenant_id": owner.tenant_id}}, {"term": {"user_id": owner.user_id}}]}
            }
        }
        for name in ("memories", "messages", "message_keys", "jobs"):
            index = getattr(store, name)
            await store.runner(client.indices.refresh, index=index)
            res = await store.runner(client.count, index=index, body=query)
            out[name] = int(res["count"])
        return out

    return Harness("opensearch", store.roles(), raw_counts, [store.close])


async def build_harness(request: pytest.FixtureRequest, kind: str, tmp: Path) -> Harness:
    if kind == "embedded":
        return await _embedded_harness(tmp / "memory.db")
    if kind == "dual":
        pg = request.getfixturevalue("postgres_server")
        osrv = request.getfixturevalue("opensearch_server")
        return await _dual_harness(pg.dsn, osrv.url)
    if kind == "opensearch":
        osrv = request.getfixturevalue("opensearch_server")
        return await _opensearch_harness(osrv.url)
    raise AssertionError(kind)


@pytest_asyncio.fixture(scope="session", params=STORE_KINDS)
async def harness(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Harness]:
    h = await build_harness(request, request.param, tmp_path_factory.mktemp(f"store-{request.param}"))
    yield h
    await h.close()


@pytest_asyncio.fixture(params=STORE_KINDS)
async def fresh_harness(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Harness]:
    h = await build_harness(request, request.param, tmp_path)
    yield h
    await h.close()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)
