"""Speaker-aware query handling: which names in a query are speakers of the user's memories.

A per-process directory remembers, per owner, the speakers seen on that owner's memories
(every search adds the speakers of its candidates). When a query holds a capitalised word
that the directory does not know yet, one small keyword probe for those words settles it:
the word is a speaker when one of the memories it finds was said by someone of that name.
Words that turned out not to be speakers are remembered for ``negative_ttl_s`` seconds, so
a query naming a place or a product does not probe on every request.

Only speakers written as names are learnt (:func:`speaker_name`): a speaker that is just the
message's role (``user``, ``assistant``: what ingest records when a message names no
speaker) or is not capitalised ("note") is a label, not a name, and never turns a query word
into a speaker. A known name counts in a query only where the query uses it as a name
(:func:`~.query_analysis.name_mentions`).

The directory probes the store itself, through the keyword role it is given (constructor
injection; without one it only learns from what searches show it). It is only a cache of facts
in the store: losing it (restart, eviction) costs one probe; a speaker that appears later is
learnt from the next search's candidates or probe. It never decides what a user may see: every
probe is an ordinary filtered search.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..domain import Memory, Owner
from ..errors import DependencyUnavailableError
from ..search_filter import SearchFilter
from ..stores.roles import KeywordSearch
from .stages import RetrievalStage, SearchState


def speaker_name(memory: Memory) -> str | None:
    """The memory's speaker when it is a name: capitalised, and not the role of the message it came
    from (a raw memory of a message without a speaker has its role, ``user`` or ``assistant``, as
    speaker); else None."""
    s = (memory.speaker or "").strip()
    if not s or not s[:1].isupper():
        return None
    role = memory.metadata.get("role") if isinstance(memory.metadata, dict) else None
    if isinstance(role, str) and s.lower() == role.strip().lower():
        return None
    return s


@dataclass(slots=True)
class _Entry:
    speakers: dict[str, str] = field(default_factory=dict)  # lower-case -> as spelled
    not_speakers: dict[str, float] = field(default_factory=dict)  # lower-case word -> expiry (monotonic)


class SpeakerDirectory:
    """Known speakers per owner (bounded LRU over owners; thread-safe)."""

    def __init__(
        self,
        keywords: KeywordSearch | None = None,
        *,
        max_owners: int = 10_000,
        max_speakers: int = 256,
        negative_ttl_s: float = 300.0,
    ) -> None:
        """``keywords``: the store's keyword search, which the probes use (none: no probes)."""
        self.keywords = keywords
        self.max_owners, self.max_speakers, self.negative_ttl_s = max_owners, max_speakers, negative_ttl_s
        self._entries: OrderedDict[Owner, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def _entry(self, owner: Owner) -> _Entry:
        e = self._entries.get(owner)
        if e is None:
            e = self._entries[owner] = _Entry()
            while len(self._entries) > self.max_owners:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(owner)
        return e

    def observe(self, owner: Owner, memories: Iterable[Memory]) -> None:
        """Remember the speaker names (see :func:`speaker_name`) seen on this owner's memories."""
        names = [n for n in map(speaker_name, memories) if n]
        with self._lock:
            e = self._entry(owner)
            for s in names:
                if len(e.speakers) < self.max_speakers:
                    key = s.lower()
                    e.speakers.setdefault(key, s)
                    e.not_speakers.pop(key, None)

    def known(self, owner: Owner) -> list[str]:
        with self._lock:
            e = self._entries.get(owner)
            return list(e.speakers.values()) if e else []

    def forget(self, owner: Owner) -> None:
        with self._lock:
            self._entries.pop(owner, None)

    def _unknown(self, owner: Owner, words: list[str]) -> list[str]:
        now = time.monotonic()
        with self._lock:
            e = self._entry(owner)
            out = []
            for w in words:
                key = w.lower()
                if key in e.speakers:
                    continue
                exp = e.not_speakers.get(key)
                if exp is not None and exp > now:
                    continue
                out.append(w)
            return out

    def _mark_not_speakers(self, owner: Owner, words: Iterable[str]) -> None:
        exp = time.monotonic() + self.negative_ttl_s
        with self._lock:
            e = self._entry(owner)
            for w in words:
                if w.lower() not in e.speakers:
                    e.not_speakers[w.lower()] = exp

    async def _probe(self, owner: Owner, word: str) -> list[Memory]:
        """Memories of ``owner`` that mention ``word``; none when there is no keyword search or it is down."""
        if self.keywords is None:
            return []
        try:
            return [h.memory for h in await self.keywords.keyword_search(SearchFilter(owner=owner), word, limit=10)]
        except DependencyUnavailableError:
            return []

    async def known_after_probe(self, owner: Owner, words: Iterable[str]) -> tuple[list[str], bool]:
        """The owner's known speakers once the ``words`` (a query's :func:`~.query_analysis.name_candidates`)
        that are neither known speakers nor known not to be have been probed, and whether a probe was needed."""
        unknown = self._unknown(owner, list(words))
        probed = False
        if unknown:
            probed = True
            results = await asyncio.gather(*(self._probe(owner, w) for w in unknown))
            self.observe(owner, (m for found in results for m in found))
            self._mark_not_speakers(owner, unknown)
        return self.known(owner), probed


class SpeakerBoost(RetrievalStage):
    """Memories of a speaker the query named: fused score * (1 + ``speaker_boost``)."""

    name = "speaker_boost"
    phase = "fused"

    def enabled(self, s: SearchState) -> bool:
        return bool(s.analysed.speaker_names) and s.cfg.speaker_boost > 0 and bool(s.fused)

    async def apply(self, s: SearchState) -> None:
        wanted = {n.lower() for n in s.analysed.speaker_names}
        boost = 1.0 + s.cfg.speaker_boost
        s.fused = {
            d: v * boost if (s.candidates[d].speaker or "").strip().lower() in wanted else v for d, v in s.fused.items()
        }
