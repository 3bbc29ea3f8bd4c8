"""Kind prior: where an extraction LLM wrote facts, a fact outranks a raw message of about the same score.

A fact is what the extraction model concluded the user said, written as one statement about one
person; a raw message is the evidence, with everything else that was said in it (a friend's new
flat, a colleague's car). When both match a query about equally, the fact is the better answer, and
the raw message that matched only through a word about someone else is the usual distractor. So,
when the candidates hold at least one fact, every raw message's fused score is multiplied by
``raw_weight`` (below 1). The order among raw messages, and among facts, does not change; a search
whose candidates hold no fact (no LLM configured) is not touched at all.
"""

from __future__ import annotations

from ..domain import MemoryKind
from .stages import RetrievalStage, SearchState


class KindPrior(RetrievalStage):
    name = "kind_prior"
    phase = "fused"

    def enabled(self, s: SearchState) -> bool:
        return s.cfg.raw_weight < 1.0 and any(s.candidates[d].kind is MemoryKind.FACT for d in s.fused)

    async def apply(self, s: SearchState) -> None:
        w = s.cfg.raw_weight
        s.fused = {d: v * w if s.candidates[d].kind is MemoryKind.RAW else v for d, v in s.fused.items()}
