"""Registered retrieval stages: what a stage is, what it sees, and how the registry is loaded.

Candidate generation (query analysis, speaker names, the vector and keyword searches, fusion)
is the fixed skeleton of :class:`~.pipeline.RetrievalPipeline`. Every step after fusion is a
*registered stage*: a :class:`RetrievalStage` subclass in its own module that declares its
``name`` (the ``<name>_ms`` of the logs, the ``Stage`` dimension of the metrics, the span
name), the ``phase`` it works on, when it runs (:meth:`~RetrievalStage.enabled`) and what it
does (:meth:`~RetrievalStage.apply`). :data:`~.registry.RETRIEVAL_STAGES` lists them, in the
order they run, as ``name -> loader`` (a function that imports the stage's module and returns its
class); adding a stage means its module, its loader and line there (and its switch and weights in
:class:`~.recipes.RetrievalConfig`), and its test.

Phases, in order; each one's data is made from the previous one's when the pipeline reaches it:

* ``fused``: :attr:`SearchState.fused`, the fused score per candidate, which stages adjust;
* ``final``: :attr:`SearchState.final`, starting as a copy of ``fused``;
* ``ranking``: :attr:`SearchState.ranked`, the candidates ordered by ``final`` (equal scores in the fixed order of :attr:`SearchState.ties`),
  which stages reorder or shorten (and whose ``final`` they may rewrite);
* ``hits``: :attr:`SearchState.hits`, the head of the ranking as answers.

Stages are plain async Python: no web framework and no concrete backend; what a stage needs
besides the state (the reranker, the memory store) is given to its constructor
(:class:`StageResources`).

When the search asks for ``explain``, the pipeline reads each phase's scores and order
(:meth:`SearchState.standing`) before and after every stage that runs, and records a
:class:`StageMove` for each candidate whose score or place that stage changed
(:meth:`SearchState.record_moves`): a stage needs no code of its own to be explained, and
cannot move a hit without it showing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from ..domain import Memory
from ..providers.base import Reranker
from ..stores.roles import MemoryVersions
from ..telemetry.recorder import StageRecorder
from .query_analysis import AnalysedQuery
from .recipes import RetrievalConfig
from .search_types import SearchHit, SearchQuery, StageMove

Phase = Literal["fused", "final", "ranking", "hits"]
PHASES: tuple[Phase, ...] = ("fused", "final", "ranking", "hits")


#: The scores and the order (best first) that a phase's stages work on.
Standing = tuple[dict[str, float], list[str]]


@dataclass(slots=True)
class SearchState:
    """What the stages of one search share (one per request, never shared between requests)."""

    query: SearchQuery
    #: the query's text analysed once: its intent, the speakers it names, the texts that were searched
    analysed: AnalysedQuery
    cfg: RetrievalConfig
    rec: StageRecorder
    #: Every candidate the vector and keyword searches found, by id.
    candidates: dict[str, Memory]
    #: Per candidate, the scores ``explain`` shows (a stage adds its own).
    explain: dict[str, dict[str, float]]
    #: Dependencies skipped for this answer (``bm25:<dependency>``, ``reranker``).
    degraded: list[str]
    fused: dict[str, float]
    #: Each candidate's place among equal scores (:func:`~.fusion.tie_order`).
    ties: dict[str, int] = field(default_factory=dict)
    final: dict[str, float] = field(default_factory=dict)
    ranked: list[str] = field(default_factory=list)
    hits: list[SearchHit] = field(default_factory=list)
    #: Per candidate, every stage that changed its score or its place (recorded for ``explain`` only).
    moves: dict[str, list[StageMove]] = field(default_factory=dict)

    def standing(self, phase: Phase) -> Standing:
        """A copy of the scores and the order the stages of ``phase`` work on."""
        if phase == "fused":
            return dict(self.fused), self.by_score(self.fused, self.fused)
        if phase == "final":
            return dict(self.final), self.by_score(self.final, self.final)
        if phase == "ranking":
            return dict(self.final), list(self.ranked)
        return {h.memory.id: h.score for h in self.hits}, [h.memory.id for h in self.hits]

    def record_moves(self, stage: str, before: Standing, after: Standing) -> None:
        """A :class:`StageMove` of ``stage`` for every candidate of ``before`` whose score or place differs
        in ``after``."""
        (scores_before, order_before), (scores_after, order_after) = before, after
        place = {d: i for i, d in enumerate(order_after, start=1)}
        for rank, d in enumerate(order_before, start=1):
            was, now = scores_before[d], scores_after.get(d, scores_before[d])
            new_rank = place.get(d)
            if new_rank != rank or abs(now - was) > 1e-12 * max(1.0, abs(was)):
                self.moves.setdefault(d, []).append(StageMove(stage, was, now, rank, new_rank))

    def by_score(self, ids: Iterable[str], scores: Mapping[str, float]) -> list[str]:
        """``ids`` from the highest score down, equal scores in the fixed order of :attr:`ties`."""
        return sorted(ids, key=lambda d: (-scores[d], self.ties.get(d, 0), d))


@dataclass(frozen=True, slots=True)
class StageResources:
    """The pipeline's dependencies a stage may use."""

    memories: MemoryVersions
    reranker: Reranker | None = None
    reranker_timeout_s: float = 1.5


class RetrievalStage(ABC):
    """One registered step of a search (see the module's docstring)."""

    #: The stage's name in logs, metrics and traces (``<name>_ms``); its key in the registry.
    name: ClassVar[str]
    #: What it works on; a stage runs after every stage of an earlier phase.
    phase: ClassVar[Phase]

    def __init__(self, resources: StageResources) -> None:
        self.resources = resources

    @abstractmethod
    def enabled(self, s: SearchState) -> bool:
        """Whether the stage runs for this search (a stage that does not run is not timed)."""

    @abstractmethod
    async def apply(self, s: SearchState) -> None:
        """Do the stage's work on ``s`` (timed as the stage)."""


#: A registry entry: imports the stage's module and returns its class.
StageLoader = Callable[[], type[RetrievalStage]]


def load_stages(registry: Mapping[str, StageLoader], resources: StageResources) -> tuple[RetrievalStage, ...]:
    """The stages of ``registry`` (``name -> loader``), built with ``resources``, in registry order. Raises
    ``ValueError`` for an entry whose loader does not give a :class:`RetrievalStage`, whose class names
    itself differently, or that runs before a stage of an earlier phase."""
    stages: list[RetrievalStage] = []
    for name, load in registry.items():
        cls = load()
        if not (isinstance(cls, type) and issubclass(cls, RetrievalStage)):
            raise ValueError(f"retrieval stage {name!r}: {cls!r} is not a RetrievalStage")
        if cls.name != name:
            raise ValueError(f"retrieval stage {name!r}: {cls.__qualname__} calls itself {cls.name!r}")
        if cls.phase not in PHASES:
            raise ValueError(f"retrieval stage {name!r}: unknown phase {cls.phase!r}")
        if stages and PHASES.index(cls.phase) < PHASES.index(stages[-1].phase):
            raise ValueError(
                f"retrieval stage {name!r} ({cls.phase}) cannot run after {stages[-1].name!r} ({stages[-1].phase})"
            )
        stages.append(cls(resources))
    return tuple(stages)
