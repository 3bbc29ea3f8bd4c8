"""A fact version's superseded sources are a stored field of their own, no longer a key of its metadata.

Stores written before kept them as ``metadata["superseded_sources"]`` of a fact version. Each test builds a
store in the OLD layout (SQLite and PostgreSQL: only the migrations before the one that adds the column,
then the rows as the old code wrote them; OpenSearch: the memories index with its old mapping, then the old
documents), opens it with this build, and checks that every version reads the superseded sources the old
code read from its metadata (:func:`old_reading`), that the key is gone from the facts' metadata while a raw
memory's caller metadata keeps a key of that name, that the values drive retrieval's current-state links and
the next supersession, and what the API shows (the field, and the deprecated copy in metadata).
"""

from __future__ import annotations

import dataclasses
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from cognis_memory.api.schemas import MemoryOut
from cognis_memory.domain import Category, Memory, MemoryKind, Owner
from cognis_memory.ingest.supersession import mark_superseded
from cognis_memory.retrieval.current_state import evidence_links
from cognis_memory.stores.embedded import connect
from cognis_memory.stores.migrations import postgres as pg_migrations
from cognis_memory.stores.opensearch.client import ensure_index
from cognis_memory.stores.opensearch.documents import memory_fields, owner_key
from cognis_memory.stores.opensearch.indices import MEMORY_LAYOUT, MEMORY_LAYOUT_KEY, SAID_US
from cognis_memory.stores.postgres.connection import register_vector_types
from cognis_memory.stores.records import POSTGRES, epoch_us, insert_statement, memory_to_row
from tests.reliability.helpers import DIM_SHORT, make_service
from tests.store_kinds import build_dual, build_embedded, build_opensearch, unique_prefix
from tests.stores.old_schema import (
    insert_sqlite_memories,
    old_row,
    open_embedded,
    opensearch_memories,
    postgres_before,
    postgres_columns,
    sqlite_before,
    unit_vector,
)

MIGRATION_NAME = "superseded sources as a memory column"
KEY = "superseded_sources"
T0 = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)
ANA, BOB = Owner("acme", "ana"), Owner("acme", "bob")


def old_reading(m: Memory) -> list[str]:
    """What the old code read as a memory's superseded sources: the text items of the metadata key's list."""
    value = m.metadata.get(KEY)
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def old_memories(dim: int) -> dict[str, Memory]:
    """The memories as the old code wrote them (superseded sources in a fact's metadata), by name."""
    rng = np.random.default_rng(34)

    def memory(owner: Owner, name: str, content: str, days: int, **kw: Any) -> Memory:
        full = unit_vector(rng.normal(size=dim))
        return Memory(owner.tenant_id, owner.user_id, content, Category.PERSONAL_DETAILS, speaker="Ana",
                      message_time=T0 + timedelta(days=days), embedding=full, embedding_short=unit_vector(full[:DIM_SHORT]),
                      id=f"{owner.user_id}-{name}", **kw)  # fmt: skip

    raw = {f"raw-{city}": memory(ANA, f"raw-{city}", f"I live in {city}", d, kind=MemoryKind.RAW,
                                 source_message_ids=[f"msg-{city}"], metadata={"role": "user"})
           for city, d in (("porto", 0), ("lisbon", 30), ("madrid", 60))}  # fmt: skip
    # a caller's message metadata may hold a key of that name: it is the caller's, in a raw memory
    raw["raw-callers-key"] = memory(ANA, "raw-callers-key", "I keep a list", 61, kind=MemoryKind.RAW,
                                    source_message_ids=["msg-list"], metadata={"role": "user", KEY: ["mine"]})  # fmt: skip

    def next_version(m: Memory, name: str, **changes: Any) -> Memory:
        new = m.next_version(**changes)
        new.id, m.is_current = f"{m.user_id}-{name}", False
        return new

    home1 = memory(ANA, "home1", "Ana lives in Porto", 0, source_message_ids=["msg-porto"])
    home2 = next_version(home1, "home2", content="Ana lives in Lisbon", message_time=T0 + timedelta(days=30),
                         source_message_ids=["msg-porto", "msg-lisbon"], metadata={KEY: ["msg-porto"]})  # fmt: skip
    home3 = next_version(home2, "home3", content="Ana lives in Madrid", message_time=T0 + timedelta(days=60),
                         source_message_ids=["msg-porto", "msg-lisbon", "msg-madrid"],
                         metadata={KEY: ["msg-porto", "msg-lisbon"]})  # fmt: skip
    # updated by a message that restated its whole evidence: an empty list
    job1 = memory(ANA, "job1", "Ana works at Ribeira", 5, source_message_ids=["msg-job"])
    job2 = next_version(job1, "job2", content="Ana works at Ribeira Logistics", metadata={KEY: []})
    # items that are not message ids were never read
    odd = memory(ANA, "odd", "Ana has a cat", 6, source_message_ids=["msg-cat"], metadata={KEY: ["msg-dog", 7, None]})
    bob = memory(BOB, "home2", "Bob lives in Lisbon", 9, source_message_ids=["msg-bob-lisbon"],
                 metadata={KEY: ["msg-bob-porto"]})  # fmt: skip
    assert (home3.replaces_id, home2.replaces_id, home3.chain_id) == (home2.id, home1.id, home1.id)
    return raw | {"home1": home1, "home2": home2, "home3": home3, "job1": job1, "job2": job2, "odd": odd,
                  "bob": bob}  # fmt: skip


def expected(memories: dict[str, Memory]) -> dict[str, tuple[list[str], dict[str, Any]]]:
    """Every memory's id -> (its superseded sources, its metadata) after the migration."""
    out = {}
    for m in memories.values():
        if m.kind is MemoryKind.FACT:
            out[m.id] = (old_reading(m), {k: v for k, v in m.metadata.items() if k != KEY})
        else:
            out[m.id] = ([], m.metadata)
    return out


def _old_row(m: Memory, values: Any, columns: list[str]) -> dict[str, Any]:
    """The row the old code wrote: the record mapping's row in the columns of the old schema."""
    assert KEY not in columns, "the old schema has no superseded sources column"
    return old_row(memory_to_row, m, values, columns)


async def check_behaviour(store: Any, embedder: Any, memories: dict[str, Memory]) -> None:
    """Every version reads what the old code read, the metadata without the key; the links drive retrieval's
    current-state ordering and the next supersession; the API shows the field and the deprecated copy."""
    svc = make_service(store, embedder)
    await svc.start(run_worker=False)
    want = expected(memories)
    try:
        read: dict[str, Memory] = {}
        for m in memories.values():
            owner = Owner(m.tenant_id, m.user_id)
            for version in await svc.history(owner.tenant_id, owner.user_id, m.id):
                read[version.id] = version
        assert {i: (m.superseded_sources, m.metadata) for i, m in read.items()} == want
        home3 = read[memories["home3"].id]
        assert home3.superseded_sources == ["msg-porto", "msg-lisbon"]  # in order, oldest first
        assert read[memories["raw-callers-key"].id].metadata == {"role": "user", KEY: ["mine"]}

        # retrieval's current-state links: the stale messages go below the current fact
        head = [home3.id, *(read[memories[f"raw-{c}"].id].id for c in ("porto", "lisbon", "madrid"))]
        assert evidence_links(head, read) == {"ana-raw-porto": home3.id, "ana-raw-lisbon": home3.id}
        # the next supersession starts from them
        nxt = mark_superseded(home3, home3.next_version(content="Ana lives in Rome"), ["msg-rome"], None)
        assert nxt.superseded_sources == ["msg-porto", "msg-lisbon", "msg-madrid"]

        # the API: the field, and (deprecated, for a release) the copy in metadata earlier releases showed
        out = MemoryOut.of(home3).model_dump()
        assert (out[KEY], out["metadata"]) == (["msg-porto", "msg-lisbon"], {KEY: ["msg-porto", "msg-lisbon"]})
        raw = MemoryOut.of(read[memories["raw-callers-key"].id]).model_dump()
        assert (raw[KEY], raw["metadata"]) == ([], {"role": "user", KEY: ["mine"]})
        assert MemoryOut.of(read[memories["job2"].id]).model_dump()["metadata"] == {}
    finally:
        await svc.close()


# -- SQLite --------------------------------------------------------------------------------------------
async def test_sqlite_moves_the_superseded_sources_into_their_column(tmp_path: Path, embedder) -> None:
    path = tmp_path / "old.db"
    memories = old_memories(embedder.dim)
    conn = connect(path)
    try:
        columns = sqlite_before(conn, MIGRATION_NAME, "memories")
        insert_sqlite_memories(conn, columns, memories.values(), _old_row)
    finally:
        conn.close()

    await open_embedded(path, embedder.dim)
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT id, superseded_sources, metadata FROM memories WHERE kind = 'fact'").fetchall()
    assert all(KEY not in metadata for _, _, metadata in rows)
    assert dict((i, s) for i, s, _ in rows)[memories["home3"].id] == '["msg-porto","msg-lisbon"]'
    await check_behaviour(build_embedded(path, embedder.dim, DIM_SHORT).store, embedder, memories)


# -- PostgreSQL (the dual store) ----------------------------------------------------------------------
async def _old_postgres(dsn: str, dim: int, memories: dict[str, Memory]) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        columns = await postgres_before(conn, MIGRATION_NAME, "memories", dim=dim, dim_short=DIM_SHORT)
        await register_vector_types(conn)
        for m in memories.values():
            await conn.execute(
                insert_statement("memories", columns, "%s"), tuple(_old_row(m, POSTGRES, columns).values())
            )


@pytest.mark.integration
async def test_postgres_moves_the_superseded_sources_into_their_column(
    postgres_server, opensearch_server, embedder
) -> None:
    dsn = postgres_server.create_database(unique_prefix("supersrc"))
    memories = old_memories(embedder.dim)
    await _old_postgres(dsn, embedder.dim, memories)

    handle = build_dual(dsn, opensearch_server.url, embedder.dim, DIM_SHORT)
    await handle.store.open()
    await handle.store.close()
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute("SELECT max(version) FROM schema_migrations")
        assert await cur.fetchone() == (pg_migrations.MIGRATIONS[-1].version,)
        cur = await conn.execute("SELECT id, superseded_sources, metadata FROM memories")
        assert {i: (s, md) for i, s, md in await cur.fetchall()} == expected(memories)
        # a service of the earlier release, still running during a deploy, inserts a fact version with the key in
        # its metadata and no column: the trigger moves it; a raw memory's caller key stays
        await register_vector_types(conn)
        old_columns = [c for c in await postgres_columns(conn, "memories") if c != KEY]
        home3, callers = memories["home3"], memories["raw-callers-key"]
        late = home3.next_version(content="Ana lives in Rome", metadata={KEY: ["msg-porto", "msg-madrid"], "x": 1})
        late.id = "late-version"
        late_raw = dataclasses.replace(callers, id="late-raw")
        for m in (late, late_raw):
            row = _old_row(m, POSTGRES, old_columns)
            await conn.execute(insert_statement("memories", old_columns, "%s"), tuple(row.values()))
        cur = await conn.execute(
            "SELECT id, superseded_sources, metadata FROM memories WHERE id IN ('late-version', 'late-raw')"
        )
        assert {i: (s, md) for i, s, md in await cur.fetchall()} == {
            "late-version": (["msg-porto", "msg-madrid"], {"x": 1}),
            "late-raw": ([], {"role": "user", KEY: ["mine"]}),
        }
        await conn.execute("DELETE FROM memories WHERE id IN ('late-version', 'late-raw')")
    await check_behaviour(build_dual(dsn, opensearch_server.url, embedder.dim, DIM_SHORT).store, embedder, memories)


# -- OpenSearch-only store ---------------------------------------------------------------------------------
def _old_memories_body(store: Any, layout: int) -> dict[str, Any]:
    """The memories index as the old code created it: no superseded sources field (layout 2), nor a chain id
    and no ``_meta`` (layout 1)."""
    body = store._bodies()[store.memories]
    mappings = {k: v for k, v in body["mappings"].items() if k != "_meta"}
    dropped = {KEY} if layout == 2 else {KEY, "chain_id"}
    mappings["properties"] = {k: v for k, v in mappings["properties"].items() if k not in dropped}
    if layout == 2:
        mappings["_meta"] = {MEMORY_LAYOUT_KEY: 2}
    return {"settings": body["settings"], "mappings": mappings}


def _old_document(m: Memory, successor_id: str | None, layout: int) -> dict[str, Any]:
    doc = memory_fields(m, _record_before()) | {
        "successor_id": successor_id,
        "flip_pending": False,
        SAID_US: epoch_us(m.said_at),
    }
    if layout == 1:
        del doc["chain_id"]
    return doc


def _record_before() -> tuple[Any, ...]:
    from cognis_memory.stores.records import MEMORY_RECORD

    return tuple(c for c in MEMORY_RECORD if c.name != KEY)


@pytest.mark.integration
@pytest.mark.parametrize("layout", [1, 2])
async def test_opensearch_moves_the_superseded_sources_into_their_field(opensearch_server, embedder, layout) -> None:
    prefix = unique_prefix("supersrc")
    memories = old_memories(embedder.dim)
    successor = {memories["home1"].id: memories["home2"].id, memories["home2"].id: memories["home3"].id,
                 memories["job1"].id: memories["job2"].id}  # fmt: skip
    old = build_opensearch(opensearch_server.url, embedder.dim, DIM_SHORT, prefix=prefix).store
    try:
        await ensure_index(old.runner, old.memories, f"{old.memories}-000001", _old_memories_body(old, layout))
        for m in memories.values():
            doc = _old_document(m, successor.get(m.id), layout)
            assert await old.create(old.memories, owner_key(m.tenant_id, m.user_id, m.id), doc)
        mapping, docs = await opensearch_memories(old)
    finally:
        await old.close()
    assert KEY not in mapping["properties"] and mapping.get("_meta", {}).get(MEMORY_LAYOUT_KEY, 1) == layout
    assert all(KEY not in d["_source"] for d in docs.values())

    store = build_opensearch(opensearch_server.url, embedder.dim, DIM_SHORT, prefix=prefix).store
    try:
        await store.open()  # the additive mapping update and the facts' rewrite
        mapping, docs = await opensearch_memories(store)
    finally:
        await store.close()
    assert mapping["_meta"] == {MEMORY_LAYOUT_KEY: MEMORY_LAYOUT} and MEMORY_LAYOUT == 3
    assert mapping["properties"][KEY] == {"type": "keyword"}
    got = {i: (d["_source"].get(KEY, []), d["_source"]["metadata"]) for i, d in docs.items()}
    assert got == expected(memories)
    assert docs[memories["home2"].id]["_source"]["successor_id"] == memories["home3"].id  # the rest is as it was
    assert {i: d["_source"]["chain_id"] for i, d in docs.items()} == {m.id: m.chain_id for m in memories.values()}

    again = build_opensearch(opensearch_server.url, embedder.dim, DIM_SHORT, prefix=prefix).store
    try:
        await again.open()  # the layout is recorded: nothing is rewritten
        _, after = await opensearch_memories(again)
    finally:
        await again.close()
    assert {i: d["_seq_no"] for i, d in after.items()} == {i: d["_seq_no"] for i, d in docs.items()}
    await check_behaviour(
        build_opensearch(opensearch_server.url, embedder.dim, DIM_SHORT, prefix=prefix).store, embedder, memories
    )
