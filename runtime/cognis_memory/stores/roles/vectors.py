"""The vector-search role."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from ...search_filter import SearchFilter
from ..values import VectorSearchResult


@runtime_checkable
class VectorSearch(Protocol):
    async def vector_search(
        self,
        flt: SearchFilter,
        query: np.ndarray,
        query_short: np.ndarray | None,
        *,
        limit: int,
        shortlist: int,
    ) -> VectorSearchResult:
        """Cosine search over current memories.

        With ``query_short`` given: two stages, a prefix shortlist of ``shortlist``
        candidates, rescored with full vectors. Without it: one exact full-vector stage.
        """
