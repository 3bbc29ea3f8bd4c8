"""Conversation context on the README's demo conversation (no LLM, embedded store, real offline model).

"Where does Maya live now?" used to put "moved to Lisbon" 8th to 10th although it was the third
vector hit: the Porto statement lent the same score to every turn of its session, and a dozen of
them passed it. What the design promises, and so what is pinned here, is a bound and not a rank:
the context stage never puts a memory above one whose own score (before the stage) was more than
``1 + context_max_lift`` times its own. Where Lisbon ends up beyond that is the embedder's and the
other stages' business (docs/benchmarks.md has the ranks before and after).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from cognis_memory.retrieval.recipes import RECIPES
from cognis_memory.retrieval.search_types import SearchResponse
from cognis_memory.service import MessageBody

T, U = "demo", "demo-user"
DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo_conversation.jsonl"
QUESTIONS = {"Where does Maya live now?": "moved to Lisbon", "What is Maya's job now?": "Tidewater Labs next Monday"}


def context_passes(res: SearchResponse) -> list[tuple[float, float]]:
    """(own score of the memory the context stage moved up, own score of the one it passed), both before
    the stage, for every pair of hits whose order the stage reversed."""
    before = {}
    after = {}
    for h in res.hits:
        m = next((m for m in h.moves if m.stage == "context"), None)
        if m is not None:
            before[h.memory.id], after[h.memory.id] = (m.rank_before, m.score_before), m.rank_after
    out = []
    for a, b in itertools.permutations(before, 2):
        (rank_a, own_a), (rank_b, own_b) = before[a], before[b]
        if rank_a > rank_b and after[a] < after[b]:
            out.append((own_a, own_b))
    return out


@pytest.fixture
async def demo(make_service):
    svc = await make_service()
    lines = [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines() if line.strip()]
    await svc.add_messages(T, U, [MessageBody(**{k: v for k, v in m.items() if k != "user_id"}) for m in lines])
    return svc


@pytest.mark.parametrize("query", list(QUESTIONS))
async def test_context_never_lifts_a_turn_past_a_clearly_better_own_score(demo, query) -> None:
    cfg = RECIPES["default"]
    res = await demo.search(T, U, query, config=cfg, explain=True, limit=30)
    passes = context_passes(res)
    assert passes, "the context stage reordered nothing: the test shows nothing"
    for own_up, own_passed in passes:
        assert own_passed <= (1 + cfg.context_max_lift) * own_up + 1e-12

    unbounded = cfg.with_overrides(context_max_lift=1e9)  # the rule before the bound
    old = await demo.search(T, U, query, config=unbounded, explain=True, limit=30)
    assert any(own_passed > (1 + cfg.context_max_lift) * own_up for own_up, own_passed in context_passes(old))

    def rank(r: SearchResponse) -> int:
        return next(i for i, h in enumerate(r.hits, start=1) if QUESTIONS[query] in h.memory.content)

    assert rank(res) < rank(old)
