"""Stage 7: cross-encoder reranking.

The ``rerank_top`` best-ranked candidates go to the configured reranker with the query (each as its
search text, :func:`~cognis_memory.search_text.search_text`: the speaker and absolute dates in the
words, as embedded and keyword-indexed); their
final score becomes ``w * rerank_norm + (1 - w) * previous_norm`` (both min-max normalised over
the head, ``w`` = ``rerank_weight``) and the head is reordered by it; the tail keeps its order.
A reranker that fails, times out (``reranker_timeout_s``) or answers the wrong number of scores is
skipped: the ranking stays as it was and the answer lists ``reranker`` under ``degraded``.
"""

from __future__ import annotations

import asyncio

from ..errors import DependencyUnavailableError
from ..search_text import search_text
from .fusion import min_max_normalise
from .stages import RetrievalStage, SearchState


class CrossEncoderRerank(RetrievalStage):
    name = "cross_encoder"
    phase = "ranking"

    def enabled(self, s: SearchState) -> bool:
        return s.cfg.rerank and self.resources.reranker is not None and bool(s.ranked)

    async def apply(self, s: SearchState) -> None:
        reranker = self.resources.reranker
        assert reranker is not None
        cfg, final = s.cfg, s.final
        head, tail = s.ranked[: cfg.rerank_top], s.ranked[cfg.rerank_top :]
        try:
            scores = await asyncio.wait_for(
                reranker.rerank(s.analysed.text, [search_text(s.candidates[d]) for d in head]),
                timeout=self.resources.reranker_timeout_s,
            )
        except (DependencyUnavailableError, TimeoutError):
            s.degraded.append("reranker")
            return
        if len(scores) != len(head):
            s.degraded.append("reranker")
            return
        rr = min_max_normalise(dict(zip(head, map(float, scores), strict=True)))
        prev = min_max_normalise({d: final[d] for d in head})
        for d in head:
            final[d] = cfg.rerank_weight * rr[d] + (1 - cfg.rerank_weight) * prev[d]
            s.explain.setdefault(d, {}).update(rerank=rr[d])
        s.ranked = s.by_score(head, final) + tail
