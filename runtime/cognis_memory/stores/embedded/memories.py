"""The embedded store's memories: inserts, versions, reads, listings, forgetting a user."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from ...domain import Memory, Owner
from ..filters import owner_token
from ..records import (
    SQLITE,
    memory_from_row,
)
from ..values import PagePosition, UserSummary
from ..version_chain_sql import SQLITE_PARAM, chain_query
from ..version_rules import check_new_version_owner, check_previous_version, require_previous_version
from .base import MEMORY_COLUMNS_SQL, EmbeddedBase

_CHAIN_SQL = chain_query(MEMORY_COLUMNS_SQL, SQLITE_PARAM)
#: when a memory was said (:attr:`~cognis_memory.domain.Memory.said_at`), the listing order; the index
#: ``memories_owner_said`` (migration 3) is on this very expression
SAID_AT = "COALESCE(message_time, created_at)"


def list_memories_sql(*, include_history: bool, paged: bool) -> str:
    """The listing's query: parameters tenant, user, (with ``paged``: the position's time twice and id), limit.
    The first bound of a page lets SQLite seek in the index (it does not seek on a row value over an expression)."""
    current = "" if include_history else " AND is_current = 1"
    after = f" AND {SAID_AT} >= ? AND ({SAID_AT}, id) > (?, ?)" if paged else ""
    return (
        f"SELECT {MEMORY_COLUMNS_SQL} FROM memories WHERE tenant_id = ? AND user_id = ?{current}{after}"
        f" ORDER BY {SAID_AT}, id LIMIT ?"
    )


class EmbeddedMemories(EmbeddedBase):
    """The embedded store's memories: inserts, versions, reads, listings, forgetting a user."""

    def _insert_memories(self, memories: Sequence[Memory]) -> None:
        with self._tx() as conn:
            rowids = [self._insert_memory(conn, m) for m in memories]
        self._index_add(memories, rowids)

    async def insert_memories(self, memories: Sequence[Memory]) -> None:
        if memories:
            await asyncio.to_thread(self._insert_memories, list(memories))

    def _write_version(self, owner: Owner, previous_id: str, new: Memory) -> Memory:
        check_new_version_owner(owner, new)
        with self._tx() as conn:
            row = require_previous_version(
                previous_id,
                conn.execute(
                    "SELECT is_current, chain_id FROM memories WHERE id = ? AND tenant_id = ? AND user_id = ?",
                    (previous_id, owner.tenant_id, owner.user_id),
                ).fetchone(),
            )
            check_previous_version(previous_id, new, is_current=bool(row["is_current"]), chain_id=row["chain_id"])
            conn.execute(
                "UPDATE memories SET is_current = 0 WHERE id = ? AND tenant_id = ? AND user_id = ?",
                (previous_id, owner.tenant_id, owner.user_id),
            )
            conn.execute("DELETE FROM memories_fts WHERE memory_id = ?", (previous_id,))
            rowids = self._insert_memory(conn, new)
        with self._vectors.lock, self._keywords.lock:
            self._index_remove(owner, previous_id)
            self._index_add([new], [rowids])
        return new

    async def write_version(self, owner: Owner, previous_id: str, new: Memory) -> Memory:
        return await asyncio.to_thread(self._write_version, owner, previous_id, new)

    async def get_memory(self, owner: Owner, memory_id: str) -> Memory | None:
        rows = await asyncio.to_thread(
            self._read,
            f"SELECT {MEMORY_COLUMNS_SQL} FROM memories WHERE id = ? AND tenant_id = ? AND user_id = ?",
            (memory_id, owner.tenant_id, owner.user_id),
        )
        return memory_from_row(rows[0], SQLITE) if rows else None

    def _get_chain(self, owner: Owner, memory_id: str) -> list[Memory]:
        params = {"id": memory_id, "t": owner.tenant_id, "u": owner.user_id}
        return [memory_from_row(r, SQLITE) for r in self._read(_CHAIN_SQL, params)]

    async def get_chain(self, owner: Owner, memory_id: str) -> list[Memory]:
        return await asyncio.to_thread(self._get_chain, owner, memory_id)

    async def fetch_memories(self, owner: Owner, ids: Sequence[str]) -> list[Memory]:
        return await asyncio.to_thread(self._fetch, owner, list(ids))

    async def list_memories(
        self, owner: Owner, *, include_history: bool = False, limit: int = 1000, after: PagePosition | None = None
    ) -> list[Memory]:
        params: list[object] = [owner.tenant_id, owner.user_id]
        if after is not None:
            t = SQLITE.time_out(after.time)
            params += [t, t, after.id]
        rows = await asyncio.to_thread(
            self._read, list_memories_sql(include_history=include_history, paged=after is not None), (*params, limit)
        )
        return [memory_from_row(r, SQLITE) for r in rows]

    async def list_users(
        self, tenant_id: str, *, limit: int = 100, after_user_id: str | None = None
    ) -> list[UserSummary]:
        rows = await asyncio.to_thread(
            self._read,
            "SELECT user_id, SUM(is_current = 1 AND deleted = 0) AS current, MAX(created_at) AS last FROM memories"
            " WHERE tenant_id = ? AND user_id > ? GROUP BY user_id ORDER BY user_id LIMIT ?",
            (tenant_id, after_user_id or "", limit),
        )
        return [UserSummary(r["user_id"], int(r["current"]), SQLITE.time(r["last"])) for r in rows]  # type: ignore[arg-type]

    def _forget_user(self, owner: Owner) -> dict[str, int]:
        with self._tx() as conn:
            fts = conn.execute("DELETE FROM memories_fts WHERE owner = ?", (owner_token(owner),)).rowcount
            counts = {
                "memories": conn.execute(
                    "DELETE FROM memories WHERE tenant_id = ? AND user_id = ?", (owner.tenant_id, owner.user_id)
                ).rowcount,
                "messages": conn.execute(
                    "DELETE FROM messages WHERE tenant_id = ? AND user_id = ?", (owner.tenant_id, owner.user_id)
                ).rowcount,
                "jobs": conn.execute(
                    "DELETE FROM jobs WHERE tenant_id = ? AND user_id = ?", (owner.tenant_id, owner.user_id)
                ).rowcount,
                "index_documents": fts,
            }
        self._fts_stats.changed()
        self._vectors.drop(owner)
        self._keywords.drop(owner)
        return counts

    async def forget_user(self, owner: Owner) -> dict[str, int]:
        return await asyncio.to_thread(self._forget_user, owner)
