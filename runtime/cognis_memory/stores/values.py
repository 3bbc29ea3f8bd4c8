"""The value types that cross the store roles (:mod:`.roles`), and the rules every backend
(embedded SQLite, dual PostgreSQL+OpenSearch, OpenSearch-only) follows in each role it supplies:

* Every method takes the :class:`~cognis_memory.domain.Owner` (tenant and user) and applies
  it *inside* the backend query, never by filtering results afterwards.
* Searches see current versions only (``is_current``), also applied inside the query.
* Returned memories carry their full embedding (the dedup stage needs it).
* A failing secondary dependency (for example OpenSearch behind the dual store) raises
  :class:`~cognis_memory.errors.DependencyUnavailableError`, so the pipeline can answer degraded.
* ``write_version`` is atomic: the new version is written and the previous one loses
  ``is_current`` together, or neither happens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from ..domain import Memory

# The filter a search passes to the stores is declared below both retrieval and the stores; it stays
# importable from here, where callers of earlier releases import it.
from ..search_filter import SearchFilter as SearchFilter


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
    """One user of a tenant, as :meth:`~.roles.MemoryVersions.list_users` sees it: a user exists while any
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


@dataclass(slots=True, frozen=True)
class PagePosition:
    """Where a time-ordered page ended: the last record's listing time and its id. The next page holds the
    records after it in (time, id) order (the id breaks ties between records of the same time)."""

    time: datetime
    id: str
