"""Stage 3: context-aware extraction.

Two LLM calls per batch of resolved messages of one user:

1. **extract**: candidate facts (content, category, scope, optional ISO event date).
2. **decide**: for each candidate, the 10 most similar *current* memories of that user are
   retrieved and shown to the LLM under short aliases (``m1``, ``m2``, ...); the LLM answers
   ADD, UPDATE (alias), DELETE (alias) or NONE. Aliases are mapped back to real ids through
   a table built here, so an id the LLM invents (or one of another user) cannot name any
   memory: such a decision is dropped and counted.

The answers of both calls are the pydantic models of :mod:`.answers` (the providers send the
schema derived from them and validate the answer with them). The result is a list of
:class:`Operation`, applied by the pipeline (each UPDATE/DELETE is one atomic version write in
the store).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from ..domain import Category, Memory, Owner, Scope, as_utc
from ..encoding.batching import Priority
from ..encoding.encoder import MatryoshkaEncoder
from ..providers.base import LLM
from ..stores.base import SearchFilter
from ..stores.roles import VectorSearch
from .answers import Action, Decisions, ExtractedFacts
from .resolution import ResolvedMessage

CONTEXT_SIZE = 10


@dataclass(slots=True)
class CandidateFact:
    content: str
    category: Category
    scope: Scope
    event_time: datetime | None
    embedding: np.ndarray | None = None
    embedding_short: np.ndarray | None = None


@dataclass(slots=True)
class Operation:
    action: Action
    fact: CandidateFact
    target: Memory | None = None  # for UPDATE / DELETE


@dataclass(slots=True)
class ExtractionResult:
    operations: list[Operation] = field(default_factory=list)
    rejected_aliases: int = 0
    candidates: int = 0


EXTRACT_SYSTEM = (
    "You extract durable facts about the user from a conversation, for a long-term memory. "
    "Write each fact as one self-contained sentence naming the person (not 'I'), with absolute dates "
    "(dates in brackets after relative expressions are already resolved). Skip greetings and small talk. "
    "Use scope CONTEXT only for facts that matter just within this session. Pick the best category."
)
DECIDE_SYSTEM = (
    "You maintain a long-term memory. For each new fact, compare it with the existing memories listed under it "
    "and decide: ADD (new information), UPDATE (it changes or refines an existing memory: give its alias as "
    "target and the merged content), DELETE (it says an existing memory is no longer true: give its alias), or "
    "NONE (already known). Only use aliases that are listed."
)


def _parse_date(value: str | None) -> datetime | None:
    if value is None or not value.strip():
        return None
    try:
        return as_utc(datetime.fromisoformat(value.strip().replace("Z", "+00:00")))
    except ValueError:
        return None


class ContextAwareExtractor:
    """Runs the extract and decide calls; pure apart from the LLM and a read-only store query."""

    def __init__(self, llm: LLM, vectors: VectorSearch, encoder: MatryoshkaEncoder, context_size: int = CONTEXT_SIZE):
        self.llm, self.vectors, self.encoder, self.context_size = llm, vectors, encoder, context_size

    async def extract(
        self, owner: Owner, messages: list[ResolvedMessage], *, priority: Priority = Priority.INGEST
    ) -> ExtractionResult:
        """Candidate facts and the decision on each; ``priority`` is the embedding queue's (a request
        waiting, or a background job)."""
        facts = await self._extract_facts(messages)
        result = ExtractionResult(candidates=len(facts))
        if not facts:
            return result
        full, short = await self.encoder.encode_async([f.content for f in facts], priority)
        for f, e, s in zip(facts, full, short, strict=True):
            f.embedding, f.embedding_short = e, s
        # Context: the most similar current memories of this user, per candidate, under aliases.
        alias_of: dict[str, Memory] = {}
        by_id: dict[str, str] = {}
        context_lines: list[str] = []
        for i, f in enumerate(facts):
            assert f.embedding is not None  # embedded by the stage before
            hits = await self.vectors.vector_search(
                SearchFilter(owner), f.embedding, None, limit=self.context_size, shortlist=self.context_size
            )
            lines = []
            for h in hits.hits:
                alias = by_id.get(h.memory.id)
                if alias is None:
                    alias = f"m{len(alias_of) + 1}"
                    alias_of[alias] = h.memory
                    by_id[h.memory.id] = alias
                lines.append(f"  - {alias}: {h.memory.content}")
            context_lines.append(
                f"fact {i}: {f.content}\n" + ("\n".join(lines) if lines else "  (no similar memories)")
            )
        answer = await self.llm.generate_structured(
            system=DECIDE_SYSTEM,
            prompt="\n".join(context_lines),
            response_model=Decisions,
            schema_name="memory_decisions",
        )
        decided: set[int] = set()
        rewritten: list[CandidateFact] = []  # UPDATEs whose merged content needs its own vectors
        for d in answer.decisions:
            idx = d.fact
            if not 0 <= idx < len(facts) or idx in decided:
                continue
            decided.add(idx)
            fact = facts[idx]
            action = d.action
            if action in (Action.UPDATE, Action.DELETE):
                target = alias_of.get(d.target or "")
                if target is None:  # invented or foreign id: never touch anything
                    result.rejected_aliases += 1
                    continue
                if action is Action.UPDATE:
                    content = d.content or fact.content
                    if content != fact.content:
                        fact = CandidateFact(
                            content=content,
                            category=d.category or fact.category,
                            scope=fact.scope,
                            event_time=fact.event_time,
                        )
                        rewritten.append(fact)
                result.operations.append(Operation(action, fact, target))
            else:  # ADD, or NONE (kept so that it is counted)
                result.operations.append(Operation(action, fact))
        if rewritten:
            full, short = await self.encoder.encode_async([f.content for f in rewritten], priority)
            for f, e, s in zip(rewritten, full, short, strict=True):
                f.embedding, f.embedding_short = e, s
        for i, f in enumerate(facts):  # candidates the LLM forgot are added rather than lost
            if i not in decided:
                result.operations.append(Operation(Action.ADD, f))
        return result

    async def _extract_facts(self, messages: list[ResolvedMessage]) -> list[CandidateFact]:
        transcript = "\n".join(
            f"[{r.message_time.isoformat()}] {r.display_text}" for r in messages if r.annotated_text.strip()
        )
        answer = await self.llm.generate_structured(
            system=EXTRACT_SYSTEM, prompt=transcript, response_model=ExtractedFacts, schema_name="extracted_facts"
        )
        return [
            CandidateFact(content=f.content, category=f.category, scope=f.scope, event_time=_parse_date(f.event_date))
            for f in answer.facts
        ]
