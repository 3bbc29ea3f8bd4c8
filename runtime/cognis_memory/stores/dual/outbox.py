"""The reading side of the dual store's transactional outbox in PostgreSQL.

PostgreSQL's memory writes add outbox rows in their own transaction
(:mod:`cognis_memory.stores.postgres.memories`); the dual store's relay reads them here, locked by one
drain at a time, with the PostgreSQL state of the memories they name, and acknowledges or retries
them; reconcile asks which memories still have work pending.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from ...domain import Memory
from ..postgres import PostgresDatabase
from ..records import MEMORY_COLUMNS_WITHOUT_VECTORS, POSTGRES, memory_from_row

_COLS_NO_VEC = ", ".join(MEMORY_COLUMNS_WITHOUT_VECTORS)


@dataclass(slots=True)
class OutboxItem:
    """One pending OpenSearch operation. ``op`` is what the writer intended (upsert/delete/forget)."""

    id: int
    op: str
    memory_id: str | None
    tenant_id: str
    user_id: str
    version: int | None
    attempts: int
    created_at: datetime


@dataclass(frozen=True, slots=True)
class OutboxState:
    """How far OpenSearch is behind PostgreSQL: the rows waiting in the outbox (due or not, failed ones
    included) and the age of the oldest of them in seconds (0 when there is none)."""

    rows: int
    oldest_age_s: float


class OutboxBatch:
    """Outbox rows locked (``FOR UPDATE SKIP LOCKED``) by one drain, plus the Postgres state they mirror.

    Lives inside one transaction: :meth:`ack` deletes rows, :meth:`fail` records an attempt;
    both take effect when the batch's context exits without an exception.
    """

    def __init__(self, conn: psycopg.AsyncConnection[Any], items: list[OutboxItem], states: dict[str, Memory]) -> None:
        self._conn = conn
        self.items = items
        #: The current Postgres row of every memory named by an item (absent when it no longer exists).
        self.states = states

    async def ack(self, ids: Sequence[int]) -> None:
        if ids:
            await self._conn.execute("DELETE FROM outbox WHERE id = ANY(%s)", (list(ids),))

    async def fail(self, ids: Sequence[int], error: str, retry_in_s: float) -> None:
        if ids:
            await self._conn.execute(
                "UPDATE outbox SET attempts = attempts + 1, last_error = %s,"
                " next_attempt_at = now() + make_interval(secs => %s) WHERE id = ANY(%s)",
                (error[:2000], retry_in_s, list(ids)),
            )


class PostgresOutbox:
    """The outbox rows of one PostgreSQL database, as the relay and reconcile read them."""

    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db

    @contextlib.asynccontextmanager
    async def batch(self, limit: int, *, only_ids: Sequence[int] | None = None) -> AsyncIterator[OutboxBatch]:
        """Lock up to ``limit`` due outbox rows (oldest first, skipping rows other drains hold) for
        one transaction, with the current Postgres state of the memories they name."""
        async with self.db.connection() as conn, conn.transaction():
            async with conn.cursor(row_factory=dict_row) as cur:
                if only_ids is not None:
                    await cur.execute(
                        "SELECT * FROM outbox WHERE id = ANY(%s) ORDER BY id FOR UPDATE SKIP LOCKED", (list(only_ids),)
                    )
                else:
                    await cur.execute(
                        "SELECT * FROM outbox WHERE next_attempt_at <= now() ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED",
                        (limit,),
                    )
                items = [
                    OutboxItem(
                        id=r["id"], op=r["op"], memory_id=r["memory_id"], tenant_id=r["tenant_id"],
                        user_id=r["user_id"], version=r["version"], attempts=r["attempts"], created_at=r["created_at"],
                    )
                    for r in await cur.fetchall()
                ]  # fmt: skip
                ids = sorted({i.memory_id for i in items if i.memory_id})
                states: dict[str, Memory] = {}
                if ids:
                    await cur.execute(f"SELECT {_COLS_NO_VEC} FROM memories WHERE id = ANY(%s)", (ids,))
                    states = {r["id"]: memory_from_row(r, POSTGRES) for r in await cur.fetchall()}
            yield OutboxBatch(conn, items, states)

    async def size(self) -> int:
        """Rows waiting in the outbox (due or not)."""
        async with self.db.connection() as conn:
            cur = await conn.execute("SELECT count(*) FROM outbox")
            row = await cur.fetchone()
            return int(row[0]) if row else 0

    async def state(self) -> OutboxState:
        """The rows waiting and the age of the oldest, read in one statement (``now()`` is its start).

        One scan of the table, like :meth:`size`: the outbox holds only the work not yet acknowledged."""
        async with self.db.connection() as conn:
            cur = await conn.execute(
                "SELECT count(*), COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0) FROM outbox"
            )
            row = await cur.fetchone()
        if row is None:
            return OutboxState(0, 0.0)
        return OutboxState(rows=int(row[0]), oldest_age_s=max(0.0, float(row[1])))

    async def pending_memory_ids(self, *, tenant_id: str | None = None) -> set[str]:
        """Memory ids with outbox work still pending (reconcile does not count them as drift)."""
        where = " AND tenant_id = %s" if tenant_id is not None else ""
        async with self.db.connection() as conn:
            cur = await conn.execute(
                f"SELECT DISTINCT memory_id FROM outbox WHERE memory_id IS NOT NULL{where}",
                (tenant_id,) if tenant_id is not None else (),
            )
            return {r[0] for r in await cur.fetchall()}
