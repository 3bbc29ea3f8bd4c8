"""Stage 6: near-duplicate removal.

Walking the ranking from the top, a result is dropped when its cosine similarity to any
result kept above it is >= threshold (default 0.99). Vectors are unit length, so the
cosine is a dot product.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def dedup_indices(vectors: Sequence[np.ndarray | None], threshold: float) -> list[int]:
    """Indices (in ranking order) of the results to keep."""
    kept: list[int] = []
    kept_vecs: list[np.ndarray] = []
    for i, v in enumerate(vectors):
        if v is None:
            kept.append(i)
            continue
        if kept_vecs and float(np.max(np.stack(kept_vecs) @ v)) >= threshold:
            continue
        kept.append(i)
        kept_vecs.append(v)
    return kept
