"""The extract question: the facts one message states, each as subject, attribute and value.

One question per message a person wrote (role ``user``), asked several at once: the message alone
(shown the messages before it, a 1.5B model took facts from them as the message's), and the
attributes the user's most similar stored facts already use, so that the model names the same thing
the same way ("home city" again, not "city of residence").
The model answers with a list of ``{subject, attribute, value}``; everything else is code's:

* which messages are asked about: a person's (an assistant's, a system's or a tool's words are
  context, never a fact about the user), with text, not only questions ("Any tips for sleeping
  better?" states nothing); a message longer than ``chunk_chars`` is asked about in pieces;
* which facts are kept: a value that says nothing ("not specified") or none of whose words were said
  ("musician" from "I went to a great concert") is dropped;
* the subject as stored (:func:`~cognis_memory.fact_identity.normal_subject`: "speaker", "I" or
  "the user" is the message's speaker) and the fact's text, written from the three parts
  ("Maya's home city: Lisbon"), so a fact never reads in the first person or as a copy;
* its sources (the message asked about), category (the non-LLM categorizer, on the fact's text),
  scope (CONTEXT when the message was sent for its session only), event time (the message's
  resolved date) and the time it was said (the message's).
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from ..domain import Category, MemoryKind, Owner, Scope
from ..encoding.batching import Priority
from ..encoding.encoder import MatryoshkaEncoder
from ..fact_identity import fact_text, grounded, normal_attribute, normal_subject, says_nothing
from ..providers.base import LLM, LLMOutputError
from ..stores.roles import VectorSearch
from ..stores.values import SearchFilter
from .answer_repair import AnswerReport, FactDraft, ask, read_facts
from .answers import ExtractedFacts
from .categorizer import EmbeddingCategorizer
from .parts import split_text
from .resolution import ResolvedMessage

EXTRACT_SYSTEM = (
    "You extract facts from a chat message for a long-term memory about people.\n"
    "A fact is something that stays true about a person for months: where they live, where they work, their "
    "family and pets, their diet, health, routines and hobbies, what they own, and their plans. Most messages "
    "state no such fact: small talk, passing moods, one-off events, opinions, questions and requests are not "
    "facts.\n"
    "For each fact give:\n"
    '- subject: "speaker" if the fact is about the writer of the message, else the other person\'s name\n'
    "- attribute: a short lower-case name for what the fact is about; use a known attribute if one fits\n"
    '- value: the value in a few words from the message; keep "not" or "no longer" if the message says so\n'
    'For example, the message "My brother Leo just started at a bakery, and I don\'t eat meat any more." gives '
    '{"facts": [{"subject": "Leo", "attribute": "employer", "value": "a bakery"}, {"subject": "speaker", '
    '"attribute": "diet", "value": "no longer eats meat"}]}.\n'
    'Answer {"facts": []} when the message states no such fact.'
)

#: Known attributes shown with a question.
KNOWN_ATTRIBUTES = 8
#: A message longer than this (characters) is asked about in pieces of at most this size.
CHUNK_CHARS = 1500

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(slots=True)
class CandidateFact:
    """A fact drawn from a message, ready to be decided and stored."""

    subject: str
    attribute: str
    value: str
    content: str
    category: Category
    scope: Scope
    event_time: datetime | None
    #: when it was said (its message's time)
    said: datetime | None
    speaker: str
    #: the message it was said in (a long message's parts share it)
    sources: list[ResolvedMessage] = field(default_factory=list)
    embedding: np.ndarray | None = None
    embedding_short: np.ndarray | None = None


def asks_about(r: ResolvedMessage) -> bool:
    """Whether a message is asked about: a person's, with text, not made of questions only."""
    text = r.message.content.strip()
    if r.message.role != "user" or not text:
        return False
    return not all(s.rstrip("\"')]").endswith("?") for s in _SENTENCE_END.split(text) if s.strip())


def said_on(moment: datetime) -> str:
    return f"{moment.day} {moment:%B %Y}"


def extract_prompt(message: ResolvedMessage, text: str, known: list[str]) -> str:
    """The question about one message (or one piece of a long one)."""
    lines = [f"Known attributes: {', '.join(known) if known else 'none yet'}"]
    who = "the user" if message.speaker in ("", "user") else message.speaker
    lines.append(f"Message from {who} ({said_on(message.message_time)}):")
    lines.append(text)
    return "\n".join(lines)


class FactExtractor:
    """Asks the extract question of each message (see the module docstring); pure but for the LLM and a
    read-only query of the user's facts."""

    def __init__(
        self,
        llm: LLM,
        vectors: VectorSearch,
        encoder: MatryoshkaEncoder,
        categorizer: EmbeddingCategorizer,
        *,
        concurrency: int = 4,
        chunk_chars: int = CHUNK_CHARS,
    ) -> None:
        self.llm, self.vectors, self.encoder, self.categorizer = llm, vectors, encoder, categorizer
        self.concurrency = max(1, concurrency)
        self.chunk_chars = chunk_chars

    async def extract(
        self, owner: Owner, messages: list[ResolvedMessage], report: AnswerReport, priority: Priority
    ) -> list[CandidateFact]:
        """The facts the messages state, one question per message (and per piece of a long one)."""
        asked = [i for i, r in enumerate(messages) if asks_about(r)]
        if not asked:
            return []
        known = await self._known_attributes(owner, [messages[i] for i in asked], priority)
        gate = asyncio.Semaphore(self.concurrency)

        async def one(i: int, text: str, known_here: list[str]) -> tuple[int, list[FactDraft]]:
            prompt = extract_prompt(messages[i], text, known_here)
            async with gate:
                drafts = await ask(
                    self.llm,
                    system=EXTRACT_SYSTEM,
                    prompt=prompt,
                    response_model=ExtractedFacts,
                    schema_name="extracted_facts",
                    read=read_facts,
                    report=report,
                )
            return i, drafts

        questions = [
            one(i, piece, known_here)
            for i, known_here in zip(asked, known, strict=True)
            for piece in split_text(messages[i].annotated_text, self.chunk_chars)
        ]
        answers = await asyncio.gather(*questions, return_exceptions=True)
        failed = [a for a in answers if isinstance(a, BaseException)]
        if failed and len(failed) == len(answers):  # nothing to keep: the attempt fails (and is retried)
            raise failed[0]
        for a in failed:
            if not isinstance(a, LLMOutputError):  # an unreachable model fails the batch; one bad answer does not
                raise a
        facts: list[CandidateFact] = []
        seen: set[tuple[str, str, str]] = set()
        for answer in answers:
            if isinstance(answer, BaseException):
                report.dropped["message_unusable"] += 1
                continue
            i, drafts = answer
            for d in drafts:
                if says_nothing(d.value):
                    report.dropped["value_says_nothing"] += 1
                    continue
                if not grounded(d.value, messages[i].annotated_text):
                    report.dropped["value_not_in_message"] += 1
                    continue
                fact = self._fact(messages[i], d)
                key = (fact.subject.lower(), normal_attribute(fact.attribute), " ".join(fact.value.lower().split()))
                if key in seen:
                    report.dropped["duplicate_fact"] += 1
                    continue
                seen.add(key)
                facts.append(fact)
        if facts:
            await self._embed(facts, priority)
        return facts

    def _fact(self, message: ResolvedMessage, draft: FactDraft) -> CandidateFact:
        speaker = message.speaker or message.message.role
        subject = normal_subject(draft.subject, speaker)
        attribute = " ".join(draft.attribute.lower().split())
        return CandidateFact(
            subject=subject,
            attribute=attribute,
            value=draft.value,
            content=fact_text(subject, attribute, draft.value),
            category=Category.PERSONAL_DETAILS,  # the categorizer's, once embedded
            scope=message.message.scope,
            event_time=message.event_time,
            said=message.message_time,
            speaker=speaker,
            sources=[message],
        )

    async def _embed(self, facts: list[CandidateFact], priority: Priority) -> None:
        full, short = await self.encoder.encode_async([f.content for f in facts], priority)
        categories = await self.categorizer.categorize_many([f.content for f in facts], full)
        for f, e, s, c in zip(facts, full, short, categories, strict=True):
            f.embedding, f.embedding_short, f.category = e, s, c

    async def _known_attributes(
        self, owner: Owner, asked: list[ResolvedMessage], priority: Priority
    ) -> list[list[str]]:
        """Per message: the attributes of the user's stored facts most similar to it (most similar first)."""
        full, short = await self.encoder.encode_async([r.display_text for r in asked], priority)
        facts_only = SearchFilter(owner, kinds=frozenset({MemoryKind.FACT}))
        out = []
        for vector in full:
            hits = await self.vectors.vector_search(facts_only, vector, None, limit=10, shortlist=10)
            names: dict[str, str] = {}
            for h in hits.hits:
                if h.memory.attribute:
                    names.setdefault(normal_attribute(h.memory.attribute), h.memory.attribute)
            out.append(list(names.values())[:KNOWN_ATTRIBUTES])
        return out
