"""PostgreSQL's memory-version role: memories, their version chains, a user's whole record, bulk loads.

``write_version`` is one transaction that locks the previous row (``SELECT ... FOR UPDATE``). With an
outbox listener attached (:meth:`PostgresMemories.attach_outbox`, done by the dual store) every write
adds, in the same transaction, the rows of the transactional outbox that mirrors the change into
OpenSearch, and tells the listener after the commit; the dual store reads the outbox
(:mod:`cognis_memory.stores.dual.outbox`).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Sequence
from typing import Any, Protocol

from psycopg import sql as psql
from psycopg.rows import dict_row

from ...domain import Memory, Owner
from ..migrations.record_columns import POSTGRES_DIALECT
from ..records import (
    MEMORY_COLUMNS,
    MEMORY_RECORD,
    POSTGRES,
    POSTGRES_MAX_PARAMETERS,
    insert_rows_statement,
    insert_statement,
    memory_from_row,
    memory_to_row,
    row_values,
)
from ..values import PagePosition, UserSummary
from ..version_chain_sql import PSYCOPG_PARAM, chain_query
from ..version_rules import check_new_version_owner, check_previous_version, require_previous_version
from .connection import PostgresDatabase

_COLS = ", ".join(MEMORY_COLUMNS)
_CHAIN_SQL = chain_query(_COLS, PSYCOPG_PARAM)
_INSERT_MEMORY = insert_statement("memories", MEMORY_COLUMNS, "%s")
_OUTBOX_COLUMNS = ("op", "memory_id", "tenant_id", "user_id", "version")
_INSERT_OUTBOX = insert_statement("outbox", _OUTBOX_COLUMNS, "%s")
#: memories per INSERT statement of :meth:`PostgresMemories.insert_memories`: their parameters and their outbox
#: rows' stay within PostgreSQL's limit
_MEMORIES_PER_STATEMENT = POSTGRES_MAX_PARAMETERS // (len(MEMORY_COLUMNS) + len(_OUTBOX_COLUMNS))
#: when a memory was said (:attr:`~cognis_memory.domain.Memory.said_at`), the listing order; the index
#: ``memories_owner_said`` (migration 6) is on this expression and on the id in code point order, the order
#: SQLite and OpenSearch compare ids in
SAID_AT = "COALESCE(message_time, created_at)"


def list_memories_sql(*, include_history: bool, paged: bool) -> str:
    """The listing's query: parameters tenant, user, (with ``paged``: the position's time and id), limit."""
    current = " AND is_current" if not include_history else ""
    after = f' AND ({SAID_AT}, id COLLATE "C") > (%s, %s)' if paged else ""
    return (
        f"SELECT {_COLS} FROM memories WHERE tenant_id = %s AND user_id = %s{current}{after}"
        f' ORDER BY {SAID_AT}, id COLLATE "C" LIMIT %s'
    )


#: the PostgreSQL type of each column kind (the binary COPY of :meth:`PostgresMemories.bulk_load` names them)
_COPY_TYPES = {**POSTGRES_DIALECT.types, "vector": "vector"}


def _memory_params(m: Memory) -> tuple[Any, ...]:
    return row_values(memory_to_row(m, POSTGRES), MEMORY_COLUMNS)


@functools.lru_cache(maxsize=64)  # the same few shapes on every add
def insert_memories_sql(memories: int, outbox_rows: int) -> str:
    """One statement inserting ``memories`` memories and, in a data-modifying ``WITH`` of the same statement (so
    both commit or neither does, without a transaction around them), ``outbox_rows`` outbox rows; parameters:
    the memories' then the outbox rows'. One round trip instead of a transaction's four."""
    insert = insert_rows_statement("memories", MEMORY_COLUMNS, memories, "%s")
    if not outbox_rows:
        return insert
    return f"WITH written AS ({insert}) {insert_rows_statement('outbox', _OUTBOX_COLUMNS, outbox_rows, '%s')}"


class OutboxListener(Protocol):
    """Who mirrors the outbox into the keyword index (the dual store's relay)."""

    async def after_write(self) -> None:
        """Called after every committed write that added outbox rows; must not raise."""

    async def after_forget(self, outbox_id: int) -> dict[str, int]:
        """Called after a user's rows were deleted and the durable ``forget`` item ``outbox_id``
        was written; returns the counts of the index side (added to ``forget_user``'s counts)."""


class PostgresMemories:
    """The :class:`~cognis_memory.stores.roles.MemoryVersions` of a PostgreSQL database."""

    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db
        self._outbox: OutboxListener | None = None

    def attach_outbox(self, listener: OutboxListener) -> None:
        """From now on every write also writes outbox rows and tells ``listener`` after the commit."""
        self._outbox = listener

    @staticmethod
    def _outbox_rows_for_insert(memories: Sequence[Memory]) -> list[tuple[Any, ...]]:
        return [("upsert", m.id, m.tenant_id, m.user_id, m.version) for m in memories if m.is_current]

    def _use_outbox(self, outbox: bool | None) -> bool:
        return self._outbox is not None if outbox is None else outbox

    async def _after_write(self, outbox: bool) -> None:
        if outbox and self._outbox is not None:
            await self._outbox.after_write()

    async def insert_memories(self, memories: Sequence[Memory], *, outbox: bool | None = None) -> None:
        """Insert new memories, all or none; with the outbox (default: when a listener is attached) also their
        OpenSearch upserts. Up to ``_MEMORIES_PER_STATEMENT`` memories are one statement (one round trip)."""
        if not memories:
            return
        outbox = self._use_outbox(outbox)
        step = _MEMORIES_PER_STATEMENT
        batches = [memories[i : i + step] for i in range(0, len(memories), step)]
        # one statement is atomic by itself; only more than one needs a transaction around them
        async with (
            self.db.connection() as conn,
            conn.transaction() if len(batches) > 1 else contextlib.nullcontext(),
        ):
            for batch in batches:
                rows = self._outbox_rows_for_insert(batch) if outbox else []
                params = [v for m in batch for v in _memory_params(m)] + [v for row in rows for v in row]
                await conn.execute(insert_memories_sql(len(batch), len(rows)), params)
        await self._after_write(outbox)

    async def write_version(self, owner: Owner, previous_id: str, new: Memory, *, outbox: bool | None = None) -> Memory:
        check_new_version_owner(owner, new)
        params = _memory_params(new)
        outbox = self._use_outbox(outbox)
        async with self.db.connection() as conn, conn.transaction(), conn.cursor() as cur:
            await cur.execute(
                "SELECT is_current, version, chain_id FROM memories"
                " WHERE id = %s AND tenant_id = %s AND user_id = %s FOR UPDATE",
                (previous_id, owner.tenant_id, owner.user_id),
            )
            row = require_previous_version(previous_id, await cur.fetchone())
            check_previous_version(previous_id, new, is_current=row[0], chain_id=row[2])
            await cur.execute("UPDATE memories SET is_current = false WHERE id = %s", (previous_id,))
            await cur.execute(_INSERT_MEMORY, params)
            if outbox:
                rows = [("delete", previous_id, owner.tenant_id, owner.user_id, row[1])]
                rows += self._outbox_rows_for_insert([new])
                await cur.executemany(_INSERT_OUTBOX, rows)
        await self._after_write(outbox)
        return new

    async def _select_memories(self, query: str, params: Sequence[Any]) -> list[Memory]:
        async with self.db.connection() as conn, conn.cursor(row_factory=dict_row, binary=True) as cur:
            await cur.execute(query, params)
            return [memory_from_row(r, POSTGRES) for r in await cur.fetchall()]

    async def get_memory(self, owner: Owner, memory_id: str) -> Memory | None:
        rows = await self._select_memories(
            f"SELECT {_COLS} FROM memories WHERE id = %s AND tenant_id = %s AND user_id = %s",
            (memory_id, owner.tenant_id, owner.user_id),
        )
        return rows[0] if rows else None

    async def get_chain(self, owner: Owner, memory_id: str) -> list[Memory]:
        params = {"id": memory_id, "t": owner.tenant_id, "u": owner.user_id}
        return await self._select_memories(_CHAIN_SQL, params)  # type: ignore[arg-type]

    async def fetch_memories(self, owner: Owner, ids: Sequence[str]) -> list[Memory]:
        if not ids:
            return []
        rows = await self._select_memories(
            f"SELECT {_COLS} FROM memories WHERE tenant_id = %s AND user_id = %s AND id = ANY(%s)",
            (owner.tenant_id, owner.user_id, list(ids)),
        )
        by_id = {m.id: m for m in rows}
        return [by_id[i] for i in ids if i in by_id]

    async def fetch_current_memories(self, owner: Owner, ids: Sequence[str]) -> list[Memory]:
        """Like :meth:`fetch_memories` but only rows that are current *now* (the dual store's hydration)."""
        if not ids:
            return []
        rows = await self._select_memories(
            f"SELECT {_COLS} FROM memories WHERE tenant_id = %s AND user_id = %s AND is_current AND id = ANY(%s)",
            (owner.tenant_id, owner.user_id, list(ids)),
        )
        by_id = {m.id: m for m in rows}
        return [by_id[i] for i in dict.fromkeys(ids) if i in by_id]

    async def list_memories(
        self, owner: Owner, *, include_history: bool = False, limit: int = 1000, after: PagePosition | None = None
    ) -> list[Memory]:
        params: list[object] = [owner.tenant_id, owner.user_id]
        if after is not None:
            params += [after.time, after.id]
        sql = list_memories_sql(include_history=include_history, paged=after is not None)
        return await self._select_memories(sql, (*params, limit))

    async def list_users(
        self, tenant_id: str, *, limit: int = 100, after_user_id: str | None = None
    ) -> list[UserSummary]:
        # Code point order ("C" collation), as SQLite and OpenSearch sort, whatever the database's collation.
        # A page aggregates the tenant's rows past the cursor (no index has that collation): an operator's
        # listing, not a request path.
        async with self.db.connection() as conn, conn.cursor() as cur:
            await cur.execute(
                "SELECT user_id, count(*) FILTER (WHERE is_current AND NOT deleted), max(created_at) FROM memories"
                ' WHERE tenant_id = %s AND user_id COLLATE "C" > %s'
                ' GROUP BY user_id ORDER BY user_id COLLATE "C" LIMIT %s',
                (tenant_id, after_user_id or "", limit),
            )
            return [UserSummary(u, int(n), last) for u, n, last in await cur.fetchall()]

    async def forget_user(self, owner: Owner) -> dict[str, int]:
        """Delete every row of the user in every table (memories, messages, jobs, outbox). With an
        outbox listener, the same transaction leaves one durable ``forget`` outbox item (so the
        OpenSearch side is completed later if it cannot be done now) and the listener runs it."""
        if self._outbox is None:
            counts, _ = await self._forget(owner, outbox=False)
            return counts
        counts, outbox_id = await self._forget(owner, outbox=True)
        assert outbox_id is not None
        counts.pop("outbox_pending", None)
        return counts | await self._outbox.after_forget(outbox_id)

    async def _forget(self, owner: Owner, *, outbox: bool) -> tuple[dict[str, int], int | None]:
        key = (owner.tenant_id, owner.user_id)
        outbox_id: int | None = None
        counts: dict[str, int] = {}
        async with self.db.connection() as conn, conn.transaction(), conn.cursor() as cur:
            for table in ("memories", "messages", "jobs", "outbox"):
                await cur.execute(
                    psql.SQL("DELETE FROM {} WHERE tenant_id = %s AND user_id = %s").format(psql.Identifier(table)), key
                )
                counts[table] = cur.rowcount
            if outbox:
                await cur.execute(
                    _INSERT_OUTBOX + " RETURNING id", ("forget", None, owner.tenant_id, owner.user_id, None)
                )
                row = await cur.fetchone()
                outbox_id = int(row[0]) if row else None
        counts["outbox_pending"] = counts.pop("outbox")
        return counts, outbox_id

    async def bulk_load(self, memories: Sequence[Memory], *, rebuild_index: bool = True) -> None:
        """Load many memories fast: drop the HNSW index, ``COPY`` the rows, rebuild the index.

        Meant for imports and benchmarks on a quiet database (searches fall back to exact scans
        while the index is missing); no outbox rows are written.
        """
        async with self.db.connection() as conn:
            await conn.execute("SET statement_timeout = 0")  # building HNSW over many rows takes minutes
            try:
                if rebuild_index:
                    await conn.execute("DROP INDEX IF EXISTS memories_short_hnsw")
                async with (
                    conn.transaction(),
                    conn.cursor() as cur,
                    cur.copy(f"COPY memories ({_COLS}) FROM STDIN (FORMAT BINARY)") as copy,
                ):
                    copy.set_types([_COPY_TYPES[c.kind] for c in MEMORY_RECORD])
                    for m in memories:
                        await copy.write_row(_memory_params(m))
                if rebuild_index:
                    await conn.execute("SET maintenance_work_mem = '512MB'")
                    await conn.execute(
                        "CREATE INDEX IF NOT EXISTS memories_short_hnsw ON memories USING hnsw"
                        " (embedding_short vector_cosine_ops) WITH (m = 16, ef_construction = 64) WHERE is_current"
                    )
                await conn.execute("ANALYZE memories")
            finally:
                await conn.execute("RESET maintenance_work_mem")
                await conn.execute(
                    "SELECT set_config('statement_timeout', %s, false)", (str(self.db.statement_timeout_ms),)
                )
