"""The keyword-search (BM25) role."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ...search_filter import SearchFilter
from ..values import ScoredMemory


@runtime_checkable
class KeywordSearch(Protocol):
    async def keyword_search(self, flt: SearchFilter, text: str, *, limit: int) -> list[ScoredMemory]:
        """BM25 over current memories. ``text`` is user input: treat it as plain words."""
