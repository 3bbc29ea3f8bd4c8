"""PostgreSQL's message role: raw messages, idempotent on the client's message id."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Sequence
from typing import Any

from psycopg import AsyncCursor
from psycopg.rows import dict_row

from ...domain import Message, Owner
from ..records import (
    MESSAGE_COLUMNS,
    POSTGRES,
    POSTGRES_MAX_PARAMETERS,
    insert_rows_statement,
    message_from_row,
    message_to_row,
    row_values,
)
from ..values import PagePosition
from .connection import PostgresDatabase

#: messages per INSERT statement of :meth:`PostgresMessages.save_messages` (PostgreSQL's parameter limit)
_MESSAGES_PER_STATEMENT = POSTGRES_MAX_PARAMETERS // len(MESSAGE_COLUMNS)
#: how often :meth:`PostgresMessages.save_messages` inserts a message again whose conflicting row was deleted
#: between its insert and the read of that row (a user forgotten meanwhile) before it gives up
_SAVE_ATTEMPTS = 3


@functools.lru_cache(maxsize=64)  # the same few sizes on every add
def insert_new_messages_sql(count: int) -> str:
    """``count`` messages in one statement, each skipped if its owner already has its client message id; returns
    the ids of those inserted."""
    return (
        insert_rows_statement("messages", MESSAGE_COLUMNS, count, "%s")
        + " ON CONFLICT (tenant_id, user_id, client_message_id) DO NOTHING RETURNING id"
    )


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
        """Insert the messages, all or none; a message whose client id its owner already used (earlier, or
        earlier in ``messages``) is not inserted and answered with the stored one. The usual case is one
        statement (one round trip): the insert of all of them; a repeated client id adds one read."""
        if not messages:
            return []
        answers: dict[int, tuple[Message, bool]] = {}
        pending = list(range(len(messages)))
        # one statement is atomic by itself; only more than one needs a transaction around them
        async with (
            self.db.connection() as conn,
            conn.transaction() if len(messages) > _MESSAGES_PER_STATEMENT else contextlib.nullcontext(),
            conn.cursor(row_factory=dict_row) as cur,
        ):
            for _ in range(_SAVE_ATTEMPTS):
                created = await _insert_new(cur, [messages[i] for i in pending])
                answers.update((i, (messages[i], True)) for i in pending if messages[i].id in created)
                repeated = [i for i in pending if i not in answers]
                stored = await _stored_by_client_id(cur, [messages[i] for i in repeated])
                for i in repeated:
                    m = messages[i]
                    if (hit := stored.get((m.tenant_id, m.user_id, m.client_message_id))) is not None:
                        answers[i] = (hit, False)
                pending = [i for i in repeated if i not in answers]
                if not pending:
                    return [answers[i] for i in range(len(messages))]
            raise RuntimeError(f"{len(pending)} message(s) neither inserted nor found in {_SAVE_ATTEMPTS} attempts")

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


async def _insert_new(cur: AsyncCursor[dict[str, Any]], messages: Sequence[Message]) -> set[str]:
    """Insert the messages whose client id is new for their owner; the ids of those inserted."""
    created: set[str] = set()
    for i in range(0, len(messages), _MESSAGES_PER_STATEMENT):
        batch = messages[i : i + _MESSAGES_PER_STATEMENT]
        params = [v for m in batch for v in row_values(message_to_row(m, POSTGRES), MESSAGE_COLUMNS)]
        await cur.execute(insert_new_messages_sql(len(batch)), params)
        created.update(row["id"] for row in await cur.fetchall())
    return created


async def _stored_by_client_id(
    cur: AsyncCursor[dict[str, Any]], messages: Sequence[Message]
) -> dict[tuple[str, str, str | None], Message]:
    """The stored messages with the client ids of ``messages``, by (tenant, user, client id)."""
    by_owner: dict[tuple[str, str], set[str]] = {}
    for m in messages:
        if m.client_message_id is not None:  # without one a message never conflicts
            by_owner.setdefault((m.tenant_id, m.user_id), set()).add(m.client_message_id)
    stored: dict[tuple[str, str, str | None], Message] = {}
    for (tenant_id, user_id), client_ids in by_owner.items():
        await cur.execute(
            "SELECT * FROM messages WHERE tenant_id = %s AND user_id = %s AND client_message_id = ANY(%s)",
            (tenant_id, user_id, sorted(client_ids)),
        )
        for row in await cur.fetchall():
            m = message_from_row(row, POSTGRES)
            stored[(m.tenant_id, m.user_id, m.client_message_id)] = m
    return stored
