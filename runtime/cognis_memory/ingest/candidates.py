"""Which stored facts a new fact may replace: chosen by code, before any question is asked.

From the current facts of the user most similar to the new fact (the vector search the pipeline
already makes), a stored fact is a **candidate** when all of these hold:

* it is about the same person (:func:`~cognis_memory.fact_identity.same_subject`; a fact stored
  without a subject, written before facts had one, counts by its speaker);
* its evidence is older: it was said strictly before the new fact (an older statement never
  replaces a newer one, whatever order the jobs run in; two facts of one message are not a change);
* it is about the same thing: the same attribute in the model's words (normalised). A fact stored
  without an attribute (written before facts had one) counts when the cosine of the two texts is at
  least ``min_similarity``. Facts under other attribute names are never candidates, however similar:
  asked whether "Maya's home city: Porto" is no longer true after "Maya's morning drink: green tea",
  a 1.5B model said yes (docs/design-notes.md, "Changing facts, round 3");
* it does not already say the same: the same attribute and the same value (or one value saying no
  more than the other, "fan is loud" / "laptop fan is really loud") make the new fact a
  **duplicate** (nothing is written), and no question is asked.

At most ``limit`` candidates are kept, the most similar first.
Each one is then the subject of one change check (:mod:`.change_check`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from ..domain import Memory
from ..fact_identity import same_attribute, same_subject, same_value
from ..stores.values import ScoredMemory

#: Most stored facts one new fact is checked against.
CANDIDATE_LIMIT = 3


@dataclass(frozen=True, slots=True)
class NewFact:
    """What the choice needs of a new fact."""

    subject: str
    attribute: str
    value: str
    speaker: str
    said: datetime | None


@dataclass(frozen=True, slots=True)
class Candidate:
    memory: Memory
    similarity: float
    same_attribute: bool


@dataclass(frozen=True, slots=True)
class Choice:
    candidates: list[Candidate]
    #: a stored fact that already says the same (the new fact is then not written)
    duplicate: Memory | None = None


def said_at(memory: Memory) -> datetime | None:
    """When a stored fact was last stated: its message time, else when it was written."""
    return memory.message_time or memory.created_at


def _stored_value(memory: Memory) -> str:
    """The value part of a fact's text ("Maya's home city: Lisbon" -> "Lisbon")."""
    return memory.content.split(": ", 1)[1] if ": " in memory.content else memory.content


def choose(
    fact: NewFact, hits: Sequence[ScoredMemory], *, min_similarity: float, limit: int = CANDIDATE_LIMIT
) -> Choice:
    """The candidates among ``hits`` (current facts of the user, most similar first) for ``fact``."""
    out: list[Candidate] = []
    for hit in hits:
        m = hit.memory
        if not m.is_current or m.deleted:
            continue
        person = same_subject(m.subject, fact.subject) if m.subject else same_subject(m.speaker, fact.speaker)
        if not person:
            continue
        attribute = same_attribute(m.attribute, fact.attribute)
        if attribute and same_value(_stored_value(m), fact.value):
            return Choice([], duplicate=m)
        when = said_at(m)
        if fact.said is not None and when is not None and when >= fact.said:
            continue
        if attribute or (not m.attribute and hit.score >= min_similarity):
            out.append(Candidate(m, hit.score, attribute))
    out.sort(key=lambda c: (not c.same_attribute, -c.similarity))
    return Choice(out[:limit])
