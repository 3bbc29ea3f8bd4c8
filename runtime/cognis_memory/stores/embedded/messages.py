"""The embedded store's messages: saved once per client id, read back by id."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from ...domain import Message, Owner
from ..records import (
    MESSAGE_COLUMNS,
    SQLITE,
    insert_statement,
    message_from_row,
    message_to_row,
    row_values,
)
from ..values import PagePosition
from .base import EmbeddedBase

_INSERT_MESSAGE = insert_statement("messages", MESSAGE_COLUMNS, "?")


def session_messages_sql(*, paged: bool) -> str:
    """A session's messages in (timestamp, id) order: parameters tenant, user, session, (with ``paged``: the
    position's time and id), limit; the index ``messages_owner_session_ts`` serves it."""
    after = " AND (ts, id) > (?, ?)" if paged else ""
    return (
        f"SELECT * FROM messages WHERE tenant_id = ? AND user_id = ? AND session_id = ?{after} ORDER BY ts, id LIMIT ?"
    )


class EmbeddedMessages(EmbeddedBase):
    """The embedded store's messages: saved once per client id, read back by id."""

    def _save_messages(self, messages: Sequence[Message]) -> list[tuple[Message, bool]]:
        out: list[tuple[Message, bool]] = []
        with self._tx() as conn:
            for msg in messages:
                if msg.client_message_id is not None:
                    row = conn.execute(
                        "SELECT * FROM messages WHERE tenant_id = ? AND user_id = ? AND client_message_id = ?",
                        (msg.tenant_id, msg.user_id, msg.client_message_id),
                    ).fetchone()
                    if row is not None:
                        out.append((message_from_row(row, SQLITE), False))
                        continue
                conn.execute(_INSERT_MESSAGE, row_values(message_to_row(msg, SQLITE), MESSAGE_COLUMNS))
                out.append((msg, True))
        return out

    async def save_messages(self, messages: Sequence[Message]) -> list[tuple[Message, bool]]:
        return await asyncio.to_thread(self._save_messages, messages)

    async def get_messages(self, owner: Owner, ids: Sequence[str]) -> list[Message]:
        if not ids:
            return []
        q = ",".join("?" * len(ids))
        rows = await asyncio.to_thread(
            self._read,
            f"SELECT * FROM messages WHERE tenant_id = ? AND user_id = ? AND id IN ({q}) ORDER BY ts, id",
            (owner.tenant_id, owner.user_id, *ids),
        )
        return [message_from_row(r, SQLITE) for r in rows]

    async def list_session_messages(
        self, owner: Owner, session_id: str, *, limit: int = 100, after: PagePosition | None = None
    ) -> list[Message]:
        params: list[object] = [owner.tenant_id, owner.user_id, session_id]
        if after is not None:
            params += [SQLITE.time_out(after.time), after.id]
        rows = await asyncio.to_thread(self._read, session_messages_sql(paged=after is not None), (*params, limit))
        return [message_from_row(r, SQLITE) for r in rows]
