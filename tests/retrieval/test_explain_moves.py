"""``explain`` names every stage that changed a hit's score or place, with the amounts.

For each stage that can reorder hits, a search whose order that stage changes (shown against the
same search with the stage switched off), on the embedded store with the real offline model: the
hits the stage moved carry a move of that stage, and every hit's moves chain from its fused rank
(``rrf_rank``) to its place in the answer, so nothing moves a hit without it showing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from cognis_memory.retrieval.recipes import RECIPES, RetrievalConfig
from cognis_memory.retrieval.search_types import SearchResponse
from cognis_memory.retrieval.stages import SearchState, StageMove
from cognis_memory.service import MessageBody

T = "acme"
JAN = datetime(2023, 1, 10, 12, tzinfo=UTC)
MAY = datetime(2023, 5, 10, 12, tzinfo=UTC)
NOW = datetime(2023, 6, 1, tzinfo=UTC)
FILLER = [
    "I need to renew my passport before the summer",
    "The printer at the office jammed again",
    "We repainted the kitchen a pale green",
    "I switched my phone plan to a cheaper one",
]


def ids(res: SearchResponse) -> list[str]:
    return [h.memory.id for h in res.hits]


def assert_moves_explain_every_place(res: SearchResponse) -> None:
    """Each hit's moves start at its fused rank, each starts where the previous one ended, and the last
    ends at its place in the answer; a move changed the score or the place."""
    for place, hit in enumerate(res.hits, start=1):
        rank = int(hit.scores["rrf_rank"])
        for m in hit.moves:
            assert m.rank_before == rank, (hit.memory.content, hit.moves)
            assert m.rank_after is not None  # a hit was not removed
            assert m.rank_after != m.rank_before or m.score_after != m.score_before
            rank = m.rank_after
        assert rank == place, (hit.memory.content, hit.scores["rrf_rank"], hit.moves)


def moved(res: SearchResponse, stage: str) -> dict[str, StageMove]:
    """Hits whose place ``stage`` changed: memory id -> that move."""
    out = {}
    for h in res.hits:
        for m in h.moves:
            if m.stage == stage and m.rank_after != m.rank_before:
                out[h.memory.id] = m
    return out


async def explained(svc, user: str, query: str, cfg: RetrievalConfig, off: dict, **kw) -> SearchResponse:
    """The search with ``explain``, checked against the same search with the stage off (``off``): the
    stage changed the order, and the explanation accounts for every place."""
    res = await svc.search(T, user, query, config=cfg, explain=True, **kw)
    without = await svc.search(T, user, query, config=cfg.with_overrides(**off), explain=True, **kw)
    assert ids(res) != ids(without), "the stage did not change the order: the test shows nothing"
    assert_moves_explain_every_place(res)
    assert_moves_explain_every_place(without)
    return res


def test_record_moves_keeps_what_changed_and_nothing_else() -> None:
    state = SearchState(
        query=None, analysed=None, cfg=None, rec=None, candidates={}, explain={},  # type: ignore[arg-type]
        degraded=[], fused={},
    )  # fmt: skip
    before = ({"a": 0.5, "b": 0.4, "c": 0.3, "d": 0.1}, ["a", "b", "c", "d"])
    after = ({"a": 0.5, "b": 0.4, "c": 0.6, "d": 0.1}, ["c", "a", "b"])  # c lifted, d removed
    state.record_moves("x", before, after)
    assert state.moves == {
        "a": [StageMove("x", 0.5, 0.5, 1, 2)],
        "b": [StageMove("x", 0.4, 0.4, 2, 3)],
        "c": [StageMove("x", 0.3, 0.6, 3, 1)],
        "d": [StageMove("x", 0.1, 0.1, 4, None)],
    }
    state.record_moves("y", after, after)  # a stage that changed nothing leaves no move
    assert all(len(v) == 1 for v in state.moves.values())


async def test_without_explain_no_moves_are_recorded(make_service) -> None:
    svc = await make_service()
    await svc.add_messages(T, "u0", [MessageBody(content=f) for f in FILLER])
    res = await svc.search(T, "u0", "printer at the office")
    assert res.hits and all(h.moves == [] and h.scores == {} for h in res.hits)


async def test_speaker_boost_is_named_for_the_hits_it_moved(make_service) -> None:
    svc = await make_service()
    for speaker, texts in {"Bob": ["We adopted a parrot", "Alice, how was your weekend?"],
                           "Alice": ["Last week we finally adopted a young parrot from the animal shelter in town",
                                     "Bob, I painted the fence"]}.items():  # fmt: skip
        await svc.add_messages(T, "u1", [MessageBody(content=t, timestamp=JAN, speaker=speaker) for t in texts])
    res = await explained(svc, "u1", "What did Alice adopt?", RECIPES["default"], {"speaker_boost": 0.0})
    up = moved(res, "speaker_boost")
    lifted = [h for h in res.hits if h.memory.id in up and up[h.memory.id].rank_after < up[h.memory.id].rank_before]
    assert lifted and all(h.memory.speaker == "Alice" for h in lifted)
    for h in lifted:
        assert up[h.memory.id].score_after == pytest.approx(1.4 * up[h.memory.id].score_before)


async def test_context_is_named_with_its_lift_for_the_hits_it_moved(make_service) -> None:
    svc = await make_service()
    t0 = datetime(2023, 3, 1, 18, tzinfo=UTC)
    await svc.add_messages(T, "u2", [
        MessageBody(content="What instrument are you learning these days?", speaker="Ana", timestamp=t0, session_id="s1"),
        MessageBody(content="The saxophone, I practise every evening", speaker="Ben", timestamp=t0 + timedelta(minutes=1),
                    session_id="s1"),
    ] + [MessageBody(content=f, timestamp=t0 - timedelta(days=30), session_id="s0")
         for f in [*FILLER, "My sister is learning to play the cello"]])  # fmt: skip
    cfg = RetrievalConfig(context=True, context_max_lift=1.0, temporal_boost=False)
    res = await explained(svc, "u2", "which instrument is being learnt", cfg, {"context": False})
    reply = next(h for h in res.hits if "saxophone" in h.memory.content)
    move = moved(res, "context")[reply.memory.id]
    assert move.rank_after < move.rank_before
    assert move.score_after - move.score_before == pytest.approx(reply.scores["context_lift"])
    assert reply.scores["context_lift"] <= cfg.context_max_lift * move.score_before + 1e-12


async def test_role_prior_is_named_for_the_hits_it_moved(make_service) -> None:
    svc = await make_service()
    turns = [("user", "We adopted a rescue greyhound last spring and named him Pixel."),
             ("assistant", "Greyhounds make lovely pets! What is your dog's name, and how is he settling in?"),
             ("user", "My sister keeps asking for photos of him."),
             ("assistant", "You could start a little photo album of your dog's first year.")]  # fmt: skip
    await svc.add_messages(T, "u3", [MessageBody(content=t, role=r, timestamp=JAN + timedelta(minutes=i))
                                     for i, (r, t) in enumerate(turns)])  # fmt: skip
    res = await explained(svc, "u3", "What is my dog's name?", RECIPES["default"], {"role_boost": 0.0},
                          now=JAN + timedelta(days=3))  # fmt: skip
    assert "Pixel" in res.hits[0].memory.content
    move = moved(res, "role_prior")[res.hits[0].memory.id]
    assert move.rank_after < move.rank_before and move.score_after == pytest.approx(2 * move.score_before)


async def test_kind_prior_is_named_for_the_hits_it_moved(make_service) -> None:
    svc = await make_service()
    res = await svc.add_messages(T, "u4", [MessageBody(content=t, timestamp=JAN) for t in (
        "My favourite dessert is the lemon tart from the corner bakery",
        "The corner bakery also sells a dessert I like, a chocolate cake",
    )] + [MessageBody(content=f, timestamp=JAN) for f in FILLER])  # fmt: skip
    kitchen = next(m for m in res.raw_memories if "kitchen" in m.content)
    await svc.update_memory(T, "u4", kitchen.id, content="We repainted our kitchen pale green")  # now a fact
    cfg = RECIPES["default"].with_overrides(raw_weight=0.5)
    found = await explained(svc, "u4", "which dessert from the bakery do I like?", cfg, {"raw_weight": 1.0})
    up = moved(found, "kind_prior")
    fact = next(h for h in found.hits if h.memory.kind.value == "fact")
    assert fact.memory.id in up and up[fact.memory.id].rank_after < up[fact.memory.id].rank_before
    own = next(m for m in fact.moves if m.stage == "kind_prior")
    assert own.score_after == own.score_before  # the fact keeps its score: the raw messages above it lost theirs
    raw = next(h for h in found.hits if h.memory.id != fact.memory.id)
    halved = next(m for m in raw.moves if m.stage == "kind_prior")
    assert halved.score_after == pytest.approx(0.5 * halved.score_before)


async def test_temporal_boost_is_named_for_the_hits_it_moved(make_service) -> None:
    svc = await make_service()
    await svc.add_messages(T, "u5", [MessageBody(content=c, timestamp=t) for c, t in (
        ("I went hiking in the mountains and the hike was great", JAN),
        ("We took a short walk in the hills", MAY),
    )] + [MessageBody(content=f, timestamp=JAN - timedelta(days=90)) for f in FILLER])  # fmt: skip
    res = await explained(svc, "u5", "hiking in the hills in May 2023", RECIPES["rrf_temporal"],
                          {"temporal_boost": False}, now=NOW)  # fmt: skip
    walk = res.hits[0]
    assert walk.memory.content.endswith("We took a short walk in the hills")
    move = moved(res, "temporal_boost")[walk.memory.id]
    assert (move.rank_before, move.rank_after) == (2, 1) and move.score_after == pytest.approx(walk.scores["final"])


async def test_dedup_is_named_for_the_hits_it_moved_without_a_score(make_service) -> None:
    svc = await make_service()
    text = "My favourite dessert is the lemon tart from the corner bakery"
    await svc.add_messages(T, "u6", [MessageBody(content=text, client_message_id="a"),
                                      MessageBody(content=text.upper(), client_message_id="b")]
                           + [MessageBody(content=f) for f in FILLER])  # fmt: skip
    res = await explained(svc, "u6", "what dessert do I like", RECIPES["rrf_temporal_dedup"], {"dedup": False})
    up = moved(res, "dedup")
    assert up and all(m.rank_after == m.rank_before - 1 for m in up.values())  # the copy above them went
    assert all(m.score_after == m.score_before for m in up.values())  # no score: dedup only removes


class ScoreInTextReranker:
    """A reranker provider that scores a document by the number after "Note" in it."""

    name = "score-in-text"

    async def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        return [float(re.search(r"Note (\d+)", d).group(1)) for d in documents]  # type: ignore[union-attr]


async def test_the_reranker_is_named_for_the_hits_it_moved(make_service) -> None:
    svc = await make_service(reranker=ScoreInTextReranker())
    notes = ["Note 3: the garden shed needs a new lock", "Note 42: a neighbour offered to fix our shed",
             "Note 8: the key of the shed lock is under the flower pot", "Note 25: the shed roof leaks"]  # fmt: skip
    await svc.add_messages(T, "u7", [MessageBody(content=t) for t in notes])
    res = await explained(svc, "u7", "garden shed lock", RECIPES["rrf_temporal_dedup_rerank"], {"rerank": False})
    assert "Note 42" in res.hits[0].memory.content
    move = moved(res, "cross_encoder")[res.hits[0].memory.id]
    assert move.rank_after == 1 and move.score_after == pytest.approx(1.0)


async def test_current_state_is_named_for_the_hits_it_moved(make_service) -> None:
    svc = await make_service()
    msgs = [MessageBody(content="I drive an old red Fiat, it breaks down every winter.", timestamp=JAN)]
    msgs += [MessageBody(content=f, timestamp=JAN + timedelta(days=10 + i)) for i, f in enumerate(FILLER)]
    msgs.append(MessageBody(content="I finally sold the Fiat and bought a small electric car.",
                            timestamp=JAN + timedelta(days=60)))  # fmt: skip
    await svc.add_messages(T, "u8", msgs)
    res = await explained(svc, "u8", "What car do I drive now?", RECIPES["default"], {"current_state": False},
                          now=JAN + timedelta(days=70))  # fmt: skip
    new, old = res.hits[0], res.hits[1]
    assert "electric car" in new.memory.content and "red Fiat" in old.memory.content
    up, down = moved(res, "current_state")[new.memory.id], moved(res, "current_state")[old.memory.id]
    assert (up.rank_before, up.rank_after) == (2, 1) and (down.rank_before, down.rank_after) == (1, 2)
    assert old.scores["state_rank_below"] == 1.0
