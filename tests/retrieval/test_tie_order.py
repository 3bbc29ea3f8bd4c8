"""Equal scores rank the same whatever order a backend returns them in.

The store roles promise hits best first and nothing about equal scores: the embedded store returns them
by row, PostgreSQL by id (random), OpenSearch by its segments' document order, which refreshes and merges
change. The pipeline ranks equal scores in the order the memories were stored, so the same memories
answer the same question the same way on every backend, server and run.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from cognis_memory.domain import Category, Memory, Owner
from cognis_memory.retrieval.fusion import in_rank_order
from cognis_memory.retrieval.pipeline import RetrievalPipeline, SearchQuery
from cognis_memory.retrieval.recipes import RECIPES
from cognis_memory.search_filter import SearchFilter
from cognis_memory.service import MessageBody
from cognis_memory.stores.roles import KeywordSearch, VectorSearch
from cognis_memory.stores.values import ScoredMemory, VectorSearchResult
from cognis_memory.telemetry.recorder import StageRecorder

T = "acme"
SAID = datetime(2024, 3, 1, 9, tzinfo=UTC)


def ties_reversed(hits: list[ScoredMemory]) -> list[ScoredMemory]:
    """The same hits, each run of equal scores in the opposite order."""
    out: list[ScoredMemory] = []
    run: list[ScoredMemory] = []
    for h in hits:
        if run and h.score != run[0].score:
            out += run[::-1]
            run = []
        run.append(h)
    return out + run[::-1]


class TiesReversedBackend:
    """The vector and keyword roles of a real store, with equal scores returned in reverse order: what a
    backend that orders ties by id, or by segment, may return for the same memories."""

    def __init__(self, vectors: VectorSearch, keywords: KeywordSearch) -> None:
        self.vectors, self.keywords = vectors, keywords

    async def vector_search(
        self, flt: SearchFilter, query: np.ndarray, query_short: np.ndarray | None, *, limit: int, shortlist: int
    ) -> VectorSearchResult:
        res = await self.vectors.vector_search(flt, query, query_short, limit=limit, shortlist=shortlist)
        res.hits = ties_reversed(res.hits)
        return res

    async def keyword_search(self, flt: SearchFilter, text: str, *, limit: int) -> list[ScoredMemory]:
        return ties_reversed(await self.keywords.keyword_search(flt, text, limit=limit))


def memory(content: str, memory_id: str, stored: datetime) -> Memory:
    return Memory(
        tenant_id=T, user_id="u", content=content, category=Category.PERSONAL_DETAILS, id=memory_id, created_at=stored
    )


def test_equal_scores_rank_in_the_order_they_were_stored() -> None:
    first, second, third = (
        memory("same", i, SAID + timedelta(microseconds=n)) for n, i in ((0, "f"), (1, "a"), (2, "0"))
    )
    best = memory("best", "z", SAID)
    hits = [ScoredMemory(third, 0.5), ScoredMemory(best, 0.9), ScoredMemory(first, 0.5), ScoredMemory(second, 0.5)]
    assert [h.memory.id for h in in_rank_order(hits)] == ["z", "f", "a", "0"]
    assert [h.memory.id for h in in_rank_order(ties_reversed(in_rank_order(hits)))] == ["z", "f", "a", "0"]


async def test_a_backend_that_orders_ties_its_own_way_gives_the_same_answer(make_service) -> None:
    svc = await make_service()
    said = "Thanks, talk to you soon about the garden plans!"
    for _ in range(3):  # the same words at the same time, three times: equal vector and BM25 scores
        await svc.add_messages(T, "u", [MessageBody(content=said, timestamp=SAID)])
    await svc.add_messages(T, "u", [MessageBody(content=c, timestamp=SAID) for c in (
        "We planted tomatoes and basil in the garden", "The garden fence needs a new coat of paint",
        "I ordered seeds for the vegetable patch",
    )])  # fmt: skip
    base = svc.retrieval
    reordered = TiesReversedBackend(base.vectors, base.keywords)
    other = RetrievalPipeline(
        base.encoder, vectors=reordered, keywords=reordered, memories=base.memories, cache=base.cache,
        config=base.config,
    )  # fmt: skip
    # no dedup: the three copies stay in the answer
    q = SearchQuery(
        filter=SearchFilter(owner=Owner(T, "u")), text="talk about the garden plans", limit=10, explain=True
    )

    plain = await base.search(q, StageRecorder(), RECIPES["rrf"])
    answer = await other.search(q, StageRecorder(), RECIPES["rrf"])

    copies = [h for h in plain.hits if h.memory.content == said]
    assert len(copies) == 3
    assert len({h.scores["vector"] for h in copies}) == 1 and len({h.scores["bm25"] for h in copies}) == 1
    assert [h.memory.id for h in answer.hits] == [h.memory.id for h in plain.hits]
    assert [h.memory.created_at for h in copies] == sorted(h.memory.created_at for h in copies)
