"""Current-state ordering: a newer statement about the same thing comes before the one it replaced.

"I live in Porto" (January) and "we finally moved to Lisbon" (March) both match "where do I
live now?"; the newer one is the answer. Which statements are *about the same thing* is
decided without any vocabulary (no list of attributes or of "change" phrasings), from three
facts the store already holds:

* both are among the ``head`` best-ranked candidates for the query (the query says what the
  subject is);
* they come from the same speaker (a person's state is restated by that person; a fact
  extracted from someone's messages carries that speaker too);
* they are similar to each other (cosine of their embeddings >= ``min_similarity``) and were
  said at least ``min_gap`` apart (restating within one conversation is elaboration, not an
  update).

A later statement that meets all three *supersedes* the earlier one. For a present-state
query (:func:`~.query_analysis.state_intent`), each stale statement's newest successor (its
supersession chain followed to the end, taking the most similar successor at each step)
takes the stale statement's place in the ranking and the stale one follows directly below
it: the newest statement ranks above every statement it replaced. For a history query the
direction is reversed: the oldest predecessor comes first, the later statement below it.
Nothing is removed; only the order changes.

With an extraction LLM, facts and the raw messages they came from are linked explicitly
(written by :mod:`cognis_memory.ingest.supersession` into a fact version's
:attr:`~cognis_memory.domain.Memory.superseded_sources`): a raw memory whose message stated a value that a
current fact among the candidates has replaced is superseded by that fact, whatever their
similarity and rank, so a stale message never ranks above the fact that replaced it. That link
needs no reading of the query: it holds for every query that is not about the past (a question
without a present-state word, "what kind of diet is Omar on?", included), and a history query
gets the reverse (the old message first, then the fact that replaced it).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Literal

import numpy as np

from ..domain import Memory, MemoryKind
from .stages import RetrievalStage, SearchState


def _speaker(m: Memory) -> str:
    return (m.speaker or "").strip().lower()


def _time(m: Memory) -> float | None:
    t = m.message_time or m.event_time or m.created_at
    return t.timestamp() if t is not None else None


def successors(
    head: Sequence[str],
    memories: Mapping[str, Memory],
    *,
    min_similarity: float,
    min_gap: timedelta,
    newer: bool = True,
    same_speaker: bool = True,
) -> dict[str, str]:
    """For each memory of ``head`` that another one supersedes (``newer``) or that supersedes another
    one (not ``newer``): the most similar such later (earlier) memory of the same speaker."""
    usable = [d for d in head if memories[d].embedding is not None and _time(memories[d]) is not None]
    if len(usable) < 2:
        return {}
    sims = np.stack([e for d in usable if (e := memories[d].embedding) is not None]).astype(np.float32, copy=False)
    sims = sims @ sims.T
    times = np.array([_time(memories[d]) for d in usable], dtype=np.float64)
    speakers = np.array([_speaker(memories[d]) for d in usable], dtype=object)
    gap = min_gap.total_seconds()
    later = (times[None, :] - times[:, None]) >= gap  # later[a, b]: b said at least min_gap after a
    # Only raw messages supersede each other by similarity. Facts have versions: the extraction model saw
    # every later message with the facts it resembled and chose to UPDATE one or not, so a similar fact or
    # message beside a current fact is not a newer statement of it (a friend's new flat does not move the
    # user; the user's commute is not a newer car).
    raw = np.array([memories[d].kind is MemoryKind.RAW for d in usable])
    later &= raw[:, None] & raw[None, :]
    allowed = (later if newer else later.T) & (sims >= min_similarity)
    if same_speaker:
        allowed &= speakers[None, :] == speakers[:, None]
    masked = np.where(allowed, sims, -np.inf)
    best = masked.argmax(axis=1)
    return {usable[a]: usable[int(best[a])] for a in range(len(usable)) if np.isfinite(masked[a, best[a]])}


def evidence_links(head: Sequence[str], memories: Mapping[str, Memory]) -> dict[str, str]:
    """Raw memories of ``head`` whose message is superseded evidence of a current fact of ``head``:
    raw memory id -> that fact's id."""
    return {raw: fact for raw, (fact, _) in _evidence(head, memories).items()}


def latest_evidence(head: Sequence[str], memories: Mapping[str, Memory]) -> dict[str, str]:
    """Per current fact of ``head`` with superseded evidence in ``head``: the raw memory that stated the
    value it replaced most recently (the previous value, for a history query)."""
    best: dict[str, tuple[int, str]] = {}
    for raw, (fact, order) in _evidence(head, memories).items():
        if fact not in best or order > best[fact][0]:
            best[fact] = (order, raw)
    return {fact: raw for fact, (_, raw) in best.items()}


def _evidence(head: Sequence[str], memories: Mapping[str, Memory]) -> dict[str, tuple[str, int]]:
    """raw memory id -> (the current fact that superseded its message, the message's place in that fact's
    ``superseded_sources``: oldest first)."""
    stale: dict[str, tuple[str, int]] = {}
    for d in head:
        m = memories[d]
        if m.kind is MemoryKind.FACT and m.is_current:
            for order, msg in enumerate(m.superseded_sources):
                stale.setdefault(msg, (d, order))
    if not stale:
        return {}
    out = {}
    for d in head:
        m = memories[d]
        if m.kind is MemoryKind.RAW:
            link = next((stale[s] for s in m.source_message_ids if s in stale), None)
            if link is not None:
                out[d] = link
    return out


def _chain_end(start: str, step: Mapping[str, str]) -> str:
    seen, cur = {start}, start
    while cur in step and step[cur] not in seen:
        cur = step[cur]
        seen.add(cur)
    return cur


def order_by_state(
    ranked: Sequence[str],
    memories: Mapping[str, Memory],
    intent: Literal["present", "history"],
    *,
    head: int,
    min_similarity: float,
    min_gap: timedelta,
    same_speaker: bool = True,
    similar: bool = True,
) -> tuple[list[str], dict[str, str]]:
    """The ranking with each stale (present) or later (history) statement of the head placed directly
    below the statement that should come first; and, per statement moved below, that statement's id.
    Without ``similar`` only the explicit fact links order (a query that says nothing about time)."""
    step = (
        successors(ranked[:head], memories, min_similarity=min_similarity, min_gap=min_gap,
                   newer=intent == "present", same_speaker=same_speaker)
        if similar else {}
    )  # fmt: skip
    # an explicit fact link beats similarity, and holds over the whole ranking (it has no false positives);
    # a history query leads with the message of the value replaced last (the previous one)
    if intent == "present":
        step.update(evidence_links(ranked, memories))
    else:
        step.update(latest_evidence(ranked, memories))
    if not step:
        return list(ranked), {}
    leader = {d: _chain_end(d, step) for d in ranked if d in step}
    out: list[str] = []
    placed: set[str] = set()
    for d in ranked:
        first = leader.get(d)
        if first is not None and first not in placed:
            out.append(first)
            placed.add(first)
        if d not in placed:
            out.append(d)
            placed.add(d)
    return out, {d: f for d, f in leader.items() if f != d}


class CurrentStateOrder(RetrievalStage):
    """:func:`order_by_state` for a present-state or history query. Scores stay non-increasing down the
    ranking: a statement moved up takes the score of the one it now precedes; each statement moved below
    another has that one's rank as ``state_rank_below`` in ``explain``."""

    name = "current_state"
    phase = "ranking"

    def enabled(self, s: SearchState) -> bool:
        return s.cfg.current_state and bool(s.ranked)

    async def apply(self, s: SearchState) -> None:
        cfg, final, state = s.cfg, s.final, s.analysed.analysis.state
        intent: Literal["present", "history"] = "history" if state == "history" else "present"
        out, below = order_by_state(
            s.ranked, s.candidates, intent, head=cfg.state_head, min_similarity=cfg.state_similarity,
            min_gap=timedelta(minutes=cfg.state_gap_minutes), same_speaker=cfg.state_same_speaker,
            similar=state != "none",
        )  # fmt: skip
        if not below:
            return
        for d, first in below.items():
            final[first] = max(final[first], final[d])
            s.explain.setdefault(d, {})["state_rank_below"] = float(out.index(first) + 1)
        for prev, d in itertools.pairwise(out):
            final[d] = min(final[d], final[prev])
        s.ranked = out
