"""Reading and editing a memory as a chain of versions: a memory keeps one id, its chain id (the id of its
first version), and every version has an id of its own; each call here takes either, and the chain is found
from any member. An edit or a delete writes a new version on top of the current one, and is tried again on
the newer current version when other writes replace it meanwhile (:data:`WRITE_ATTEMPTS`).

:class:`~cognis_memory.service.MemoryService` checks the owner and hands its memory operations here.
"""

from __future__ import annotations

from datetime import datetime

from .caching.result_cache import Cache
from .domain import Category, Memory, MemoryKind, Owner
from .encoding.batching import Priority
from .encoding.encoder import MatryoshkaEncoder
from .errors import ConflictError, NotFoundError
from .search_text import search_text
from .stores.roles import MemoryVersions
from .validation import check_id, check_update

#: how often an edit or a delete is tried when other writes replace the memory's current version meanwhile
WRITE_ATTEMPTS = 3


def newest_version(chain: list[Memory]) -> Memory:
    """The chain's newest version: its current one, else (a deleted memory) its tombstone."""
    return next((m for m in reversed(chain) if m.is_current), chain[-1])


class MemoryEditor:
    """The version chains of ``memories``; an edit re-embeds changed content with ``encoder`` and every
    write drops the owner's cached search results from ``cache``."""

    def __init__(
        self, memories: MemoryVersions, cache: Cache, encoder: MatryoshkaEncoder, *, memory_max_bytes: int
    ) -> None:
        self.memories, self.cache, self.encoder = memories, cache, encoder
        self.memory_max_bytes = memory_max_bytes

    async def chain(self, owner: Owner, memory_id: str) -> list[Memory]:
        """The version chain holding ``memory_id`` (the memory's id or any version's), oldest first; NotFoundError
        when no memory of this owner has that id."""
        check_id("memory_id", memory_id)
        chain = await self.memories.get_chain(owner, memory_id)
        if not chain:
            raise NotFoundError(f"memory {memory_id} not found")
        return chain

    async def live_head(self, owner: Owner, memory_id: str) -> Memory:
        """The memory's current version; NotFoundError for an unknown id and for a deleted memory."""
        head = newest_version(await self.chain(owner, memory_id))
        if head.deleted:
            raise NotFoundError(f"memory {memory_id} was deleted (its versions stay readable in its history)")
        return head

    async def update(
        self,
        owner: Owner,
        memory_id: str,
        *,
        content: str | None = None,
        category: Category | str | None = None,
        event_time: datetime | None = None,
    ) -> Memory:
        """Write a new version on top of the memory's current one (the old one stays in its history).
        NotFoundError for an unknown or deleted memory; ConflictError only when other writes keep replacing
        the current version while this one is written."""
        current = await self.live_head(owner, memory_id)
        changes = check_update(
            content=content, category=category, event_time=event_time, max_bytes=self.memory_max_bytes
        )
        if "content" in changes:
            changes["time_expressions"] = []  # they were resolved in the text being replaced
        for attempt in range(WRITE_ATTEMPTS):
            own = dict(changes)
            if current.kind is MemoryKind.RAW and "content" in own:
                own["kind"] = MemoryKind.FACT  # an edited message is no longer the raw message
            new = current.next_version(**own)
            if "content" in own:
                full, short = await self.encoder.encode_async([search_text(new)], Priority.QUERY)
                new.embedding, new.embedding_short = full[0], short[0]
            try:
                new = await self.memories.write_version(owner, current.id, new)
            except ConflictError:  # another write replaced the current version meanwhile: edit the newer one
                if attempt + 1 == WRITE_ATTEMPTS:
                    raise
                current = await self.live_head(owner, memory_id)
                continue
            await self.cache.invalidate(owner)
            return new
        raise AssertionError("unreachable")

    async def delete(self, owner: Owner, memory_id: str) -> Memory:
        """Soft delete: a tombstone version on top of the chain; history keeps the rest. Idempotent: deleting a
        memory already deleted writes nothing and returns its tombstone again. NotFoundError only for an id no
        memory of this owner has."""
        for attempt in range(WRITE_ATTEMPTS):
            head = newest_version(await self.chain(owner, memory_id))
            if head.deleted:
                return head
            try:
                tomb = await self.memories.write_version(owner, head.id, head.tombstone())
            except ConflictError:  # changed meanwhile (edited, or deleted by a concurrent call): look again
                if attempt + 1 == WRITE_ATTEMPTS:
                    raise
                continue
            await self.cache.invalidate(owner)
            return tomb
        raise AssertionError("unreachable")
