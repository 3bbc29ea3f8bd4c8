"""The memory-version role: memories, their version chains, and a user's whole record."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ...domain import Memory, Owner
from ..values import PagePosition, UserSummary


@runtime_checkable
class MemoryVersions(Protocol):
    async def insert_memories(self, memories: Sequence[Memory]) -> None:
        """Insert new memories (first versions or raw-message memories), in one transaction."""

    async def write_version(self, owner: Owner, previous_id: str, new: Memory) -> Memory:
        """Atomically mark ``previous_id`` not current and insert ``new`` on top of it.

        Raises NotFoundError if ``previous_id`` is not this owner's, ConflictError if it is
        no longer current.
        """

    async def get_memory(self, owner: Owner, memory_id: str) -> Memory | None:
        """Any version by id, or None when absent or owned by someone else."""

    async def get_chain(self, owner: Owner, memory_id: str) -> list[Memory]:
        """The whole version chain containing ``memory_id``, oldest first (empty if unknown)."""

    async def fetch_memories(self, owner: Owner, ids: Sequence[str]) -> list[Memory]:
        """Memories by id (any version), with embeddings; unknown or foreign ids are skipped."""

    async def list_memories(
        self, owner: Owner, *, include_history: bool = False, limit: int = 1000, after: PagePosition | None = None
    ) -> list[Memory]:
        """Memories of one user in the order they were said (:attr:`~cognis_memory.domain.Memory.said_at`,
        then id in code point order), those after ``after`` (the paging position), for listing and export."""

    async def list_users(
        self, tenant_id: str, *, limit: int = 100, after_user_id: str | None = None
    ) -> list[UserSummary]:
        """The tenant's users ordered by user id, those after ``after_user_id`` (the paging cursor);
        the tenant is applied inside the backend query."""

    async def forget_user(self, owner: Owner) -> dict[str, int]:
        """Hard-delete everything of one user (messages, every version, jobs, index entries). Returns counts."""
