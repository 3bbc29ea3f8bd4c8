"""A store as an earlier release left it: the numbered migrations before a named one, applied as that
release applied them, for the migration tests to write old rows into and then open with this build."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from cognis_memory.domain import Owner
from cognis_memory.stores.filters import owner_token
from cognis_memory.stores.migrations import postgres as pg_migrations
from cognis_memory.stores.migrations import sqlite as sqlite_migrations
from cognis_memory.stores.records import SQLITE, insert_statement
from tests.reliability.helpers import DIM_SHORT
from tests.store_kinds import build_embedded


def migrations_before(migrations: Iterable[Any], name: str) -> list[Any]:
    """The migrations an earlier release had: those numbered below the one called ``name``."""
    migrations = list(migrations)
    version = next(m.version for m in migrations if m.name == name)
    return [m for m in migrations if m.version < version]


def old_row(
    to_row: Callable[[Any, Any], dict[str, Any]], record: Any, values: Any, columns: list[str]
) -> dict[str, Any]:
    """The row the earlier release wrote: today's row of ``record`` in the columns its schema had."""
    row = to_row(record, values)
    return {c: row[c] for c in columns}


def sqlite_before(conn: sqlite3.Connection, name: str, table: str) -> list[str]:
    """Give ``conn`` the SQLite schema of the release before migration ``name``; ``table``'s columns."""
    earlier = migrations_before(sqlite_migrations.MIGRATIONS, name)
    for m in earlier:
        for statement in m.statements():
            conn.execute(statement)
    conn.execute("INSERT INTO schema_version(version) VALUES (?)", (earlier[-1].version,))
    return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]


async def postgres_before(
    conn: psycopg.AsyncConnection, name: str, table: str, *, dim: int, dim_short: int
) -> list[str]:
    """Give ``conn`` (autocommit) the PostgreSQL schema of the release before migration ``name``, as its
    migration run recorded it; ``table``'s columns in their order."""
    await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    await conn.execute(
        "CREATE TABLE schema_migrations ("
        " version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
    )
    for m in migrations_before(pg_migrations.MIGRATIONS, name):
        async with conn.transaction():
            await conn.execute(m.render(dim, dim_short))
            await conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (m.version, m.name))
    return await postgres_columns(conn, table)


async def postgres_columns(conn: psycopg.AsyncConnection, table: str) -> list[str]:
    """``table``'s columns in their order."""
    cur = await conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = %s ORDER BY ordinal_position", (table,)
    )
    return [r[0] for r in await cur.fetchall()]


async def opensearch_memories(store: Any) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The OpenSearch-only store's memories index: its mapping, and its hits (with sequence numbers) by
    memory id."""
    client = store.client
    found = await store.runner(client.indices.get_mapping, index=store.memories)
    await store.runner(client.indices.refresh, index=store.memories)
    res = await store.runner(
        client.search, index=store.memories, body={"size": 100, "query": {"match_all": {}}, "seq_no_primary_term": True}
    )
    return next(iter(found.values()))["mappings"], {h["_source"]["memory_id"]: h for h in res["hits"]["hits"]}


def unit_vector(v: np.ndarray) -> np.ndarray:
    """``v`` scaled to length 1, as float32 (a stored embedding)."""
    return (v / np.linalg.norm(v)).astype(np.float32)


def insert_sqlite_memories(conn: sqlite3.Connection, columns: list[str], memories: Iterable[Any], row: Any) -> None:
    """Write ``memories`` as the earlier release did: ``row(m, SQLITE, columns)`` each, and the full-text row
    of each current one, in one transaction."""
    conn.execute("BEGIN")
    for m in memories:
        conn.execute(insert_statement("memories", columns, "?"), tuple(row(m, SQLITE, columns).values()))
        if m.is_current:
            conn.execute(
                "INSERT INTO memories_fts(owner, content, memory_id) VALUES (?, ?, ?)",
                (owner_token(Owner(m.tenant_id, m.user_id)), m.content, m.id),
            )
    conn.execute("COMMIT")


async def open_embedded(path: Path, dim: int) -> None:
    """Open the embedded store at ``path`` once with this build (its migrations run), and check the file is at
    the newest schema version afterwards."""
    handle = build_embedded(path, dim, DIM_SHORT)
    await handle.store.open()
    await handle.store.close()
    with sqlite3.connect(path) as db:
        assert sqlite_migrations.schema_version(db) == sqlite_migrations.MIGRATIONS[-1].version
