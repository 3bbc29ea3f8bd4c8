"""Stage 6: near-duplicate removal.

Walking the ranking from the top, a result is dropped when its cosine similarity to any
result kept above it is >= threshold (default 0.99). Vectors are unit length, so the
cosine is a dot product.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .stages import RetrievalStage, SearchState


def dedup_indices(vectors: Sequence[np.ndarray | None], threshold: float) -> list[int]:
    """Indices (in ranking order) of the results to keep."""
    present = [(i, v) for i, v in enumerate(vectors) if v is not None]
    with_vec = [i for i, _ in present]
    if len(with_vec) < 2:
        return list(range(len(vectors)))
    mat = np.stack([v for _, v in present]).astype(np.float32, copy=False)
    sims = mat @ mat.T  # one matrix product instead of one per candidate
    if not np.triu(sims >= threshold, 1).any():  # the usual case: no pair is that close, nothing to walk
        return list(range(len(vectors)))
    dropped: set[int] = set()
    kept_rows: list[int] = []
    for row, i in enumerate(with_vec):
        if kept_rows and float(np.max(sims[row, kept_rows])) >= threshold:
            dropped.add(i)
            continue
        kept_rows.append(row)
    return [i for i in range(len(vectors)) if i not in dropped]


class NearDuplicateRemoval(RetrievalStage):
    """Stage 6 over the head of the ranking (see :meth:`apply`); the count removed is logged as
    ``dedup_removed``."""

    name = "dedup"
    phase = "ranking"

    def enabled(self, s: SearchState) -> bool:
        return s.cfg.dedup and bool(s.ranked)

    async def apply(self, s: SearchState) -> None:
        # Only the head can be returned or reranked: dedup a window twice that size, and the
        # whole list only when the window loses so much that the head would run short.
        cfg, ranked = s.cfg, s.ranked
        reranks = cfg.rerank and self.resources.reranker is not None
        need = max(s.query.limit, cfg.rerank_top if reranks else 0)
        window = ranked if len(ranked) <= 2 * need else ranked[: 2 * need]
        keep = dedup_indices([s.candidates[d].embedding for d in window], cfg.dedup_threshold)
        if len(keep) < need and len(window) < len(ranked):
            window = ranked
            keep = dedup_indices([s.candidates[d].embedding for d in window], cfg.dedup_threshold)
        s.rec.fields["dedup_removed"] = len(window) - len(keep)
        s.ranked = [window[i] for i in keep]
