"""A message's scope and its raw memory's id became fields of their own (issue 24, item 6).

Every field of ``Message`` reaches every place that keeps a message (the SQLite and PostgreSQL tables as
the migrations build them, the record's columns, the OpenSearch-only store's mapping and documents).
Stores written before, which kept the two as the keys ``scope`` and ``raw_memory_id`` of the message's
metadata, are moved to the new layout when they open, one test per backend.

Each test builds a store in the OLD layout (SQLite and PostgreSQL: only the migrations before the one that
adds the columns, then the rows as the old code wrote them; OpenSearch: the messages index with its old
mapping, then the old documents), opens it with this build, and checks that the columns are filled, the
metadata holds only the caller's keys, and that ingest and search behave as before: a crash had left two
messages without their raw memory (one of CONTEXT scope), so the client's retry writes them now, with the
ids fixed before the crash and the scope the message was sent with (a CONTEXT memory stays hidden from other
sessions); a message from before the service kept a raw memory id is USER and is not ingested again.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from cognis_memory.domain import Message, Owner, Scope, new_id
from cognis_memory.message_body import MessageBody
from cognis_memory.service import MemoryFilter
from cognis_memory.stores.embedded import connect
from cognis_memory.stores.migrations import postgres as pg_migrations
from cognis_memory.stores.migrations import sqlite as sqlite_migrations
from cognis_memory.stores.opensearch.client import ensure_index
from cognis_memory.stores.opensearch.documents import owner_key
from cognis_memory.stores.opensearch.indices import MESSAGE_LAYOUT, MESSAGE_LAYOUT_KEY
from cognis_memory.stores.records import (
    MESSAGE_COLUMNS,
    MESSAGE_RECORD,
    OPENSEARCH,
    POSTGRES,
    SQLITE,
    insert_statement,
    message_to_row,
)
from tests.reliability.helpers import DIM_SHORT, make_service
from tests.store_kinds import build_dual, build_embedded, build_opensearch, unique_prefix
from tests.stores.old_schema import old_row, open_embedded, postgres_before, sqlite_before
from tests.stores.test_field_sites import sql_table_columns

MIGRATION_NAME = "message scope and raw memory id as columns"


# -- every field of Message reaches every place that keeps a message ------------------------------------
def _message_fields(columns: Any) -> set[str]:
    """Column names as Message fields (``ts`` is ``timestamp``)."""
    field_of = {c.name: c.field for c in MESSAGE_RECORD}
    return {field_of.get(c, c) for c in columns}


def _sqlite_messages(tmp_path: Path) -> set[str]:
    conn = sqlite3.connect(tmp_path / "fields.db", isolation_level=None)
    try:
        sqlite_migrations.apply_migrations(conn)
        return {row[1] for row in conn.execute("PRAGMA table_info(messages)")}
    finally:
        conn.close()


def _opensearch_messages_mapping(tmp_path: Path) -> set[str]:
    store = build_opensearch("http://127.0.0.1:9", 4, 2).store  # built, never connected: the mapping is data
    return set(store._bodies()[store.messages]["mappings"]["properties"])


MESSAGE_SITES = {
    "sqlite messages table": _sqlite_messages,
    "postgres messages table": lambda _: sql_table_columns(
        (m.render(4, 2) for m in pg_migrations.MIGRATIONS), "messages"
    ),
    "message record columns": lambda _: MESSAGE_COLUMNS,
    "opensearch store messages mapping": _opensearch_messages_mapping,
    "opensearch store message document": lambda _: message_to_row(old_messages(Owner("t", "u"))[0], OPENSEARCH),
}


@pytest.mark.parametrize("site", list(MESSAGE_SITES))
def test_every_message_field_reaches_the_site(site: str, tmp_path: Path) -> None:
    present = _message_fields(MESSAGE_SITES[site](tmp_path))
    missing = [f.name for f in dataclasses.fields(Message) if f.name not in present]
    assert not missing, f"Message fields missing from the {site}: {missing}"


def test_postgres_message_columns_come_in_the_record_order() -> None:
    columns = sql_table_columns((m.render(4, 2) for m in pg_migrations.MIGRATIONS), "messages")
    assert columns == list(MESSAGE_COLUMNS)


# -- stores written before: one test per backend -----------------------------------------------------------
T0 = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)
RAW_CONTEXT, RAW_USER = new_id(), new_id()
MESSAGE_IDS = {cid: new_id() for cid in ("c-ctx", "c-user", "c-old")}


def old_messages(owner: Owner) -> list[Message]:
    """The messages as the old code kept them: scope and raw memory id in the metadata."""

    def msg(i: int, content: str, client_id: str, metadata: dict[str, Any], **kw: Any) -> Message:
        return Message(owner.tenant_id, owner.user_id, content, T0.replace(minute=i), speaker="Ana",
                       client_message_id=client_id, metadata=metadata, id=MESSAGE_IDS[client_id], **kw)  # fmt: skip

    return [
        msg(1, "We are planning a trip to Japan zqctx", "c-ctx", {"k": "v", "scope": "CONTEXT", "raw_memory_id": RAW_CONTEXT},
            session_id="s1"),
        msg(2, "I keep bees on my roof zquser", "c-user", {"scope": "USER", "raw_memory_id": RAW_USER}, session_id="s1"),
        msg(3, "I drive an old red Fiat zqold", "c-old", {"n": 1}),  # before the service kept either
    ]  # fmt: skip


#: what the new layout holds for each old message: (scope, raw memory id, metadata)
EXPECTED = {
    "c-ctx": ("CONTEXT", RAW_CONTEXT, {"k": "v"}),
    "c-user": ("USER", RAW_USER, {}),
    "c-old": ("USER", None, {"n": 1}),
}


def _old_row(m: Message, values: Any, columns: list[str]) -> dict[str, Any]:
    """The row the old code wrote: the record mapping's row in the columns of the old schema."""
    assert {"scope", "raw_memory_id"} - set(columns) == {"scope", "raw_memory_id"}, "the old schema has neither"
    return old_row(message_to_row, m, values, columns)


async def check_behaviour(store: Any, embedder: Any, owner: Owner) -> None:
    """Ingest and search on the migrated store behave as before the change."""
    svc = make_service(store, embedder)
    await svc.start(run_worker=False)
    try:
        stored = await svc.stores.messages.get_messages(owner, [m.id for m in old_messages(owner)])
        assert sorted((m.client_message_id, m.scope, m.raw_memory_id, m.metadata) for m in stored) == sorted(
            (cid, Scope(s), raw, meta) for cid, (s, raw, meta) in EXPECTED.items()
        )
        # The client's retry (same client ids): "already stored", so what counts is the stored message, read
        # from the migrated row (the retry's own fields are left at their defaults to show it).
        retry = [MessageBody(content=m.content, client_message_id=m.client_message_id) for m in old_messages(owner)]
        res = await svc.add_messages(owner.tenant_id, owner.user_id, retry)
        assert res.created == [False, False, False]
        raw = {m.id: m for m in res.raw_memories}
        assert set(raw) == {RAW_CONTEXT, RAW_USER}  # the ids fixed before the crash; c-old is not ingested again
        assert (raw[RAW_CONTEXT].scope, raw[RAW_CONTEXT].session_id) == (Scope.CONTEXT, "s1")
        assert raw[RAW_CONTEXT].metadata == {"k": "v", "role": "user"}  # the caller's metadata, no key of ours
        assert (raw[RAW_USER].scope, raw[RAW_USER].metadata) == (Scope.USER, {"role": "user"})

        async def found(query: str, **kw: Any) -> list[str]:
            hits = (
                await svc.search(owner.tenant_id, owner.user_id, query, recipe="bm25", filter=MemoryFilter(**kw))
            ).hits
            return [h.memory.id for h in hits]

        assert RAW_CONTEXT in await found("trip Japan zqctx", session_id="s1")
        assert RAW_CONTEXT not in await found("trip Japan zqctx", session_id="s2")  # CONTEXT: its session only
        assert RAW_CONTEXT not in await found("trip Japan zqctx", scopes=["USER"])
        assert RAW_USER in await found("bees roof zquser", session_id="s2")  # USER: every session
        again = await svc.add_messages(owner.tenant_id, owner.user_id, retry)
        assert again.created == [False, False, False] and again.raw_memories == []
    finally:
        await svc.close()


# -- SQLite --------------------------------------------------------------------------------------------
async def test_sqlite_moves_scope_and_raw_memory_id_out_of_message_metadata(tmp_path: Path, embedder) -> None:
    path = tmp_path / "old.db"
    owner = Owner("acme", "ana")
    conn = connect(path)
    try:
        columns = sqlite_before(conn, MIGRATION_NAME, "messages")
        # metadata that SQLite's JSON functions cannot read (Python's JSON writer lets NaN through) is left as it was
        nan = Message("acme", "nan", "not a number", T0, metadata={"x": float("nan")})
        conn.execute("BEGIN")
        for m in [*old_messages(owner), nan]:
            conn.execute(insert_statement("messages", columns, "?"), tuple(_old_row(m, SQLITE, columns).values()))
        conn.execute("COMMIT")
    finally:
        conn.close()

    await open_embedded(path, embedder.dim)
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT client_message_id, scope, raw_memory_id, metadata FROM messages WHERE user_id = 'ana'"
        )
        assert {cid: (s, raw, json.loads(meta)) for cid, s, raw, meta in rows} == EXPECTED
        rows = db.execute("SELECT scope, raw_memory_id, metadata FROM messages WHERE user_id = 'nan'")
        assert rows.fetchall() == [("USER", None, '{"x": NaN}')]
    await check_behaviour(build_embedded(path, embedder.dim, DIM_SHORT).store, embedder, owner)


# -- PostgreSQL (the dual store's messages) ---------------------------------------------------------------
async def _old_postgres(dsn: str, dim: int, owner: Owner) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        columns = await postgres_before(conn, MIGRATION_NAME, "messages", dim=dim, dim_short=DIM_SHORT)
        for m in old_messages(owner):
            row = _old_row(m, POSTGRES, columns)
            await conn.execute(insert_statement("messages", columns, "%s"), tuple(row.values()))


@pytest.mark.integration
async def test_postgres_moves_scope_and_raw_memory_id_out_of_message_metadata(
    postgres_server, opensearch_server, embedder
) -> None:
    dsn = postgres_server.create_database(unique_prefix("msgfields"))
    owner = Owner("acme", "ana")
    await _old_postgres(dsn, embedder.dim, owner)

    handle = build_dual(dsn, opensearch_server.url, embedder.dim, DIM_SHORT)
    await handle.store.open()
    await handle.store.close()
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        cur = await conn.execute("SELECT max(version) FROM schema_migrations")
        assert await cur.fetchone() == (pg_migrations.MIGRATIONS[-1].version,)
        cur = await conn.execute("SELECT client_message_id, scope, raw_memory_id, metadata FROM messages")
        assert {cid: (s, raw, meta) for cid, s, raw, meta in await cur.fetchall()} == EXPECTED
    await check_behaviour(build_dual(dsn, opensearch_server.url, embedder.dim, DIM_SHORT).store, embedder, owner)


# -- OpenSearch-only store ---------------------------------------------------------------------------------
#: the messages index as the old code created it (layout 1: no scope or raw memory id fields, no _meta)
_KW, _DATE = {"type": "keyword"}, {"type": "date"}
OLD_MESSAGES_MAPPING = {
    "dynamic": "strict",
    "properties": {
        "id": _KW, "tenant_id": _KW, "user_id": _KW, "session_id": _KW, "agent_id": _KW, "speaker": _KW,
        "role": _KW, "content": {"type": "text", "index": False}, "ts": _DATE, "client_message_id": _KW,
        "metadata": {"type": "object", "enabled": False}, "created_at": _DATE,
    },
}  # fmt: skip


async def _old_opensearch(store: Any, owner: Owner) -> None:
    """The messages and message-keys indices and documents as the old code made them."""
    bodies = store._bodies()
    old = {"settings": bodies[store.messages]["settings"], "mappings": OLD_MESSAGES_MAPPING}
    await ensure_index(store.runner, store.messages, f"{store.messages}-000001", old)
    await ensure_index(store.runner, store.message_keys, f"{store.message_keys}-000001", bodies[store.message_keys])
    columns = list(OLD_MESSAGES_MAPPING["properties"])
    for m in old_messages(owner):  # what the old save_messages wrote: the client id's claim, then the message
        assert m.client_message_id is not None
        claim = {"tenant_id": m.tenant_id, "user_id": m.user_id, "message_id": m.id}
        await store.create(
            store.message_keys, owner_key(m.tenant_id, m.user_id, "client\x00" + m.client_message_id), claim
        )
        await store.create(store.messages, owner_key(m.tenant_id, m.user_id, m.id), _old_row(m, OPENSEARCH, columns))


async def _messages_index(store: Any) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The messages index's mapping, and its documents by id with their sequence numbers."""
    client = store.client
    found = await store.runner(client.indices.get_mapping, index=store.messages)
    await store.runner(client.indices.refresh, index=store.messages)
    body = {"size": 100, "query": {"match_all": {}}, "seq_no_primary_term": True}
    res = await store.runner(client.search, index=store.messages, body=body)
    return next(iter(found.values()))["mappings"], {h["_id"]: h for h in res["hits"]["hits"]}


@pytest.mark.integration
async def test_opensearch_moves_scope_and_raw_memory_id_out_of_message_documents(opensearch_server, embedder) -> None:
    owner = Owner("acme", "ana")
    prefix = unique_prefix("msgfields")
    old = build_opensearch(opensearch_server.url, embedder.dim, DIM_SHORT, prefix=prefix).store
    try:
        await _old_opensearch(old, owner)
        mapping, docs = await _messages_index(old)
    finally:
        await old.close()
    assert "scope" not in mapping["properties"] and "_meta" not in mapping
    assert sorted("scope" in d["_source"]["metadata"] for d in docs.values()) == [False, True, True]

    store = build_opensearch(opensearch_server.url, embedder.dim, DIM_SHORT, prefix=prefix).store
    try:
        await store.open()  # the additive mapping update and the documents' rewrite
        mapping, docs = await _messages_index(store)
    finally:
        await store.close()
    assert mapping["_meta"] == {MESSAGE_LAYOUT_KEY: MESSAGE_LAYOUT}
    assert mapping["properties"]["scope"] == mapping["properties"]["raw_memory_id"] == {"type": "keyword"}
    sources = [d["_source"] for d in docs.values()]
    assert {d["client_message_id"]: (d["scope"], d["raw_memory_id"], d["metadata"]) for d in sources} == EXPECTED

    again = build_opensearch(opensearch_server.url, embedder.dim, DIM_SHORT, prefix=prefix).store
    try:
        await again.open()  # the layout is recorded: nothing is rewritten
        _, after = await _messages_index(again)
        # an older release still running writes a layout-1 document after the upgrade: it reads as USER
        late = Message("acme", "late", "written late", T0, metadata={"scope": "CONTEXT", "raw_memory_id": "r-late"})
        row = _old_row(late, OPENSEARCH, list(OLD_MESSAGES_MAPPING["properties"]))
        await again.create(again.messages, owner_key(late.tenant_id, late.user_id, late.id), row)
        (read,) = await again.roles().messages.get_messages(Owner("acme", "late"), [late.id])
        assert (read.scope, read.raw_memory_id, read.content) == (Scope.USER, None, "written late")
    finally:
        await again.close()
    assert {i: d["_seq_no"] for i, d in after.items()} == {i: d["_seq_no"] for i, d in docs.items()}
    await check_behaviour(
        build_opensearch(opensearch_server.url, embedder.dim, DIM_SHORT, prefix=prefix).store, embedder, owner
    )
