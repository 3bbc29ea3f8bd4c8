"""SQLite migrations of the embedded store (stores/migrations/sqlite.py), on real files.

A store made before migrations existed opens unchanged; a new migration is applied once and
recorded; a failing one rolls back; concurrent openers serialise; a store from a newer release
is refused.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from cognis_memory.domain import Category, Owner, Scope
from cognis_memory.search_filter import SearchFilter
from cognis_memory.stores.embedded import EmbeddedStore, connect
from cognis_memory.stores.filters import owner_token
from cognis_memory.stores.migrations.record_columns import missing_columns
from cognis_memory.stores.migrations.sqlite import (
    FTS_TOKENIZE,
    MIGRATIONS,
    Migration,
    MigrationError,
    SchemaTooNewError,
    apply_migrations,
    schema_version,
    table_columns,
)
from cognis_memory.stores.records import SQLITE, insert_statement, memory_to_row, row_values
from tests.stores.helpers import DIM, DIM_SHORT, make_memory, new_owner

# The schema script of embedded.py before migrations existed (as of c0480d7, the `_SCHEMA` it ran on every
# open): every store made until then has exactly this schema and schema_version 1, so migration 1 must stay
# that script, byte for byte. Pinned by its digest (`git show c0480d7:runtime/cognis_memory/stores/embedded.py`
# has the text).
SCHEMA_BEFORE_MIGRATIONS_SHA256 = "765af9da0610152e00bbe0ffd9ed61610b374af107f08fbfea742358d5138b29"


def schema_of(path: Path) -> list[tuple[str, str, str | None]]:
    with sqlite3.connect(path) as conn:
        return sorted(conn.execute("SELECT type, name, sql FROM sqlite_master").fetchall())


def version_of(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return schema_version(conn)


def open_store(path: Path) -> EmbeddedStore:
    store = EmbeddedStore(path, dim=DIM, dim_short=DIM_SHORT)
    asyncio.run(store.open())
    return store


def close_store(store: EmbeddedStore) -> None:
    asyncio.run(store.close())


#: the newest migration of this build, and the version a planted migration takes (the tests hold for any number
#: of real migrations)
LAST = MIGRATIONS[-1].version
NEXT = LAST + 1


def _record_columns_after_migration_1() -> list[str]:
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(MIGRATIONS[0].render())
        return [f"{a.table}.{a.column.name}" for a in missing_columns(table_columns(conn))]
    finally:
        conn.close()


#: the columns records/schema.py declares that the schema of migration 1 lacks (added on open, from the record)
RECORD_COLUMNS_SINCE = _record_columns_after_migration_1()
PLANTED = Migration(
    NEXT,
    "planted: a table, a row, a trigger",
    f"""
-- a ";" in a comment, in a string and in a trigger body must not cut a statement
CREATE TABLE planted (id INTEGER PRIMARY KEY, note TEXT NOT NULL);
INSERT INTO planted (note) VALUES ('added once; by migration {NEXT}');
CREATE TRIGGER planted_guard BEFORE DELETE ON planted BEGIN
    SELECT RAISE(ABORT, 'planted rows stay');
END;
""",
)


def test_migration_1_is_the_schema_stores_were_made_with() -> None:
    assert MIGRATIONS[0].version == 1 and FTS_TOKENIZE == "porter unicode61 remove_diacritics 2"
    assert hashlib.sha256(MIGRATIONS[0].render().encode()).hexdigest() == SCHEMA_BEFORE_MIGRATIONS_SHA256


def test_a_store_made_before_migrations_opens_unchanged_and_reads_its_data(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    # What EmbeddedStore.open did before migrations: the script, then version 1 if absent.
    conn = connect(path)
    conn.executescript(MIGRATIONS[0].render())  # the same text (the test above pins it)
    if conn.execute("SELECT version FROM schema_version").fetchone() is None:
        conn.execute("INSERT INTO schema_version(version) VALUES (1)")
    owner = new_owner()
    rng = np.random.default_rng(7)
    a = make_memory(owner, "Born in Lisbon", rng, category=Category.PERSONAL_DETAILS, speaker="Ana",
                    event_time=datetime(1965, 5, 1, 8, 30, tzinfo=UTC), source_message_ids=["m1"],
                    metadata={"n": 2})  # fmt: skip
    b = make_memory(owner, "Prefers green tea", rng, scope=Scope.CONTEXT, session_id="s1")
    # The rows as the store's record mapping writes them, in the columns of the schema of then.
    columns = [r[1] for r in conn.execute("PRAGMA table_info(memories)")]
    conn.execute("BEGIN")
    for m in (a, b):
        conn.execute(insert_statement("memories", columns, "?"), row_values(memory_to_row(m, SQLITE), columns))
        conn.execute(
            "INSERT INTO memories_fts (owner, content, memory_id) VALUES (?, ?, ?)",
            (owner_token(owner), m.content, m.id),
        )
    conn.execute("COMMIT")
    conn.close()
    before = schema_of(path)

    store = open_store(path)
    try:
        if LAST == 1 and not RECORD_COLUMNS_SINCE:  # nothing to migrate: nothing was written on open, the WAL is empty
            assert (tmp_path / "old.db-wal").stat().st_size == 0
            assert schema_of(path) == before
        assert version_of(path) == LAST

        async def read() -> None:
            got = await store.fetch_memories(owner, [a.id, b.id])
            assert {m.id: m.content for m in got} == {a.id: a.content, b.id: b.content}
            back = next(m for m in got if m.id == a.id)
            assert (back.speaker, back.event_time, back.source_message_ids, back.metadata) == (
                "Ana",
                a.event_time,
                ["m1"],
                {"n": 2},
            )
            hits = await store.keyword_search(SearchFilter(owner), "green tea", limit=5)
            assert [h.memory.id for h in hits] == [b.id]

        asyncio.run(read())
    finally:
        close_store(store)


def test_a_new_store_is_migrated_and_recorded(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    close_store(open_store(path))
    assert version_of(path) == MIGRATIONS[-1].version
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM schema_version").fetchone()[0] == 1  # one row, as always


def test_a_planted_migration_is_applied_once_and_recorded(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    close_store(open_store(path))  # version LAST
    migrations = (*MIGRATIONS, PLANTED)
    conn = connect(path)
    try:
        assert apply_migrations(conn, migrations) == [NEXT]
        assert schema_version(conn) == NEXT
        assert conn.execute("SELECT count(*) FROM schema_version").fetchone()[0] == 1
        assert conn.execute("SELECT note FROM planted").fetchall() == [(f"added once; by migration {NEXT}",)]
        with pytest.raises(sqlite3.IntegrityError, match="planted rows stay"):
            conn.execute("DELETE FROM planted")  # the trigger came through whole
    finally:
        conn.close()
    conn = connect(path)  # a second open: nothing to do
    try:
        assert apply_migrations(conn, migrations) == []
        assert conn.execute("SELECT count(*) FROM planted").fetchone()[0] == 1
    finally:
        conn.close()
    # from an empty file, every migration in order
    fresh = connect(tmp_path / "fresh.db")
    try:
        assert apply_migrations(fresh, migrations) == [m.version for m in migrations] and schema_version(fresh) == NEXT
    finally:
        fresh.close()


def test_a_failing_migration_rolls_back_and_raises(tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    close_store(open_store(path))
    before = schema_of(path)
    broken = Migration(
        NEXT,
        "fails at its third statement",
        """
CREATE TABLE half_done (x INTEGER);
ALTER TABLE memories ADD COLUMN half_done_column TEXT;
CREATE TABLE memories (x INTEGER);
""",
    )
    conn = connect(path)
    try:
        with pytest.raises(
            MigrationError, match=rf"migration {NEXT} \(fails at its third statement\).*version {LAST}"
        ) as err:
            apply_migrations(conn, (*MIGRATIONS, broken))
        assert isinstance(err.value.__cause__, sqlite3.OperationalError)
        assert not conn.in_transaction
    finally:
        conn.close()
    assert schema_of(path) == before and version_of(path) == LAST
    # the store still opens and works; a corrected migration then applies
    close_store(open_store(path))
    conn = connect(path)
    try:
        assert apply_migrations(conn, (*MIGRATIONS, PLANTED)) == [NEXT]
    finally:
        conn.close()


def _run_together(n: int, work: Callable[[], object]) -> list[object]:
    """Run ``work()`` in ``n`` threads released at once; their results (or the exceptions they raised)."""
    barrier = threading.Barrier(n)
    results: list[object] = [None] * n

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = work()
        except BaseException as e:  # reported by the test
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return results


def test_stores_opening_a_new_file_at_once_end_at_the_same_version(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"

    def open_and_write() -> int:
        store = open_store(path)
        try:
            o = Owner("t", f"u-{threading.get_ident()}")
            m = make_memory(o, "hello", np.random.default_rng(1))
            asyncio.run(store.insert_memories([m]))
            return version_of(path)
        finally:
            close_store(store)

    results = _run_together(4, open_and_write)
    assert results == [MIGRATIONS[-1].version] * 4, results
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 4
        assert conn.execute("SELECT count(*) FROM schema_version").fetchone()[0] == 1


def test_concurrent_runners_apply_each_migration_once(tmp_path: Path) -> None:
    path = tmp_path / "race.db"
    migrations = (*MIGRATIONS, PLANTED)

    def migrate() -> list[int]:
        conn = connect(path)
        try:
            return apply_migrations(conn, migrations)
        finally:
            conn.close()

    results = _run_together(4, migrate)
    applied = [r for r in results if isinstance(r, list)]
    assert len(applied) == len(results), results
    assert sorted(v for r in applied for v in r) == [m.version for m in migrations]
    assert version_of(path) == NEXT
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM planted").fetchone()[0] == 1


def test_a_store_from_a_newer_release_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    close_store(open_store(path))
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE schema_version SET version = ?", (NEXT + 5,))
    before = schema_of(path)
    store = EmbeddedStore(path, dim=DIM, dim_short=DIM_SHORT)
    with pytest.raises(SchemaTooNewError, match=rf"schema version {NEXT + 5}.*versions up to {LAST}") as err:
        asyncio.run(store.open())
    assert str(path) in str(err.value) and (err.value.recorded, err.value.known) == (NEXT + 5, LAST)
    assert schema_of(path) == before and version_of(path) == NEXT + 5


def test_openers_of_a_new_store_at_the_same_moment_all_connect(tmp_path: Path) -> None:
    """Switching a new file to WAL takes its exclusive lock and SQLite answers "database is locked" at
    once, busy timeout or not: six openers of one new store failed in about one trial of seven."""

    def open_and_write(path: Path) -> str:
        conn = connect(path)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("CREATE TABLE IF NOT EXISTS seen (x)")
            conn.execute("COMMIT")
            return str(conn.execute("PRAGMA journal_mode").fetchone()[0])
        finally:
            conn.close()

    for trial in range(60):
        path = tmp_path / f"new-{trial}.db"
        results = _run_together(6, lambda path=path: open_and_write(path))
        assert results == ["wal"] * 6, (trial, results)
