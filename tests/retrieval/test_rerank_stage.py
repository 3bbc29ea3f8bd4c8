"""The cross-encoder stage with a reranker whose scores are known: it must decide the order.

Before this test a pipeline that ignored the reranker's scores passed every reranker test (they
checked degraded answers and the providers on their own). Here the reranker scores each document
by a number written in it, so the expected order and the blend with the previous order can be
computed exactly.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

from cognis_memory.retrieval.recipes import RECIPES
from cognis_memory.service import MessageBody

T, U = "acme", "reranked"
TEXTS = [
    "Note 17: the garden shed needs a new lock",
    "Note 3: I painted the garden shed door green last spring",
    "Note 42: a neighbour offered to fix the lock on our shed",
    "Note 8: the key of the shed lock is under the flower pot",
    "Note 25: we store the bikes and the lawnmower in the garden shed",
    "Note 11: the shed roof leaks when it rains hard",
]


class ScoreInTextReranker:
    """Scores a document by the number after "Note" in it (higher first); records what it was sent."""

    name = "score-in-text"

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    async def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        self.calls.append((query, list(documents)))
        return [float(re.search(r"Note (\d+)", d).group(1)) for d in documents]


def _note(content: str) -> int:
    return int(re.search(r"Note (\d+)", content).group(1))


@pytest.fixture
async def svc(make_service):
    reranker = ScoreInTextReranker()
    service = await make_service(reranker=reranker)
    await service.add_messages(T, U, [MessageBody(content=t) for t in TEXTS])
    return service, reranker


async def test_the_reranker_decides_the_order(svc) -> None:
    service, reranker = svc
    cfg = RECIPES["rrf_temporal_dedup_rerank"].with_overrides(rerank_weight=1.0)
    before = await service.search(T, U, "garden shed lock", config=RECIPES["rrf_temporal_dedup"], limit=6)
    after = await service.search(T, U, "garden shed lock", config=cfg, limit=6, explain=True)
    assert reranker.calls and reranker.calls[-1][0] == "garden shed lock"
    assert len(reranker.calls[-1][1]) == 6
    order = [_note(h.memory.content) for h in after.hits]
    assert order == [42, 25, 17, 11, 8, 3]
    assert order != [_note(h.memory.content) for h in before.hits]  # the reranker changed something
    assert [h.scores["rerank"] for h in after.hits] == pytest.approx([1.0, 22 / 39, 14 / 39, 8 / 39, 5 / 39, 0.0])
    assert after.hits[0].score == pytest.approx(1.0) and after.hits[-1].score == pytest.approx(0.0)
    assert "cross_encoder_ms" in after.explain["stage_durations"]


async def test_the_rerank_weight_blends_with_the_previous_order(svc) -> None:
    service, _ = svc
    base = RECIPES["rrf_temporal_dedup_rerank"]
    prev = await service.search(T, U, "garden shed lock", config=RECIPES["rrf_temporal_dedup"], limit=6)
    prev_scores = {h.memory.id: h.score for h in prev.hits}
    lo, hi = min(prev_scores.values()), max(prev_scores.values())
    w = 0.3
    blended = await service.search(T, U, "garden shed lock", config=base.with_overrides(rerank_weight=w), limit=6)
    expected = {
        h.memory.id: w * (_note(h.memory.content) - 3) / 39 + (1 - w) * (prev_scores[h.memory.id] - lo) / (hi - lo)
        for h in prev.hits
    }
    assert {h.memory.id: h.score for h in blended.hits} == pytest.approx(expected)
    assert [h.memory.id for h in blended.hits] == sorted(expected, key=lambda d: (-expected[d], d))
    unchanged = await service.search(T, U, "garden shed lock", config=base.with_overrides(rerank_weight=0.0), limit=6)
    assert [h.memory.id for h in unchanged.hits] == [h.memory.id for h in prev.hits]


async def test_only_the_head_is_reranked(svc) -> None:
    service, reranker = svc
    cfg = RECIPES["rrf_temporal_dedup_rerank"].with_overrides(rerank_weight=1.0, rerank_top=3)
    plain = await service.search(T, U, "garden shed lock", config=RECIPES["rrf_temporal_dedup"], limit=6)
    head = sorted(plain.hits[:3], key=lambda h: -_note(h.memory.content))
    reranked = await service.search(T, U, "garden shed lock", config=cfg, limit=6)
    assert len(reranker.calls[-1][1]) == 3
    assert [h.memory.id for h in reranked.hits] == [h.memory.id for h in head + plain.hits[3:]]
