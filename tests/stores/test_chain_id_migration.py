"""A memory keeps one id across its versions (issue 31, item 5): every version stores its chain's id.

Stores written before kept no chain id. Each test builds a store in the OLD layout (SQLite and PostgreSQL:
only the migrations before the one that adds ``chain_id``, then the rows as the old code wrote them;
OpenSearch: the memories index with its old mapping, then the old documents), opens it with this build,
and checks that every version got the id of its chain's first version (and nothing else changed: the
vectors still find the memories), and that the service then follows the id conventions on the migrated
store: the chain id and any older version's id read, edit and delete the memory, a second delete answers
the first one's tombstone, and another user's ids are unknown.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from cognis_memory.domain import Category, Memory, Owner
from cognis_memory.errors import NotFoundError
from cognis_memory.search_filter import SearchFilter
from cognis_memory.stores.embedded import connect
from cognis_memory.stores.migrations import postgres as pg_migrations
from cognis_memory.stores.opensearch.client import ensure_index
from cognis_memory.stores.opensearch.documents import memory_fields, owner_key
from cognis_memory.stores.opensearch.indices import MEMORY_LAYOUT, MEMORY_LAYOUT_KEY
from cognis_memory.stores.postgres.connection import register_vector_types
from cognis_memory.stores.records import MEMORY_RECORD, POSTGRES, insert_statement, memory_to_row
from tests.reliability.helpers import DIM_SHORT, make_service
from tests.store_kinds import build_dual, build_embedded, build_opensearch, unique_prefix
from tests.stores.old_schema import (
    insert_sqlite_memories,
    old_row,
    open_embedded,
    opensearch_memories,
    postgres_before,
    sqlite_before,
    unit_vector,
)

MIGRATION_NAME = "memory chain id"
T0 = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)
ANA, BOB = Owner("acme", "ana"), Owner("acme", "bob")


def _memory(owner: Owner, content: str, dim: int, rng: np.random.Generator) -> Memory:
    full = unit_vector(rng.normal(size=dim))
    return Memory(owner.tenant_id, owner.user_id, content, Category.PERSONAL_DETAILS, message_time=T0,
                  embedding=full, embedding_short=unit_vector(full[:DIM_SHORT]))  # fmt: skip


def old_chains(dim: int) -> dict[str, list[Memory]]:
    """The chains as the old code wrote them, by name: each a list of versions, oldest first."""
    rng = np.random.default_rng(31)
    job1 = _memory(ANA, "Ana works at Ribeira Logistics", dim, rng)
    job2 = job1.next_version(content="Ana works at Tidewater Labs")
    car1 = _memory(ANA, "Ana drives a red Fiat", dim, rng)
    car2 = car1.next_version(content="Ana drives a blue Volvo")
    car3 = car2.tombstone()
    pet = _memory(ANA, "Ana has a grey cat called Pixel", dim, rng)
    bob1 = _memory(BOB, "Bob lives in Porto", dim, rng)
    bob2 = bob1.next_version(content="Bob lives in Lisbon")
    for older, newer in ((job1, job2), (car1, car2), (car2, car3), (bob1, bob2)):
        older.is_current = False
        assert newer.replaces_id == older.id
    return {"job": [job1, job2], "car": [car1, car2, car3], "pet": [pet], "bob": [bob1, bob2]}


def expected_chain_ids(chains: dict[str, list[Memory]]) -> dict[str, str]:
    """Every version's id -> the id of its chain's first version."""
    return {m.id: versions[0].id for versions in chains.values() for m in versions}


def _old_row(m: Memory, values: Any, columns: list[str]) -> dict[str, Any]:
    """The row the old code wrote: the record mapping's row in the columns of the old schema."""
    assert "chain_id" not in columns, "the old schema has no chain id"
    return old_row(memory_to_row, m, values, columns)


async def check_behaviour(store: Any, embedder: Any, chains: dict[str, list[Memory]]) -> None:
    """The id conventions hold on the migrated store, for ids held from before the migration."""
    svc = make_service(store, embedder)
    await svc.start(run_worker=False)
    t, u = ANA.tenant_id, ANA.user_id
    job, car, pet, bob = chains["job"], chains["car"], chains["pet"], chains["bob"]
    try:
        # vectors were kept: the migrated current versions are found by their own vectors
        flt = SearchFilter(ANA)
        found = await svc.stores.vectors.vector_search(
            flt, job[1].embedding, job[1].embedding_short, limit=3, shortlist=50
        )  # type: ignore[arg-type]
        assert found.hits[0].memory.id == job[1].id and found.hits[0].memory.chain_id == job[0].id
        for any_id in (job[0].id, job[1].id):
            got = await svc.get_memory(t, u, any_id)
            assert (got.id, got.chain_id) == (job[1].id, job[0].id)
        edited = await svc.update_memory(t, u, job[0].id, content="Ana works at Harbour Bank")
        assert (edited.version, edited.replaces_id, edited.chain_id) == (3, job[1].id, job[0].id)
        assert [m.id for m in await svc.history(t, u, job[0].id)] == [job[0].id, job[1].id, edited.id]
        for any_id in (car[0].id, car[1].id, car[2].id):  # deleted before the migration
            with pytest.raises(NotFoundError, match="deleted"):
                await svc.get_memory(t, u, any_id)
            assert (await svc.delete_memory(t, u, any_id)).id == car[2].id  # the same tombstone, nothing written
        assert [m.id for m in await svc.history(t, u, car[0].id)] == [m.id for m in car]
        gone = await svc.delete_memory(t, u, pet[0].id)
        assert (gone.chain_id, gone.version, (await svc.delete_memory(t, u, pet[0].id)).id) == (pet[0].id, 2, gone.id)
        for any_id in (bob[0].id, bob[1].id):  # another user's ids: unknown here
            for call in (svc.get_memory, svc.history, svc.delete_memory):
                with pytest.raises(NotFoundError, match="not found"):
                    await call(t, u, any_id)
        listed = await svc.list_memories(t, u)
        assert [(m.id, m.chain_id) for m in listed] == [(edited.id, job[0].id)]
        assert (await svc.get_memory(BOB.tenant_id, BOB.user_id, bob[0].id)).id == bob[1].id
    finally:
        await svc.close()


# -- SQLite --------------------------------------------------------------------------------------------
async def test_sqlite_fills_the_chain_id_of_every_stored_version(tmp_path: Path, embedder) -> None:
    path = tmp_path / "old.db"
    chains = old_chains(embedder.dim)
    conn = connect(path)
    try:
        columns = sqlite_before(conn, MIGRATION_NAME, "memories")
        insert_sqlite_memories(conn, columns, [m for versions in chains.values() for m in versions], _old_row)
    finally:
        conn.close()

    await open_embedded(path, embedder.dim)
    with sqlite3.connect(path) as db:
        assert dict(db.execute("SELECT id, chain_id FROM memories").fetchall()) == expected_chain_ids(chains)
    await check_behaviour(build_embedded(path, embedder.dim, DIM_SHORT).store, embedder, chains)


# -- PostgreSQL (the dual store) ----------------------------------------------------------------------
async def _old_postgres(dsn: str, dim: int, chains: dict[str, list[Memory]]) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        columns = await postgres_before(conn, MIGRATION_NAME, "memories", dim=dim, dim_short=DIM_SHORT)
        await register_vector_types(conn)
        for versions in chains.values():
            for m in versions:
                row = _old_row(m, POSTGRES, columns)
                await conn.execute(insert_statement("memories", columns, "%s"), tuple(row.values()))


@pytest.mark.integration
async def test_postgres_fills_the_chain_id_of_every_stored_version(
    postgres_server, opensearch_server, embedder
) -> None:
    dsn = postgres_server.create_database(unique_prefix("chainid"))
    chains = old_chains(embedder.dim)
    await _old_postgres(dsn, embedder.dim, chains)

    handle = build_dual(dsn, opensearch_server.url, embedder.dim, DIM_SHORT)
    await handle.store.open()
    await handle.store.close()
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute("SELECT max(version) FROM schema_migrations")
        assert await cur.fetchone() == (pg_migrations.MIGRATIONS[-1].version,)
        cur = await conn.execute("SELECT id, chain_id FROM memories")
        assert dict(await cur.fetchall()) == expected_chain_ids(chains)
        await register_vector_types(conn)
        # a service of the earlier release, still running during a deploy, inserts a version without the
        # column: the row gets its chain's id all the same (and a first version its own id)
        job = chains["job"]
        late = job[1].next_version(content="Ana works at Harbour Bank")
        late.id = "late-version"
        cur = await conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'memories' ORDER BY ordinal_position"
        )
        old_columns = [c for (c,) in await cur.fetchall() if c != "chain_id"]
        await conn.execute(
            insert_statement("memories", old_columns, "%s"), tuple(_old_row(late, POSTGRES, old_columns).values())
        )
        cur = await conn.execute("SELECT chain_id FROM memories WHERE id = 'late-version'")
        assert await cur.fetchone() == (job[0].id,)
        await conn.execute("DELETE FROM memories WHERE id = 'late-version'")
    await check_behaviour(build_dual(dsn, opensearch_server.url, embedder.dim, DIM_SHORT).store, embedder, chains)


# -- OpenSearch-only store ---------------------------------------------------------------------------------
def _old_memories_body(store: Any) -> dict[str, Any]:
    """The memories index as the old code created it: no chain id field, no ``_meta``."""
    body = store._bodies()[store.memories]
    mappings = {k: v for k, v in body["mappings"].items() if k != "_meta"}
    mappings["properties"] = {k: v for k, v in mappings["properties"].items() if k != "chain_id"}
    return {"settings": body["settings"], "mappings": mappings}


def _old_document(m: Memory, successor_id: str | None) -> dict[str, Any]:
    doc = memory_fields(m, MEMORY_RECORD) | {"successor_id": successor_id, "flip_pending": False}
    del doc["chain_id"]
    return doc


@pytest.mark.integration
async def test_opensearch_fills_the_chain_id_of_every_stored_version(opensearch_server, embedder) -> None:
    prefix = unique_prefix("chainid")
    chains = old_chains(embedder.dim)
    old = build_opensearch(opensearch_server.url, embedder.dim, DIM_SHORT, prefix=prefix).store
    try:
        await ensure_index(old.runner, old.memories, f"{old.memories}-000001", _old_memories_body(old))
        for versions in chains.values():
            for m, successor in zip(versions, [*versions[1:], None], strict=True):
                doc = _old_document(m, successor.id if successor else None)
                assert await old.create(old.memories, owner_key(m.tenant_id, m.user_id, m.id), doc)
        mapping, docs = await opensearch_memories(old)
    finally:
        await old.close()
    assert "chain_id" not in mapping["properties"] and "_meta" not in mapping
    assert not any("chain_id" in d["_source"] for d in docs.values())

    store = build_opensearch(opensearch_server.url, embedder.dim, DIM_SHORT, prefix=prefix).store
    try:
        await store.open()  # the additive mapping update and the documents' rewrite
        mapping, docs = await opensearch_memories(store)
    finally:
        await store.close()
    assert mapping["_meta"] == {MEMORY_LAYOUT_KEY: MEMORY_LAYOUT}
    assert mapping["properties"]["chain_id"] == {"type": "keyword"}
    assert {i: d["_source"]["chain_id"] for i, d in docs.items()} == expected_chain_ids(chains)
    car = chains["car"]  # the rest of each document is as it was
    assert (docs[car[1].id]["_source"]["successor_id"], docs[car[2].id]["_source"]["deleted"]) == (car[2].id, True)

    again = build_opensearch(opensearch_server.url, embedder.dim, DIM_SHORT, prefix=prefix).store
    try:
        await again.open()  # the layout is recorded: nothing is rewritten
        _, after = await opensearch_memories(again)
    finally:
        await again.close()
    assert {i: d["_seq_no"] for i, d in after.items()} == {i: d["_seq_no"] for i, d in docs.items()}
    await check_behaviour(
        build_opensearch(opensearch_server.url, embedder.dim, DIM_SHORT, prefix=prefix).store, embedder, chains
    )
