"""Every store kind as the test suites build, reopen and look into it: the one place a new store kind adds to
the tests.

The contract suite (``tests/stores``) and the reliability suites (``tests/reliability``) run on every kind of
the registry (:data:`cognis_memory.stores.registry.STORES`) through :data:`KINDS`: one
:class:`StoreKindHarness` per kind builds a store in a fresh namespace of the shared session servers (a new
SQLite file, PostgreSQL database or OpenSearch index prefix), opens another store object on the same
namespace (what a restarted process sees), and reads the backend directly, bypassing the store under test:
an owner's records (the forget proofs), the stored API keys (no plaintext), and the ``COGNIS_*`` variables
that point the CLI at the same namespace.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest

from cognis_memory.domain import Owner
from cognis_memory.stores.filters import owner_token


def unique_prefix(tag: str) -> str:
    """A lowercase OpenSearch index prefix / database name unique to this run."""
    return f"rel{tag}{uuid.uuid4().hex[:10]}"


def os_client(url: str, timeout: float = 10.0):
    from opensearchpy import OpenSearch

    return OpenSearch(hosts=[url], timeout=timeout, max_retries=0, retry_on_timeout=False)


@dataclass
class StoreHandle:
    """A store (its backend object) plus where its data lives, so a test can read the backend directly."""

    kind: str
    store: Any
    sqlite_path: Path | None = None
    pg_dsn: str | None = None
    os_url: str | None = None
    prefix: str | None = None


# -- builders --------------------------------------------------------------------------------------
def build_embedded(path: Path, dim: int, dim_short: int, *, vector_space: str | None = None) -> StoreHandle:
    from cognis_memory.stores.embedded import EmbeddedStore

    store = EmbeddedStore(path, dim=dim, dim_short=dim_short, vector_space=vector_space)
    return StoreHandle("embedded", store, sqlite_path=path)


def build_dual(
    pg_dsn: str,
    os_url: str,
    dim: int,
    dim_short: int,
    *,
    prefix: str | None = None,
    refresh: Any = True,
    pool_max: int = 4,
    pg_kwargs: dict[str, Any] | None = None,
    vector_space: str | None = None,
    **dual_kwargs: Any,
) -> StoreHandle:
    from cognis_memory.stores.dual import DualStore
    from cognis_memory.stores.opensearch import OpenSearchKeywordIndex
    from cognis_memory.stores.postgres import PostgresStore

    prefix = prefix or unique_prefix("d")
    pg = PostgresStore(
        pg_dsn, dim=dim, dim_short=dim_short, pool_max=pool_max, vector_space=vector_space, **(pg_kwargs or {})
    )
    kw = OpenSearchKeywordIndex(
        os_client(os_url), index_prefix=prefix, replicas=0, refresh=refresh, search_timeout_s=2.0, write_timeout_s=5.0
    )
    return StoreHandle("dual", DualStore(pg, kw, **dual_kwargs), pg_dsn=pg_dsn, os_url=os_url, prefix=prefix)


def build_opensearch(
    os_url: str,
    dim: int,
    dim_short: int,
    *,
    prefix: str | None = None,
    refresh: Any = True,
    vector_space: str | None = None,
) -> StoreHandle:
    from cognis_memory.stores.opensearch import OpenSearchStore

    prefix = prefix or unique_prefix("o")
    store = OpenSearchStore(
        os_client(os_url), index_prefix=prefix, dim=dim, dim_short=dim_short, replicas=0, refresh=refresh,
        search_timeout_s=5.0, write_timeout_s=5.0, vector_space=vector_space,
    )  # fmt: skip
    return StoreHandle("opensearch", store, os_url=os_url, prefix=prefix)


# -- reading the backends directly -------------------------------------------------------------------
def sqlite_rows(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


async def pg_rows(dsn: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    import psycopg

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute(sql, params)
        return list(await cur.fetchall())


def os_count(url: str, index: str, query: dict[str, Any] | None = None) -> int:
    client = os_client(url)
    try:
        client.indices.refresh(index=index)
        body = {"query": query or {"match_all": {}}}
        return int(client.count(index=index, body=body)["count"])
    finally:
        client.close()


def owner_query(owner: Owner) -> dict[str, Any]:
    return {"bool": {"filter": [{"term": {"tenant_id": owner.tenant_id}}, {"term": {"user_id": owner.user_id}}]}}


# -- one harness per store kind ----------------------------------------------------------------------
class StoreKindHarness(Protocol):
    """How the suites build and look into one store kind. ``options`` are the kind's own builder options
    (``vector_space`` is accepted by every kind)."""

    #: the server fixtures :meth:`new` asks for; a kind with none runs under ``-m "not integration"``
    servers: tuple[str, ...]

    def new(
        self, request: pytest.FixtureRequest, tmp_dir: Path, dim: int, dim_short: int, **options: Any
    ) -> StoreHandle:
        """A store in a fresh namespace (``request``: the pytest request, for the server fixtures)."""
        ...

    def reopen(self, handle: StoreHandle, dim: int, dim_short: int, **options: Any) -> StoreHandle:
        """A new store object on the namespace of ``handle``: what a restarted process opens."""
        ...

    async def owner_counts(self, handle: StoreHandle, owner: Owner) -> dict[str, int]:
        """How many records of ``owner`` each part of the backend holds (an outbox part ends in ``outbox``)."""
        ...

    async def api_key_rows(self, handle: StoreHandle, key: str) -> list[dict[str, Any]]:
        """Every stored API-key record (``key_hash``, ``tenant_id``, ``read_only``); fails if the plaintext
        ``key`` is anywhere in the backend's key storage."""
        ...

    def environment(self, handle: StoreHandle) -> dict[str, str]:
        """The ``COGNIS_*`` variables under which the configured service opens the namespace of ``handle``."""
        ...


class EmbeddedHarness:
    servers: tuple[str, ...] = ()

    def new(
        self, request: pytest.FixtureRequest, tmp_dir: Path, dim: int, dim_short: int, **options: Any
    ) -> StoreHandle:
        return build_embedded(tmp_dir / f"{unique_prefix('e')}.db", dim, dim_short, **options)

    def reopen(self, handle: StoreHandle, dim: int, dim_short: int, **options: Any) -> StoreHandle:
        assert handle.sqlite_path is not None
        return build_embedded(handle.sqlite_path, dim, dim_short, **options)

    async def owner_counts(self, handle: StoreHandle, owner: Owner) -> dict[str, int]:
        assert handle.sqlite_path is not None
        key = (owner.tenant_id, owner.user_id)
        sql = "SELECT count(*) FROM {} WHERE tenant_id = ? AND user_id = ?"
        counts = {
            t: sqlite_rows(handle.sqlite_path, sql.format(t), key)[0][0] for t in ("memories", "messages", "jobs")
        }
        fts = sqlite_rows(
            handle.sqlite_path, "SELECT count(*) FROM memories_fts WHERE owner = ?", (owner_token(owner),)
        )
        return counts | {"fts": fts[0][0]}

    async def api_key_rows(self, handle: StoreHandle, key: str) -> list[dict[str, Any]]:
        assert handle.sqlite_path is not None
        for suffix in ("", "-wal"):
            path = handle.sqlite_path.with_name(handle.sqlite_path.name + suffix)
            if path.exists():
                assert key.encode() not in path.read_bytes(), f"plaintext key found in {path}"
        rows = sqlite_rows(handle.sqlite_path, "SELECT key_hash, tenant_id, read_only FROM api_keys")
        return [{"key_hash": r[0], "tenant_id": r[1], "read_only": bool(r[2])} for r in rows]

    def environment(self, handle: StoreHandle) -> dict[str, str]:
        return {"COGNIS_STORE": "embedded", "COGNIS_SQLITE_PATH": str(handle.sqlite_path)}


class DualHarness:
    servers: tuple[str, ...] = ("postgres_server", "opensearch_server")

    def new(
        self, request: pytest.FixtureRequest, tmp_dir: Path, dim: int, dim_short: int, **options: Any
    ) -> StoreHandle:
        dsn = request.getfixturevalue("postgres_server").create_database(unique_prefix("db"))
        return build_dual(dsn, request.getfixturevalue("opensearch_server").url, dim, dim_short, **options)

    def reopen(self, handle: StoreHandle, dim: int, dim_short: int, **options: Any) -> StoreHandle:
        assert handle.pg_dsn is not None and handle.os_url is not None
        return build_dual(handle.pg_dsn, handle.os_url, dim, dim_short, prefix=handle.prefix, **options)

    async def owner_counts(self, handle: StoreHandle, owner: Owner) -> dict[str, int]:
        assert handle.pg_dsn is not None and handle.os_url is not None
        sql = "SELECT count(*) FROM {} WHERE tenant_id = %s AND user_id = %s"
        key = (owner.tenant_id, owner.user_id)
        counts = {
            t: (await pg_rows(handle.pg_dsn, sql.format(t), key))[0][0]
            for t in ("memories", "messages", "jobs", "outbox")
        }
        keyword = await asyncio.to_thread(os_count, handle.os_url, handle.store.keyword.alias, owner_query(owner))
        return counts | {"opensearch": keyword}

    async def api_key_rows(self, handle: StoreHandle, key: str) -> list[dict[str, Any]]:
        assert handle.pg_dsn is not None
        leaked = await pg_rows(handle.pg_dsn, "SELECT count(*) FROM api_keys t WHERE strpos(t::text, %s) > 0", (key,))
        assert leaked[0][0] == 0, "plaintext key found in api_keys"
        rows = await pg_rows(handle.pg_dsn, "SELECT key_hash, tenant_id, read_only FROM api_keys")
        return [{"key_hash": r[0], "tenant_id": r[1], "read_only": r[2]} for r in rows]

    def environment(self, handle: StoreHandle) -> dict[str, str]:
        return {
            "COGNIS_STORE": "dual",
            "COGNIS_POSTGRES_DSN": str(handle.pg_dsn),
            "COGNIS_OPENSEARCH_URL": str(handle.os_url),
            "COGNIS_OPENSEARCH_INDEX_PREFIX": str(handle.prefix),
        }


class OpenSearchHarness:
    servers: tuple[str, ...] = ("opensearch_server",)

    def new(
        self, request: pytest.FixtureRequest, tmp_dir: Path, dim: int, dim_short: int, **options: Any
    ) -> StoreHandle:
        return build_opensearch(request.getfixturevalue("opensearch_server").url, dim, dim_short, **options)

    def reopen(self, handle: StoreHandle, dim: int, dim_short: int, **options: Any) -> StoreHandle:
        assert handle.os_url is not None
        return build_opensearch(handle.os_url, dim, dim_short, prefix=handle.prefix, **options)

    async def owner_counts(self, handle: StoreHandle, owner: Owner) -> dict[str, int]:
        assert handle.os_url is not None
        s = handle.store
        indices = {"memories": s.memories, "messages": s.messages, "message_keys": s.message_keys, "jobs": s.jobs}
        return {
            name: await asyncio.to_thread(os_count, handle.os_url, index, owner_query(owner))
            for name, index in indices.items()
        }

    async def api_key_rows(self, handle: StoreHandle, key: str) -> list[dict[str, Any]]:
        assert handle.os_url is not None
        client = os_client(handle.os_url)
        try:
            index = handle.store.apikeys
            client.indices.refresh(index=index)
            hits = client.search(index=index, body={"size": 1000, "query": {"match_all": {}}})["hits"]["hits"]
        finally:
            client.close()
        assert key not in json.dumps(hits), "plaintext key found in the api-key index"
        assert all(h["_id"] == h["_source"]["key_hash"] for h in hits)
        return [dict(h["_source"]) for h in hits]

    def environment(self, handle: StoreHandle) -> dict[str, str]:
        return {
            "COGNIS_STORE": "opensearch",
            "COGNIS_OPENSEARCH_URL": str(handle.os_url),
            "COGNIS_OPENSEARCH_INDEX_PREFIX": str(handle.prefix),
        }


#: store kind -> its harness; both suites look every registered kind up here, so a kind without one fails them
KINDS: dict[str, StoreKindHarness] = {
    "embedded": EmbeddedHarness(),
    "dual": DualHarness(),
    "opensearch": OpenSearchHarness(),
}


def kind_params(kinds: Iterable[str]) -> list[Any]:
    """``kinds`` as pytest parameters, each kind whose harness needs a server marked ``integration``, so that
    ``-m "not integration"`` runs a suite's cases on the embedded store and leaves the others out."""
    return [pytest.param(kind, marks=pytest.mark.integration) if KINDS[kind].servers else kind for kind in kinds]
