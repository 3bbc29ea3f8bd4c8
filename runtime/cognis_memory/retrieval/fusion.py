"""Stage 4: weighted reciprocal rank fusion.

RRF_r(d) = 1 / (k + rank_r(d)), ranks starting at 1; a list that does not contain d adds 0.
fused(d) = w_vector * RRF_vector(d) + w_bm25 * RRF_bm25(d).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from ..domain import Memory
from ..search_text import search_text
from ..stores.values import ScoredMemory


def in_rank_order(hits: Sequence[ScoredMemory]) -> list[ScoredMemory]:
    """One source's hits best first, equal scores in the order they were stored (``created_at``, then id).

    Backends order equal scores their own way: the embedded store by row, PostgreSQL by id, OpenSearch by
    its segments' document order, which changes as segments are refreshed and merged. The ranks RRF reads
    must not, or the same memories rank differently from one server, or one run, to the next.
    """
    return sorted(hits, key=lambda h: (-h.score, h.memory.created_at, h.memory.id))


def rrf_scores(ranked_ids: Sequence[str], k: float) -> dict[str, float]:
    """1 / (k + rank) for each id of one ranked list (first rank = 1; repeats keep the best)."""
    out: dict[str, float] = {}
    for rank, doc in enumerate(ranked_ids, start=1):
        out.setdefault(doc, 1.0 / (k + rank))
    return out


def weighted_rrf(lists: Sequence[tuple[Sequence[str], float]], k: float) -> dict[str, float]:
    """Fused score per id over ``(ranked ids, weight)`` lists, highest first."""
    fused: dict[str, float] = {}
    for ranked, weight in lists:
        if weight == 0:
            continue
        for doc, score in rrf_scores(ranked, k).items():
            fused[doc] = fused.get(doc, 0.0) + weight * score
    return dict(sorted(fused.items(), key=lambda kv: (-kv[1], kv[0])))


def tie_order(candidates: Mapping[str, Memory], evidence: Mapping[str, Mapping[str, float]]) -> dict[str, int]:
    """A fixed position per candidate, for ranking candidates whose scores are equal (RRF gives equal
    scores often: ranks 3 and 5 in one list and 5 and 3 in the other): the more similar vector first,
    then the higher BM25 score, then the fact channel's, then the earlier memory, then the search text. The
    id comes last only: ids are random, so ties broken by id alone ranked the same memories
    differently from one run to the next."""

    def key(d: str) -> tuple[float, float, float, float, str, str]:
        e, m = evidence.get(d, {}), candidates[d]
        t = m.effective_time
        return (
            -e.get("vector", -math.inf), -e.get("bm25", -math.inf), -e.get("fact", -math.inf),
            t.timestamp() if t is not None else math.inf, search_text(m), d,
        )  # fmt: skip

    return {d: i for i, d in enumerate(sorted(candidates, key=key))}


def min_max_normalise(scores: dict[str, float]) -> dict[str, float]:
    """Scale to [0, 1] by (s - min) / (max - min); when all scores are equal, every one is 1."""
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    if hi - lo <= 1e-12:
        return {d: 1.0 for d in scores}
    return {d: (s - lo) / (hi - lo) for d, s in scores.items()}
