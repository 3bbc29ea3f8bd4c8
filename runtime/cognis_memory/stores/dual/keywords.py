"""The dual store's keyword-search role: BM25 from OpenSearch, rows from PostgreSQL."""

from __future__ import annotations

from ...search_filter import SearchFilter
from ..opensearch.keyword_index import OpenSearchKeywordIndex
from ..postgres import PostgresMemories
from ..values import ScoredMemory


class HydratedKeywordSearch:
    """The dual store's keyword-search role: BM25 ids from OpenSearch, rows from PostgreSQL (only
    those current there, for this owner)."""

    def __init__(self, index: OpenSearchKeywordIndex, records: PostgresMemories) -> None:
        self.index, self.records = index, records

    async def keyword_search(self, flt: SearchFilter, text: str, *, limit: int) -> list[ScoredMemory]:
        if limit <= 0:
            return []
        # A few extra ids cover documents the outbox has not removed yet.
        hits = await self.index.search(flt, text, limit=limit + max(5, limit // 4))
        if not hits:
            return []
        rows = {m.id: m for m in await self.records.fetch_current_memories(flt.owner, [i for i, _ in hits])}
        return [ScoredMemory(rows[i], s) for i, s in hits if i in rows][:limit]
