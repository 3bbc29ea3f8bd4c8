"""The store protocol every backend implements (embedded SQLite, dual PostgreSQL+OpenSearch,
OpenSearch-only), and the value types that cross it.

Rules every implementation follows:

* Every method takes the :class:`~cognis_memory.domain.Owner` (tenant and user) and applies
  it *inside* the backend query, never by filtering results afterwards.
* Searches see current versions only (``is_current``), also applied inside the query.
* Returned memories carry their full embedding (the dedup stage needs it).
* A failing secondary dependency (for example OpenSearch behind the dual store) raises
  :class:`~cognis_memory.errors.DependencyUnavailable`, so the pipeline can answer degraded.
* ``write_version`` is atomic: the new version is written and the previous one loses
  ``is_current`` together, or neither happens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, runtime_checkable

import numpy as np

from ..domain import Category, Job, JobStatus, Memory, MemoryKind, Message, Owner, Scope


@dataclass(slots=True, frozen=True)
class SearchFilter:
    """What a search may see. ``owner`` is mandatory; everything else narrows it.

    ``session_id``: CONTEXT-scope memories are visible only when they belong to this session
    (USER-scope memories are unaffected); ``None`` means CONTEXT memories of every session.
    ``time_from``/``time_to`` apply to the effective time (event time, else message time);
    memories without any time are excluded when a range is given.
    """

    owner: Owner
    scopes: frozenset[Scope] | None = None
    session_id: str | None = None
    categories: frozenset[Category] | None = None
    kinds: frozenset[MemoryKind] | None = None
    agent_id: str | None = None
    time_from: datetime | None = None
    time_to: datetime | None = None


@dataclass(slots=True)
class ScoredMemory:
    memory: Memory
    score: float


@dataclass(slots=True)
class VectorSearchResult:
    """Hits of the vector side, best first, with what the stages cost.

    ``timings_ms`` holds ``vector_short`` and ``vector_full`` (a single-stage search reports
    only ``vector_full``); ``candidates_short`` is the size of the prefix shortlist.
    """

    hits: list[ScoredMemory]
    candidates_short: int = 0
    timings_ms: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True, frozen=True)
class UserSummary:
    """One user of a tenant, as :meth:`MemoryStore.list_users` sees it: a user exists while any
    memory of theirs (any version, tombstones included) is stored."""

    user_id: str
    current_memories: int  #: current versions that are not deleted
    last_memory_at: datetime  #: creation time of the user's newest memory version


@dataclass(slots=True)
class ApiKeyRecord:
    key_hash: str
    tenant_id: str
    read_only: bool = False
    name: str = ""


@runtime_checkable
class MemoryStore(Protocol):
    """Async persistence and search for memories, messages, jobs and API keys."""

    name: str

    async def open(self) -> None:
        """Connect and apply idempotent migrations."""

    async def close(self) -> None: ...

    async def health(self) -> dict[str, bool]:
        """Reachability of each backing component, e.g. ``{"postgres": True, "opensearch": False}``."""

    # -- messages ---------------------------------------------------------------------
    async def save_messages(self, messages: Sequence[Message]) -> list[tuple[Message, bool]]:
        """Store raw messages; idempotent on (tenant, user, client_message_id).

        Returns, per input, the stored message (the earlier one for a repeated client id)
        and whether it was newly created.
        """

    async def get_messages(self, owner: Owner, ids: Sequence[str]) -> list[Message]: ...

    # -- memories ---------------------------------------------------------------------
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

    async def vector_search(
        self,
        flt: SearchFilter,
        query: np.ndarray,
        query_short: np.ndarray | None,
        *,
        limit: int,
        shortlist: int,
    ) -> VectorSearchResult:
        """Cosine search over current memories.

        With ``query_short`` given: two stages, a prefix shortlist of ``shortlist``
        candidates, rescored with full vectors. Without it: one exact full-vector stage.
        """

    async def keyword_search(self, flt: SearchFilter, text: str, *, limit: int) -> list[ScoredMemory]:
        """BM25 over current memories. ``text`` is user input: treat it as plain words."""

    async def list_memories(
        self, owner: Owner, *, include_history: bool = False, limit: int = 1000, after_id: str | None = None
    ) -> list[Memory]:
        """Memories of one user ordered by id, for export and paging."""

    async def forget_user(self, owner: Owner) -> dict[str, int]:
        """Hard-delete everything of one user (messages, every version, jobs). Returns counts."""

    async def list_users(
        self, tenant_id: str, *, limit: int = 100, after_user_id: str | None = None
    ) -> list[UserSummary]:
        """The tenant's users ordered by user id, those after ``after_user_id`` (the paging cursor);
        the tenant is applied inside the backend query."""

    # -- jobs -------------------------------------------------------------------------
    async def enqueue_job(self, job: Job) -> None: ...

    async def claim_job(self, now: datetime, lease_s: float) -> Job | None:
        """Take the next due job (queued, failed and due, or running with an expired lease)."""

    async def save_job(self, job: Job) -> None: ...

    async def get_job(self, owner: Owner, job_id: str) -> Job | None: ...

    async def list_jobs(
        self, tenant_id: str, *, status: JobStatus | None = None, limit: int = 100, after_id: str | None = None
    ) -> list[Job]:
        """One tenant's jobs (every user's), optionally of one status, ordered by id, after ``after_id``.
        The tenant and status are applied inside the backend query."""

    # -- API keys ---------------------------------------------------------------------
    async def put_api_key(self, record: ApiKeyRecord) -> None: ...

    async def get_api_key(self, key_hash: str) -> ApiKeyRecord | None:
        """The stored key, or None when there is none or it was revoked."""

    async def revoke_api_key(self, key_hash: str) -> bool:
        """Record the hash as revoked for good (also for keys that are not stored: the keys of
        ``COGNIS_API_KEYS``) and remove the stored key. Returns whether a stored key was removed."""

    async def api_key_revoked(self, key_hash: str) -> bool:
        """Whether the hash was ever revoked."""
