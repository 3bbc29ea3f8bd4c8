"""What a search asks and what it answers: :class:`SearchQuery`, :class:`SearchHit`, :class:`SearchResponse`.

Value types of the retrieval pipeline (:mod:`.pipeline`), in a module of their own so that the stages
(:mod:`.stages`), which read and write them, do not import the pipeline that runs them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..domain import Memory, Owner
from ..search_filter import SearchFilter
from .query_analysis import QueryAnalysis

if TYPE_CHECKING:
    from .stages import StageMove


@dataclass(slots=True)
class SearchQuery:
    """A search: its text, what it may see (``filter``, the owner included) and how to answer."""

    filter: SearchFilter
    text: str
    limit: int = 10
    include_history: bool = False
    explain: bool = False
    now: datetime | None = None

    @property
    def owner(self) -> Owner:
        return self.filter.owner


@dataclass(slots=True)
class SearchHit:
    """One answer: the memory, its final score, and with ``explain`` the evidence behind its place:
    ``scores`` (each source's score and rank, and what each stage added) and ``moves`` (every stage that
    changed its score or its place, in the order they ran: :class:`~.stages.StageMove`)."""

    memory: Memory
    score: float
    scores: dict[str, float] = field(default_factory=dict)
    history: list[Memory] = field(default_factory=list)
    moves: list[StageMove] = field(default_factory=list)


@dataclass(slots=True)
class SearchResponse:
    hits: list[SearchHit]
    analysis: QueryAnalysis
    degraded: list[str] = field(default_factory=list)
    explain: dict[str, Any] | None = None
