"""The ingest pipeline's last stage: facts drawn from the messages, and what they replace.

Every question an LLM gets here is a narrow one that a small model answers well; code does the rest:

1. **extract** (:mod:`.fact_extraction`): one question per message a person wrote: the facts it
   states, each as subject, attribute and value. Code writes the fact's text and sets its category,
   scope, dates and source.
2. **candidates** (:mod:`.candidates`): for each new fact, code chooses the stored facts it may
   replace: current facts of the same person about the same thing (the same attribute, or similar
   text), said earlier; a fact that already says the same makes the new one a duplicate (NONE).
3. **change check** (:mod:`.change_check`): one yes/no question per candidate pair, "is the older
   fact no longer true?", all pairs of the batch asked at once (up to ``concurrency``).
4. **operations**: "yes" makes an UPDATE of the most similar such fact with the new fact's own text
   (and retires any other "yes" candidate with it); no "yes" makes an ADD. A stored fact two new facts
   of one batch would replace is replaced by the first; the second is added.

The result is a list of :class:`Operation`, applied by the pipeline (each UPDATE is one atomic
version write), and the :class:`~.answer_repair.AnswerReport` of the calls.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from ..domain import Memory, MemoryKind, Owner, Scope
from ..encoding.batching import Priority
from ..encoding.encoder import MatryoshkaEncoder
from ..providers.base import LLM
from ..stores.roles import VectorSearch
from ..stores.values import ScoredMemory, SearchFilter
from .answer_repair import AnswerReport
from .answers import Action
from .candidates import Candidate, NewFact, choose, said_at
from .categorizer import EmbeddingCategorizer
from .change_check import ChangeCheck, StatedFact
from .fact_extraction import CandidateFact, FactExtractor
from .resolution import ResolvedMessage

#: Stored facts retrieved per new fact, among which code chooses the candidates.
CONTEXT_SIZE = 10

__all__ = ["CandidateFact", "ContextAwareExtractor", "ExtractionResult", "Operation"]


@dataclass(slots=True)
class Operation:
    action: Action
    fact: CandidateFact
    target: Memory | None = None  # for UPDATE / DELETE
    #: further stored facts the same new fact makes no longer true (retired with the UPDATE)
    retires: list[Memory] = field(default_factory=list)


@dataclass(slots=True)
class ExtractionResult:
    operations: list[Operation] = field(default_factory=list)
    #: facts drawn from the messages (before duplicates are told apart)
    facts: int = 0
    #: change checks asked, and how many said "no longer true"
    checks: int = 0
    changes: int = 0
    report: AnswerReport = field(default_factory=AnswerReport)


class ContextAwareExtractor:
    """Runs the extract questions and the change checks; pure apart from the LLM and read-only store queries."""

    def __init__(
        self,
        llm: LLM,
        vectors: VectorSearch,
        encoder: MatryoshkaEncoder,
        categorizer: EmbeddingCategorizer,
        context_size: int = CONTEXT_SIZE,
        update_min_similarity: float = 0.0,
        concurrency: int = 4,
    ):
        self.vectors = vectors
        self.facts = FactExtractor(llm, vectors, encoder, categorizer, concurrency=concurrency)
        self.check = ChangeCheck(llm)
        self.context_size = context_size
        #: a stored fact about another attribute is a candidate only at this cosine or above
        self.update_min_similarity = update_min_similarity
        self.concurrency = max(1, concurrency)

    async def extract(
        self, owner: Owner, messages: list[ResolvedMessage], *, priority: Priority = Priority.INGEST
    ) -> ExtractionResult:
        """The facts of ``messages`` and what to do with each; ``priority`` is the embedding queue's (a
        request waiting, or a background job)."""
        result = ExtractionResult()
        facts = await self.facts.extract(owner, messages, result.report, priority)
        result.facts = len(facts)
        if not facts:
            return result
        choices = [choose(_new(f), await self._similar(owner, f), min_similarity=self.update_min_similarity)
                   for f in facts]  # fmt: skip
        pairs = [(i, c) for i, choice in enumerate(choices) for c in self._allowed(facts[i], choice.candidates, result)]
        gate = asyncio.Semaphore(self.concurrency)

        async def ask(i: int, c: Candidate) -> bool:
            async with gate:
                return await self.check.no_longer_true(
                    StatedFact(c.memory.content, said_at(c.memory)), StatedFact(facts[i].content, facts[i].said),
                    result.report,
                )  # fmt: skip

        verdicts = await asyncio.gather(*(ask(i, c) for i, c in pairs))
        result.checks, result.changes = len(pairs), sum(verdicts)
        replaced: set[str] = set()
        for i, (fact, choice) in enumerate(zip(facts, choices, strict=True)):
            if choice.duplicate is not None:
                result.operations.append(Operation(Action.NONE, fact, choice.duplicate))
                continue
            said_yes = [c.memory for (j, c), yes in zip(pairs, verdicts, strict=True) if j == i and yes]
            free = [m for m in said_yes if m.id not in replaced]
            if len(free) < len(said_yes):
                result.report.overruled["target_already_replaced"] += len(said_yes) - len(free)
            if not free:
                result.operations.append(Operation(Action.ADD, fact))
                continue
            replaced.update(m.id for m in free)
            result.operations.append(Operation(Action.UPDATE, fact, free[0], retires=free[1:]))
        return result

    async def _similar(self, owner: Owner, fact: CandidateFact) -> list[ScoredMemory]:
        assert fact.embedding is not None  # embedded by the fact extractor
        hits = await self.vectors.vector_search(
            SearchFilter(owner, kinds=frozenset({MemoryKind.FACT})), fact.embedding, None,
            limit=self.context_size, shortlist=self.context_size,
        )  # fmt: skip
        return hits.hits

    @staticmethod
    def _allowed(fact: CandidateFact, candidates: list[Candidate], result: ExtractionResult) -> list[Candidate]:
        """The candidates a fact of its scope may replace: what one session alone was told changes only that
        session's facts, never what every session sees (a USER fact may replace a CONTEXT one)."""
        if fact.scope is not Scope.CONTEXT:
            return candidates
        session = fact.sources[0].message.session_id if fact.sources else None
        kept = [c for c in candidates if c.memory.scope is Scope.CONTEXT and c.memory.session_id == session]
        if len(kept) < len(candidates):
            result.report.overruled["context_fact_on_wider_memory"] += len(candidates) - len(kept)
        return kept


def _new(fact: CandidateFact) -> NewFact:
    return NewFact(fact.subject, fact.attribute, fact.value, fact.speaker, fact.said)
