"""What a search asks and what it answers: :class:`SearchQuery`, :class:`SearchHit` (with the
:class:`StageMove` of every stage that moved it), :class:`SearchResponse`.

Value types of the retrieval pipeline (:mod:`.pipeline`), in a module of their own so that the stages
(:mod:`.stages`), which read and write them, do not import the pipeline that runs them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..domain import Memory, Owner
from ..search_filter import SearchFilter
from .query_analysis import QueryAnalysis


@dataclass(frozen=True, slots=True)
class StageMove:
    """What one stage did to one candidate: its score and its place (1 = first) in the phase's ranking,
    before and after the stage. ``rank_after`` is None when the stage removed the candidate."""

    stage: str
    score_before: float
    score_after: float
    rank_before: int
    rank_after: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage, "score_before": self.score_before, "score_after": self.score_after,
            "rank_before": self.rank_before, "rank_after": self.rank_after,
        }  # fmt: skip


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
    changed its score or its place, in the order they ran: :class:`StageMove`)."""

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
