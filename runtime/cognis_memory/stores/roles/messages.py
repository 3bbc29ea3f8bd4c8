"""The message role: raw messages as users sent them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ...domain import Message, Owner
from ..values import PagePosition


@runtime_checkable
class MessageLog(Protocol):
    async def save_messages(self, messages: Sequence[Message]) -> list[tuple[Message, bool]]:
        """Store raw messages; idempotent on (tenant, user, client_message_id).

        Returns, per input, the stored message (the earlier one for a repeated client id)
        and whether it was newly created.
        """

    async def get_messages(self, owner: Owner, ids: Sequence[str]) -> list[Message]: ...

    async def list_session_messages(
        self, owner: Owner, session_id: str, *, limit: int = 100, after: PagePosition | None = None
    ) -> list[Message]:
        """One session's messages of one user as they were sent, in (timestamp, id) order, those after
        ``after`` (the paging position). The owner and the session are applied inside the backend query."""
