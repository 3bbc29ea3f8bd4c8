"""The message role: raw messages as users sent them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ...domain import Message, Owner


@runtime_checkable
class MessageLog(Protocol):
    async def save_messages(self, messages: Sequence[Message]) -> list[tuple[Message, bool]]:
        """Store raw messages; idempotent on (tenant, user, client_message_id).

        Returns, per input, the stored message (the earlier one for a repeated client id)
        and whether it was newly created.
        """

    async def get_messages(self, owner: Owner, ids: Sequence[str]) -> list[Message]: ...
