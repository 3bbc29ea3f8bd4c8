"""The ingest pipeline's last stage: facts extracted from the messages, each decided against the user's
similar stored facts.

Up to two LLM calls per batch of resolved messages of one user:

1. **extract**: the messages, numbered, become candidate facts (content, category, scope, optional
   ISO event date, and the numbers of the messages each fact was said in: its provenance).
2. **decide**: for each candidate, the :data:`SIMILAR_FACTS_SHOWN` most similar *current facts* of that
   user are retrieved and shown to the LLM under short aliases (``m1``, ``m2``, ...); the LLM answers ADD, UPDATE
   (alias), DELETE (alias) or NONE. Aliases are mapped back to real ids through a table built here,
   so an id the LLM invents (or one of another user) cannot name any memory. When no candidate has
   a similar fact (a new user's first messages), there is nothing to decide and the call is skipped:
   every fact is added.

Only facts are shown and only facts can be updated or deleted: raw messages are the evidence a fact
was drawn from, stored as said, and never rewritten by a model (a small model shown raw messages
"updated" an assistant's acknowledgement with a user's fact). Answers are read item by item
(:mod:`.answer_repair`): a bad field costs its item, never the batch. Guards a real model needed:

* a fact that is a question is not a fact (dropped, counted);
* a fact written in the first person ("I moved to Lisbon") is kept as written, with its speaker named in
  front of its search text ("Maya: I moved to Lisbon", :func:`~cognis_memory.search_text.fact_text`), like a
  raw memory, so that it is never found as the assistant's words (counted under ``repairs.first_person``);
* an UPDATE whose new fact is not about the same thing as its target (cosine below
  ``update_min_similarity``, the embedding model's: 0.40 for all-MiniLM-L6-v2) is taken as an ADD: the
  1.5B model UPDATEd "The user's dog Otis loves chasing the neighbour's cat" with "The user is thinking
  about learning to bake bread", and a wrong UPDATE retires a good fact while a wrong ADD only adds one;
* a fact decided several ways in one answer (different actions or targets) is an ADD: the model did
  not choose, and guessing which of its targets it meant could retire a good fact;
* a second UPDATE or DELETE of a memory already changed by this answer does not replace the first
  (an UPDATE becomes an ADD: both statements are kept; a DELETE is dropped);
* NONE for a fact shown with no similar fact is an ADD (nothing was there to be the same);
* the same fact text twice in one answer is kept once;
* when no decision can be read even after asking twice, the facts are added (they are the good part
  of the batch; an unusable extract answer, by contrast, leaves nothing to keep and fails the attempt).

The result is a list of :class:`Operation`, applied by the pipeline (each UPDATE/DELETE is one
atomic version write), and the :class:`~.answer_repair.AnswerReport` of the calls.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

import numpy as np

from ..domain import Category, Memory, MemoryKind, Owner, Scope
from ..encoding.batching import Priority
from ..encoding.encoder import MatryoshkaEncoder
from ..providers.base import LLM, LLMOutputError
from ..search_filter import SearchFilter
from ..search_text import fact_text, search_text
from ..stores.roles import VectorSearch
from .answer_repair import AnswerReport, FactDraft, ask, read_decisions, read_facts
from .answers import Action, Decisions, ExtractedFacts
from .categorizer import EmbeddingCategorizer
from .resolution import ResolvedMessage

#: how many of the user's most similar stored facts the decide call is shown beside each candidate
SIMILAR_FACTS_SHOWN = 10


@dataclass(slots=True)
class CandidateFact:
    content: str
    category: Category
    scope: Scope
    event_time: datetime | None
    #: the messages the fact was said in (all of the batch's when the answer did not say)
    sources: list[ResolvedMessage] = field(default_factory=list)
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
    report: AnswerReport = field(default_factory=AnswerReport)


_CATEGORIES = ", ".join(c.value for c in Category)

EXTRACT_SYSTEM = (
    "You extract durable facts about the people in a conversation, for a long-term memory. The messages are "
    "numbered. Return the facts worth remembering in later conversations: personal details, where someone lives "
    "or works, family and friends, preferences, plans, health, habits, possessions, and changes to any of these. "
    "Rules: only facts the messages state, nothing from these instructions; one fact per statement; write "
    "each fact as one short sentence in the third person that starts with the person's name (or 'The user' when "
    "the speaker has no name) and says what the fact is about and its value, never 'I' or 'my'; use absolute "
    "dates (dates in brackets already resolve relative expressions); skip greetings, small "
    "talk (the weather, passing remarks), what the user asks for or about, and the assistant's own remarks; a "
    "statement about someone else is about that person, not the user. sources: the numbers of the messages the "
    "fact was said in. scope: USER (the default) for anything about a person, CONTEXT only for something that "
    "matters within this conversation alone. category: one of "
    f"{_CATEGORIES}. event_date: the ISO date (YYYY-MM-DD) of the event the fact is about when the "
    "conversation gives it, else null. If nothing is worth remembering, return an empty list of facts."
)
DECIDE_SYSTEM = (
    "You keep a long-term memory of facts consistent. Each new fact (fact 0, fact 1, ...) is listed with the "
    "stored facts most similar to it, each under an id such as m3. For each new fact choose one action: "
    "ADD when it is new information; UPDATE when it changes or corrects a listed fact about the same thing "
    "(the same attribute of the same person, e.g. a new home replaces the old one): target is that fact's id "
    "and content the fact as it is true now; DELETE when it says a listed fact is no longer true and gives "
    "nothing in its place: target is that fact's id; NONE when a listed fact already says the same. Use only "
    "ids that are listed. target is null for ADD and NONE; content and category are null unless you UPDATE. "
    "Give one decision per new fact."
)


def numbered_transcript(messages: list[ResolvedMessage]) -> tuple[str, list[ResolvedMessage]]:
    """The extract prompt: one line per message with text, ``[n] <time> <speaker>: <text>``, and the
    messages in that numbering."""
    shown = [r for r in messages if r.annotated_text.strip()]
    lines = [f"[{n}] {r.message_time:%Y-%m-%d %H:%M} {r.display_text}" for n, r in enumerate(shown, start=1)]
    return "\n".join(lines), shown


class FactExtractor:
    """Runs the extract and decide calls; pure apart from the LLM and a read-only store query."""

    def __init__(
        self,
        llm: LLM,
        vectors: VectorSearch,
        encoder: MatryoshkaEncoder,
        categorizer: EmbeddingCategorizer,
        similar_facts: int = SIMILAR_FACTS_SHOWN,
        update_min_similarity: float = 0.0,
    ):
        self.llm, self.vectors, self.encoder, self.categorizer = llm, vectors, encoder, categorizer
        self.similar_facts = similar_facts
        #: an UPDATE whose new fact is less similar than this to its target is taken as an ADD
        self.update_min_similarity = update_min_similarity

    async def extract(
        self, owner: Owner, messages: list[ResolvedMessage], *, priority: Priority = Priority.INGEST
    ) -> ExtractionResult:
        """Candidate facts and the decision on each; ``priority`` is the embedding queue's (a request
        waiting, or a background job)."""
        result = ExtractionResult()
        facts = await self._extract_facts(messages, result.report, priority)
        result.candidates = len(facts)
        if not facts:
            return result
        # The most similar current facts of this user, per candidate, under aliases (what the decide call sees).
        alias_of: dict[str, Memory] = {}
        by_id: dict[str, str] = {}
        shown: list[list[str]] = []
        for f in facts:
            assert f.embedding is not None  # embedded by _extract_facts
            hits = await self.vectors.vector_search(
                SearchFilter(owner, kinds=frozenset({MemoryKind.FACT})),
                f.embedding,
                None,
                limit=self.similar_facts,
                shortlist=self.similar_facts,
            )
            listed = []
            for h in hits.hits:
                alias = by_id.get(h.memory.id)
                if alias is None:
                    alias = f"m{len(alias_of) + 1}"
                    alias_of[alias] = h.memory
                    by_id[h.memory.id] = alias
                listed.append(alias)
            shown.append(listed)
        if not alias_of:  # nothing stored to compare with: every fact is new
            result.operations = [Operation(Action.ADD, f) for f in facts]
            return result
        # facts are shown by their search text: a first-person fact with its speaker in front, so whose it is
        # stays visible (the stored content is the fact as written)
        said = {a: search_text(m) for a, m in alias_of.items()}
        prompt = "\n".join(
            f"fact {i}: {_search_text(f)}\n"
            + ("\n".join(f"  - {a}: {said[a]}" for a in listed) or "  (no similar stored facts)")
            for i, (f, listed) in enumerate(zip(facts, shown, strict=True))
        )
        read = partial(read_decisions, facts=len(facts), aliases=said)
        try:
            decisions = await ask(
                self.llm,
                system=DECIDE_SYSTEM,
                prompt=prompt,
                response_model=Decisions,
                schema_name="memory_decisions",
                read=read,
                report=result.report,
            )
        except LLMOutputError:  # no usable decision even when asked twice: the facts are still good
            result.report.dropped["decisions_unusable"] += 1
            decisions = []
        decided: set[int] = set()
        changed: set[str] = set()  # aliases an earlier decision of this answer already updated or deleted
        rewritten: list[tuple[int, CandidateFact]] = []  # (operation, the fact it merged): new vectors needed
        overruled = result.report.overruled
        choices: dict[int, set[tuple[Action, str | None]]] = {}
        for d in decisions:
            choices.setdefault(d.fact, set()).add((d.action, d.target))
        for d in decisions:
            if d.fact in decided:
                continue
            decided.add(d.fact)
            fact, action = facts[d.fact], d.action
            if len(choices[d.fact]) > 1:
                # the model decided the fact several ways (a 1.5B model UPDATEd every listed memory with the
                # new home): it did not choose, so nothing it named is touched and the fact is kept
                overruled["conflicting_decisions"] += 1
                action = Action.ADD
            if action is Action.NONE and not shown[d.fact]:
                overruled["none_without_similar_fact"] += 1
                action = Action.ADD
            if (
                action in (Action.UPDATE, Action.DELETE)
                and fact.scope is Scope.CONTEXT
                and alias_of[d.target or ""].scope is Scope.USER
            ):
                # what one session alone was told must not change what every session sees
                overruled["context_fact_on_user_memory"] += 1
                if action is Action.DELETE:
                    continue
                action = Action.ADD
            if action is Action.UPDATE and not self._same_thing(fact, alias_of[d.target or ""]):
                overruled["update_not_similar"] += 1  # a wrong UPDATE would retire a good fact: keep both
                action = Action.ADD
            if action in (Action.UPDATE, Action.DELETE):
                assert d.target is not None  # read_decisions turns the others into ADDs or drops them
                if d.target in changed:
                    overruled["target_already_changed"] += 1
                    if action is Action.DELETE:
                        continue
                    action = Action.ADD
                else:
                    changed.add(d.target)
            if action is Action.UPDATE:
                assert d.target is not None
                if d.content and _same_text(d.content, said[d.target]):
                    # the "merged" text repeats the memory being replaced: the new fact is what is true now
                    overruled["update_content_is_the_target"] += 1
                elif d.content and d.content not in (fact.content, _search_text(fact)):
                    rewritten.append((len(result.operations), fact))
                    fact = CandidateFact(
                        content=d.content,
                        category=d.category or fact.category,
                        scope=fact.scope,
                        event_time=fact.event_time,
                        sources=fact.sources,
                    )
                result.operations.append(Operation(action, fact, alias_of[d.target]))
            elif action is Action.DELETE:
                assert d.target is not None
                result.operations.append(Operation(action, fact, alias_of[d.target]))
            else:  # ADD, or NONE (kept so that it is counted)
                result.operations.append(Operation(action, fact))
        if rewritten:
            merged = [result.operations[k].fact for k, _ in rewritten]
            # the guard compares what the merged text says (its content's vector); the fact is stored with the
            # vectors of its search text, which differ only for a first-person text (its speaker in front)
            as_said, as_said_short = await self.encoder.encode_async([f.content for f in merged], priority)
            full, short = as_said.copy(), as_said_short.copy()
            await self._embed_search_texts(merged, full, short, priority)
            for (k, original), f, e, s, c in zip(rewritten, merged, full, short, as_said, strict=True):
                f.embedding, f.embedding_short = e, s
                if original.embedding is not None and float(original.embedding @ c) < self.update_min_similarity:
                    # the merged text no longer says what the fact says (a small model copied another
                    # listed memory): storing it would make a wrong value current; the fact's own text is kept
                    overruled["update_content_not_the_fact"] += 1
                    op = result.operations[k]
                    result.operations[k] = Operation(op.action, original, op.target)
        for i, f in enumerate(facts):  # candidates the LLM forgot are added rather than lost
            if i not in decided:
                result.operations.append(Operation(Action.ADD, f))
        # targets that named no listed memory (invented, foreign, or unreadable ids): nothing was touched
        result.rejected_aliases = (
            result.report.repairs["update_without_target_added"] + result.report.dropped["delete_without_target"]
        )
        return result

    async def _extract_facts(
        self, messages: list[ResolvedMessage], report: AnswerReport, priority: Priority
    ) -> list[CandidateFact]:
        transcript, numbered = numbered_transcript(messages)
        if not numbered:
            return []
        drafts = await ask(
            self.llm,
            system=EXTRACT_SYSTEM,
            prompt=transcript,
            response_model=ExtractedFacts,
            schema_name="extracted_facts",
            read=partial(read_facts, messages=len(numbered)),
            report=report,
        )
        seen: set[str] = set()
        kept: list[FactDraft] = []
        for d in drafts:
            key = " ".join(d.content.lower().split())
            if key in seen:
                report.dropped["duplicate_fact"] += 1
                continue
            seen.add(key)
            kept.append(d)
        if not kept:
            return []
        texts = [d.content for d in kept] + [r.display_text for r in numbered]
        vectors, shorts = await self.encoder.encode_async(texts, priority)
        full, short, said = vectors[: len(kept)], shorts[: len(kept)], vectors[len(kept) :]
        facts: list[CandidateFact] = []
        keep: list[int] = []
        for i, d in enumerate(kept):
            cited = _cited(d.sources, full[i] @ said.T, report)
            sources = [numbered[j] for j in cited]
            if all(r.message.content.rstrip().endswith("?") for r in sources):
                report.dropped["fact_from_a_question"] += 1  # a question asks; it states nothing
                continue
            category = d.category or Category.PERSONAL_DETAILS  # the categorizer's below when missing
            scope = d.scope
            if scope is Scope.USER and all(r.message.scope is Scope.CONTEXT for r in sources):
                # the caller sent these messages for their session only: a fact drawn from them alone stays
                # there (a 1.5B model gave "Ines is packing a carry-on bag for this trip" USER scope)
                report.overruled["scope_of_context_messages"] += 1
                scope = Scope.CONTEXT
            facts.append(CandidateFact(d.content, category, scope, d.event_time, sources))
            keep.append(i)
        if not facts:
            return []
        full, short = full[keep].copy(), short[keep].copy()
        renamed = await self._embed_search_texts(facts, full, short, priority)
        if renamed:
            report.repairs["first_person"] += renamed
        missing = [k for k, i in enumerate(keep) if kept[i].category is None]
        if missing:  # the answer gave no readable category: the non-LLM categorizer's choice
            picked = await self.categorizer.categorize_many([facts[k].content for k in missing], full[missing])
            for k, category in zip(missing, picked, strict=True):
                facts[k].category = category
        for f, e, sh in zip(facts, full, short, strict=True):
            f.embedding, f.embedding_short = e, sh
        return facts

    async def _embed_search_texts(
        self, facts: list[CandidateFact], full: np.ndarray, short: np.ndarray, priority: Priority
    ) -> int:
        """``full`` and ``short`` hold the vectors of the facts' contents, row by row; a fact whose search text
        differs from its content (a first-person fact has its speaker in front) gets its row replaced by the
        vectors of that text, which is what the fact is stored and searched with. Returns how many rows."""
        texts = [_search_text(f) for f in facts]
        renamed = [k for k, (f, text) in enumerate(zip(facts, texts, strict=True)) if text != f.content]
        if renamed:
            full[renamed], short[renamed] = await self.encoder.encode_async([texts[k] for k in renamed], priority)
        return len(renamed)

    def _same_thing(self, fact: CandidateFact, target: Memory) -> bool:
        """Whether an UPDATE of ``target`` by ``fact`` passes the guard (see :attr:`update_min_similarity`)."""
        if fact.embedding is None or target.embedding is None:
            return True
        return float(fact.embedding @ target.embedding) >= self.update_min_similarity


def _search_text(fact: CandidateFact) -> str:
    """The text a candidate fact is embedded by: its search text as the fact will be stored, with the speaker
    of the first message it was said in (:meth:`~.pipeline.IngestPipeline.apply` gives it that speaker)."""
    return fact_text(fact.content, fact.sources[0].speaker if fact.sources else None)


#: How much better (cosine) another message must match a fact than the ones it cites to be taken as its
#: source instead: small models often cite the number of the line after the statement (the assistant's reply).
SOURCE_MARGIN = 0.1


def _cited(numbers: list[int], similarity: np.ndarray, report: AnswerReport) -> list[int]:
    """The messages a fact came from: the ones its answer cites, unless another message of the batch
    matches the fact clearly better (by ``SOURCE_MARGIN``), which is then taken instead (a repair); with
    no citation, the best match."""
    best = int(similarity.argmax())
    if not numbers:
        return [best]
    if best not in numbers and similarity[best] - max(similarity[n] for n in numbers) > SOURCE_MARGIN:
        report.repairs["source_corrected"] += 1
        return [best]
    return numbers


def _same_text(a: str, b: str) -> bool:
    """Whether two texts are the same once case, spacing and a final full stop are ignored."""
    return " ".join(a.lower().rstrip(". ").split()) == " ".join(b.lower().rstrip(". ").split())


class _ContextAwareExtractor(FactExtractor):
    """The old name of :class:`FactExtractor`, which also took the count of similar facts as ``context_size``."""

    def __init__(self, *args: Any, context_size: int | None = None, **kwargs: Any):
        if context_size is not None:
            kwargs.setdefault("similar_facts", context_size)
        super().__init__(*args, **kwargs)


#: Names this module had before the rename to what they hold; each still works, with a warning, for one release.
_DEPRECATED_NAMES: dict[str, tuple[str, Any]] = {
    "ContextAwareExtractor": ("FactExtractor", _ContextAwareExtractor),
    "CONTEXT_SIZE": ("SIMILAR_FACTS_SHOWN", SIMILAR_FACTS_SHOWN),
}


def __getattr__(name: str) -> Any:
    if name in _DEPRECATED_NAMES:
        new_name, value = _DEPRECATED_NAMES[name]
        warnings.warn(f"{__name__}.{name} is deprecated; use {new_name}", DeprecationWarning, stacklevel=2)
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
