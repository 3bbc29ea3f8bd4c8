"""A column declared in ``records/schema.py`` that a stored table or index lacks is added when the store opens,
with the domain field's default for what is stored already, in SQLite, PostgreSQL and OpenSearch.

A store made before a field existed is simulated by dropping that field's column (or leaving it out
of the index mapping): exactly what such a store looks like to a newer build.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
import psycopg
import pytest
from cognis_dev.databases import create_database

from cognis_memory.domain import Category, Scope
from cognis_memory.stores.embedded import EmbeddedStore
from cognis_memory.stores.migrations.postgres import (
    SchemaNotMigratedError,
    apply_migrations,
    check_schema_current,
)
from cognis_memory.stores.migrations.record_columns import NeedsMigrationError, missing_columns
from cognis_memory.stores.opensearch import OpenSearchStore
from cognis_memory.stores.opensearch.client import ensure_index
from cognis_memory.stores.records import Column
from tests.stores.helpers import DIM, DIM_SHORT, make_memory, new_owner, new_prefix, os_client

#: columns of ``memories`` that a store made before them lacks: no default, a flag, an object
DROPPED = ("speaker", "deleted", "metadata")


class Mood(StrEnum):
    CALM = "calm"


@dataclass
class Later:
    """A domain class that gained fields after its table was made."""

    id: str
    note: str | None = None
    pinned: bool = False
    tries: int = 3
    mood: Mood = Mood.CALM
    tags: list[str] = field(default_factory=list)
    extra: dict[str, int] = field(default_factory=lambda: {"a": 1})
    needed: str = ""
    vec: np.ndarray | None = None


def _added(*columns: Column) -> list[tuple[str, str | int | bool | None]]:
    tables = {"later": ((Column("id", required=True), *columns), Later)}
    return [(a.column.name, a.default) for a in missing_columns({"later": {"id"}}, tables)]


def test_each_added_column_gets_its_fields_default_as_stored() -> None:
    assert _added(
        Column("note"), Column("pinned", "flag"), Column("tries", "int"), Column("mood", "enum", Mood),
        Column("tags", "ids"), Column("extra", "json"),
    ) == [("note", None), ("pinned", False), ("tries", 3), ("mood", "calm"), ("tags", "[]"), ("extra", '{"a": 1}')]  # fmt: skip


def test_a_table_that_does_not_exist_is_left_to_the_migrations() -> None:
    tables = {"later": ((Column("id", required=True), Column("note")), Later)}
    assert missing_columns({}, tables) == []


@pytest.mark.parametrize(
    ("column", "why"),
    [
        (Column("vec", "vector"), "size is the store's"),
        (Column("nothing"), "has no field"),
        (Column("note", required=True), "required column needs a default"),
        (Column("note", "time"), None),  # a time without default is fine: NULL
        (Column("tags", "json_list"), None),
    ],
)
def test_what_a_record_alone_cannot_add_is_refused_naming_the_column(column: Column, why: str | None) -> None:
    if why is None:
        _added(column)
        return
    with pytest.raises(NeedsMigrationError, match=f"later.{column.name}|{column.name}:") as info:
        _added(column)
    assert why in str(info.value)


def test_a_field_without_default_needs_a_numbered_migration() -> None:
    @dataclass
    class Strict:
        id: str
        must: str

    tables = {"later": ((Column("id", required=True), Column("must")), Strict)}
    with pytest.raises(NeedsMigrationError, match="must: Strict.must has no default"):
        missing_columns({"later": {"id"}}, tables)


# -- SQLite -------------------------------------------------------------------------------------------
def _sqlite_columns(path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {row[1] for row in conn.execute("PRAGMA table_info(memories)")}


async def test_sqlite_store_made_before_a_column_gains_it_on_open(tmp_path) -> None:
    path, owner, rng = tmp_path / "old.db", new_owner(), np.random.default_rng(1)
    store = EmbeddedStore(path, dim=DIM, dim_short=DIM_SHORT)
    await store.open()
    old = make_memory(owner, "stored before the columns existed", rng)
    await store.insert_memories([old])
    await store.close()
    with sqlite3.connect(path) as conn:
        for name in DROPPED:
            conn.execute(f"ALTER TABLE memories DROP COLUMN {name}")
    assert not _sqlite_columns(path) & set(DROPPED)

    store = EmbeddedStore(path, dim=DIM, dim_short=DIM_SHORT)
    await store.open()
    try:
        assert set(DROPPED) <= _sqlite_columns(path)
        kept = await store.get_memory(owner, old.id)
        assert kept is not None and (kept.speaker, kept.deleted, kept.metadata) == (None, False, {})
        new = make_memory(owner, "written after", rng, speaker="Ana", metadata={"k": 1})
        await store.insert_memories([new])  # fails with "no column named speaker" without the added columns
        again = await store.get_memory(owner, new.id)
        assert again is not None and (again.speaker, again.metadata) == ("Ana", {"k": 1})
    finally:
        await store.close()
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT deleted, metadata FROM memories WHERE id = ?", (old.id,)).fetchall()
    assert rows == [(0, "{}")]


# -- PostgreSQL ---------------------------------------------------------------------------------------
async def _migrate(dsn: str) -> list[int]:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        return await apply_migrations(conn, dim=DIM, dim_short=DIM_SHORT)


@pytest.mark.integration
async def test_postgres_schema_made_before_a_column_gains_it_when_migrated(postgres_server) -> None:
    dsn = create_database(postgres_server.dsn)
    await _migrate(dsn)
    vec, short = "[" + ",".join(["0.25"] * DIM) + "]", "[" + ",".join(["0.5"] * DIM_SHORT) + "]"
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name in DROPPED:
            conn.execute(f"ALTER TABLE memories DROP COLUMN {name}")
        # a raw memory: a fact's insert runs the trigger that reads a fact's metadata (migration 8)
        conn.execute(
            "INSERT INTO memories (id, tenant_id, user_id, scope, category, kind, content, created_at, version,"
            " is_current, embedding, embedding_short) VALUES ('m1', 't', 'u', %s, %s, 'raw', 'old', now(), 1, true,"
            " %s, %s)",
            (Scope.USER.value, Category.HOBBIES.value, vec, short),
        )
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        with pytest.raises(SchemaNotMigratedError, match="memories.speaker"):
            await check_schema_current(conn, dim=DIM, dim_short=DIM_SHORT)

    assert await _migrate(dsn) == []  # no numbered migration was pending: the columns come from the record

    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT speaker, deleted, metadata FROM memories WHERE id = 'm1'").fetchone() == (
            None,
            False,
            {},
        )
        types = dict(
            conn.execute(
                "SELECT column_name, data_type FROM information_schema.columns"
                " WHERE table_name = 'memories' AND column_name = ANY(%s)",
                (list(DROPPED),),
            ).fetchall()
        )
    assert types == {"speaker": "text", "deleted": "boolean", "metadata": "jsonb"}  # int4/bool are the same types
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await check_schema_current(conn, dim=DIM, dim_short=DIM_SHORT)  # current now: no error


# -- OpenSearch ---------------------------------------------------------------------------------------
@pytest.mark.integration
async def test_opensearch_index_made_before_a_field_gains_it_on_open(opensearch_server) -> None:
    client, prefix, owner = os_client(opensearch_server.url), new_prefix(), new_owner()
    store = OpenSearchStore(client, index_prefix=prefix, dim=DIM, dim_short=DIM_SHORT, replicas=0, refresh=True)
    body = store._bodies()[store.memories]
    old_properties = {k: v for k, v in body["mappings"]["properties"].items() if k != "speaker"}
    old_body = {**body, "mappings": {**body["mappings"], "properties": old_properties}}
    assert await ensure_index(store.runner, store.memories, f"{store.memories}-000001", old_body)

    def mapped() -> set[str]:
        mapping = client.indices.get_mapping(index=store.memories)
        return set(next(iter(mapping.values()))["mappings"]["properties"])

    assert "speaker" not in mapped()
    await store.open()
    try:
        assert "speaker" in mapped()
        m = make_memory(owner, "with a speaker", np.random.default_rng(2), speaker="Ana")
        await store.roles().memories.insert_memories([m])  # a strict mapping refuses an unmapped field
        got = await store.roles().memories.get_memory(owner, m.id)
        assert got is not None and got.speaker == "Ana"
    finally:
        await store.close()
