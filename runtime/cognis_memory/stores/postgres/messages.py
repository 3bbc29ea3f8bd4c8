"""PostgreSQL's message role: raw messages, idempotent on the client's message id."""

from __future__ import annotations

from collections.abc import Sequence

from psycopg.rows import dict_row

from ...domain import Message, Owner
from ..records import MESSAGE_COLUMNS, POSTGRES, insert_statement, message_from_row, message_to_row, row_values
from ..values import PagePosition
from .connection import PostgresDatabase

_INSERT_MESSAGE = insert_statement("messages", MESSAGE_COLUMNS, "%s")


def session_messages_sql(*, paged: bool) -> str:
    """A session's messages in (timestamp, id) order, the id in code point order as SQLite and OpenSearch
    compare it: parameters tenant, user, session, (with ``paged``: the position's time and id), limit; the index
    ``messages_owner_session_ts`` serves it."""
    after = ' AND (ts, id COLLATE "C") > (%s, %s)' if paged else ""
    return (
        f"SELECT * FROM messages WHERE tenant_id = %s AND user_id = %s AND session_id = %s{after}"
        ' ORDER BY ts, id COLLATE "C" LIMIT %s'
    )


class PostgresMessages:
    """The :class:`~cognis_memory.stores.roles.MessageLog` of a PostgreSQL database."""

    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db

    async def save_messages(self, messages: Sequence[Message]) -> list[tuple[Message, bool]]:
        out: list[tuple[Message, bool]] = []
        if not messages:
            return out
        async with self.db.connection() as conn, conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
            for msg in messages:
                await cur.execute(
                    _INSERT_MESSAGE + " ON CONFLICT (tenant_id, user_id, client_message_id) DO NOTHING RETURNING id",
                    row_values(message_to_row(msg, POSTGRES), MESSAGE_COLUMNS),
                )
                if await cur.fetchone() is not None:
                    out.append((msg, True))
                    continue
                await cur.execute(
                    "SELECT * FROM messages WHERE tenant_id = %s AND user_id = %s AND client_message_id = %s",
                    (msg.tenant_id, msg.user_id, msg.client_message_id),
                )
                row = await cur.fetchone()
                assert row is not None, "conflicting message vanished inside the transaction"
                out.append((message_from_row(row, POSTGRES), False))
        return out

    async def get_messages(self, owner: Owner, ids: Sequence[str]) -> list[Message]:
        if not ids:
            return []
        async with self.db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                "SELECT * FROM messages WHERE tenant_id = %s AND user_id = %s AND id = ANY(%s) ORDER BY ts, id",
                (owner.tenant_id, owner.user_id, list(ids)),
            )
            return [message_from_row(r, POSTGRES) for r in await cur.fetchall()]

    async def list_session_messages(
        self, owner: Owner, session_id: str, *, limit: int = 100, after: PagePosition | None = None
    ) -> list[Message]:
        params: list[object] = [owner.tenant_id, owner.user_id, session_id]
        if after is not None:
            params += [after.time, after.id]
        async with self.db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(session_messages_sql(paged=after is not None), (*params, limit))
            return [message_from_row(r, POSTGRES) for r in await cur.fetchall()]
