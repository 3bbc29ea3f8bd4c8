"""Retrieval pipeline behaviours on the embedded store with the real offline model.

Temporal boosting reorders, dedup removes a near copy, history returns version chains, a
failing reranker marks the answer degraded and keeps the order, speaker names are handled
as speakers (not as search terms), and conversation context lends score to neighbours.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from cognis_memory.domain import Memory, Owner
from cognis_memory.errors import DependencyUnavailableError
from cognis_memory.retrieval.conversation_context import neighbour_scores
from cognis_memory.retrieval.query_analysis import name_candidates
from cognis_memory.retrieval.recipes import RECIPES, RetrievalConfig
from cognis_memory.retrieval.speakers import SpeakerDirectory
from cognis_memory.search_filter import SearchFilter
from cognis_memory.service import MessageBody
from cognis_memory.stores.values import ScoredMemory

T = "acme"
JAN = datetime(2023, 1, 10, 12, tzinfo=UTC)
MAY = datetime(2023, 5, 10, 12, tzinfo=UTC)
NOW = datetime(2023, 6, 1, tzinfo=UTC)

FILLER = [
    "I need to renew my passport before the summer",
    "My sister is learning to play the cello",
    "The printer at the office jammed again",
    "We repainted the kitchen a pale green",
    "I switched my phone plan to a cheaper one",
    "Our team ships the release on Thursdays",
]


async def add(svc, user: str, items: Sequence[tuple[str, datetime]], *, speaker: str | None = None, session=None):
    msgs = [MessageBody(content=c, timestamp=t, speaker=speaker, session_id=session) for c, t in items]
    return await svc.add_messages(T, user, msgs)


def contents(resp) -> list[str]:
    """Hit texts (a raw memory's content is the message as said)."""
    return [h.memory.content for h in resp.hits]


async def test_temporal_boost_reorders(make_service) -> None:
    svc = await make_service()
    await add(svc, "u1", [("I went hiking in the mountains and the hike was great", JAN),
                          ("We took a short walk in the hills", MAY)] + [(f, JAN - timedelta(days=90)) for f in FILLER])  # fmt: skip
    q = "hiking in the hills in May 2023"
    plain = await svc.search(T, "u1", q, now=NOW, config=RECIPES["rrf"])
    boosted = await svc.search(T, "u1", q, now=NOW, config=RECIPES["rrf_temporal"], explain=True)
    assert contents(plain)[0].startswith("I went hiking")
    assert boosted.analysis.temporal == "explicit"
    assert contents(boosted)[0] == "We took a short walk in the hills"
    assert boosted.hits[0].scores["temporal"] == pytest.approx(1.0)
    assert boosted.explain is not None and "temporal_boost_ms" in boosted.explain["stage_durations"]


async def test_dedup_removes_a_near_copy(make_service) -> None:
    svc = await make_service()
    text = "My favourite dessert is the lemon tart from the corner bakery"
    await svc.add_messages(T, "u2", [MessageBody(content=text, client_message_id="a"),
                                      MessageBody(content=text.upper(), client_message_id="b")]
                           + [MessageBody(content=f) for f in FILLER])  # fmt: skip
    q = "what dessert do I like"
    without = await svc.search(T, "u2", q, config=RECIPES["rrf_temporal"])
    with_dedup = await svc.search(T, "u2", q, config=RECIPES["rrf_temporal_dedup"])
    # an uncased model embeds both spellings identically (cosine 1 >= 0.99)
    assert sum(c.lower() == text.lower() for c in contents(without)) == 2
    assert sum(c.lower() == text.lower() for c in contents(with_dedup)) == 1
    assert contents(with_dedup)[0] == contents(without)[0]  # the higher-ranked copy is the one kept


async def test_history_returns_the_version_chain(make_service) -> None:
    svc = await make_service()
    res = await add(svc, "u3", [("I live in Porto", JAN)] + [(f, JAN) for f in FILLER])
    first = res.raw_memories[0]
    v2 = await svc.update_memory(T, "u3", first.id, content="I live in Lisbon now")
    v3 = await svc.update_memory(T, "u3", v2.id, content="I live in Madrid now")
    resp = await svc.search(T, "u3", "where did I use to live before?")
    assert resp.analysis.history
    hit = next(h for h in resp.hits if h.memory.id == v3.id)
    assert [m.content for m in hit.history] == ["I live in Porto", "I live in Lisbon now"]
    assert [m.version for m in hit.history] == [1, 2]
    plain = await svc.search(T, "u3", "where do I live", config=RECIPES["rrf"])
    assert all(not h.history for h in plain.hits)  # no history intent, no chains


class FailingReranker:
    """A reranker provider that is down (the protocol's failure mode)."""

    name = "failing"

    def __init__(self) -> None:
        self.calls = 0

    async def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        self.calls += 1
        raise DependencyUnavailableError("reranker", "endpoint unreachable")


class RecordingReranker:
    """A reranker provider that scores by position and keeps the documents it was given."""

    name = "recording"

    def __init__(self) -> None:
        self.documents: list[str] = []

    async def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        self.documents += documents
        return [float(-i) for i in range(len(documents))]


async def test_the_reranker_reads_the_search_text_with_speaker_and_absolute_dates(make_service) -> None:
    """The content is kept as said; the cross-encoder still reads who said it and what "yesterday" was."""
    reranker = RecordingReranker()
    svc = await make_service(reranker=reranker)
    await svc.add_messages(T, "u9", [MessageBody(content="I went hiking yesterday", timestamp=MAY, speaker="Maya")])
    resp = await svc.search(T, "u9", "hiking", config=RECIPES["rrf_temporal_dedup_rerank"])
    assert [h.memory.content for h in resp.hits] == ["I went hiking yesterday"]
    assert reranker.documents == ["Maya: I went hiking yesterday [9 May 2023]"]  # said on 10 May 2023


async def test_failing_reranker_marks_degraded_and_keeps_the_order(make_service) -> None:
    reranker = FailingReranker()
    svc = await make_service(reranker=reranker)
    await add(svc, "u4", [("I adopted a grey cat called Miso", JAN), ("Miso the cat sleeps on my desk", MAY)]
              + [(f, JAN) for f in FILLER])  # fmt: skip
    q = "tell me about my cat"
    reference = await svc.search(T, "u4", q, config=RECIPES["rrf_temporal_dedup"])
    resp = await svc.search(T, "u4", q, config=RECIPES["rrf_temporal_dedup_rerank"])
    assert reranker.calls == 1
    assert resp.degraded == ["reranker"]
    assert [h.memory.id for h in resp.hits] == [h.memory.id for h in reference.hits]
    assert not reference.degraded


async def test_speaker_names_become_a_boost_not_search_terms(make_service) -> None:
    svc = await make_service()
    await add(svc, "u5", [("I adopted a rescue dog last spring", JAN), ("Alice, how was your weekend?", JAN)],
              speaker="Bob")  # fmt: skip
    await add(svc, "u5", [("We adopted a kitten from the shelter", JAN), ("Bob, I painted the fence", JAN)],
              speaker="Alice")  # fmt: skip
    resp = await svc.search(T, "u5", "What did Alice adopt?", config=RECIPES["default"], explain=True)
    assert resp.explain is not None
    assert resp.explain["analysis"]["speaker_names"] == ["Alice"]
    assert "Alice" not in resp.explain["analysis"]["search_text"]
    assert (resp.hits[0].memory.speaker, resp.hits[0].memory.content) == (
        "Alice",
        "We adopted a kitten from the shelter",
    )
    # the directory now knows both speakers: a mention is recognised without a probe
    again = await svc.search(T, "u5", "what did Bob adopt", config=RECIPES["default"], explain=True)
    assert again.explain is not None and again.explain["analysis"]["speaker_names"] == ["Bob"]
    assert (again.hits[0].memory.speaker, again.hits[0].memory.content) == ("Bob", "I adopted a rescue dog last spring")


async def test_unknown_capitalised_word_is_probed_once() -> None:
    owner = Owner(T, "u")
    calls: list[str] = []

    class Keywords:  # the keyword role, as the directory uses it
        async def keyword_search(self, flt: SearchFilter, text: str, *, limit: int) -> list[ScoredMemory]:
            assert flt.owner == owner  # a probe is an ordinary search of this owner's memories
            calls.append(text)
            return [ScoredMemory(Memory(tenant_id=T, user_id="u", content="Dana: hi", category="emotional",  # type: ignore[arg-type]
                                        speaker="Dana"), 1.0)]  # fmt: skip

    directory = SpeakerDirectory(Keywords())  # type: ignore[arg-type]
    words = name_candidates("Did Dana visit Paris?")
    assert await directory.known_after_probe(owner, words) == (["Dana"], True)
    assert sorted(calls) == ["Dana", "Paris"]
    assert await directory.known_after_probe(owner, words) == (["Dana"], False)
    assert len(calls) == 2  # Paris is remembered as not a speaker, Dana as one


def _mem(mid: str, session: str | None, minutes: float) -> Memory:
    return Memory(
        tenant_id=T, user_id="u", content=mid, category="emotional",  # type: ignore[arg-type]
        session_id=session, message_time=JAN + timedelta(minutes=minutes), id=mid,
    )  # fmt: skip


def test_neighbour_scores_share_within_session_and_window() -> None:
    mems = {m.id: m for m in [_mem("a", "s1", 0), _mem("b", "s1", 1), _mem("c", "s1", 120), _mem("d", "s2", 0),
                              _mem("e", None, 0)]}  # fmt: skip
    scores = {"a": 1.0, "b": 0.2, "c": 0.5, "d": 0.9, "e": 0.8}
    ctx = neighbour_scores(scores, mems, window_minutes=30)
    assert ctx == {"a": 0.2, "b": 1.0, "c": 0.0, "d": 0.0, "e": 0.0}
    # a session entirely within the window: the best other member (top or runner-up)
    ctx_all = neighbour_scores(scores, mems, window_minutes=600)
    assert ctx_all["a"] == 0.5 and ctx_all["b"] == 1.0 and ctx_all["c"] == 1.0


def test_a_context_lift_never_passes_a_clearly_better_own_score() -> None:
    """The lift is at most ``max_lift`` x the neighbour's own score: a whole session next to one strong
    match cannot pass a memory elsewhere whose own score is more than 1 + max_lift times its own."""
    from cognis_memory.retrieval.conversation_context import context_lifts

    mems = {m.id: m for m in [_mem("match", "s1", 0), *(_mem(f"chat{i}", "s1", i) for i in range(1, 6)),
                              _mem("closer", "s2", 0)]}  # fmt: skip
    scores = {"match": 1.0, "chat1": 0.30, "chat2": 0.20, "chat3": 0.10, "chat4": 0.05, "chat5": 0.0, "closer": 0.35}
    unbounded, ctx = context_lifts(scores, mems, weight=0.3, max_lift=1e9, window_minutes=30)
    assert ctx["chat3"] == 1.0 and unbounded["chat3"] == pytest.approx(0.3)  # the old rule: +0.3 for any neighbour
    assert scores["chat3"] + unbounded["chat3"] > scores["closer"]  # ... which passed the closer memory
    lifts, _ = context_lifts(scores, mems, weight=0.3, max_lift=0.25, window_minutes=30)
    assert lifts == pytest.approx(
        {"match": 0.09, "chat1": 0.075, "chat2": 0.05, "chat3": 0.025, "chat4": 0.0125, "chat5": 0.0, "closer": 0.0}
    )  # 0.3 x the best neighbour's score, but at most a quarter of their own
    lifted = {d: s + lifts[d] for d, s in scores.items()}
    for d in scores:
        for other in scores:
            if scores[other] > 1.25 * scores[d]:
                assert lifted[other] > lifted[d], (d, other)  # a clearly better own score stays ahead
    assert lifted["chat1"] > lifted["closer"]  # within 1 + max_lift the neighbour may pass: that is the evidence


async def test_context_lifts_the_reply_to_a_matching_question(make_service) -> None:
    svc = await make_service()
    t0 = datetime(2023, 3, 1, 18, tzinfo=UTC)
    await svc.add_messages(T, "u6", [
        MessageBody(content="What instrument are you learning these days?", speaker="Ana", timestamp=t0, session_id="s1"),
        MessageBody(content="The saxophone, I practise every evening", speaker="Ben", timestamp=t0 + timedelta(minutes=1),
                  session_id="s1"),
    ] + [MessageBody(content=f, timestamp=t0 - timedelta(days=30), session_id="s0") for f in FILLER])  # fmt: skip
    q = "which instrument is being learnt"
    cfg = RetrievalConfig(context=True, temporal_boost=False)
    with_ctx = await svc.search(T, "u6", q, config=cfg, explain=True)
    without = await svc.search(T, "u6", q, config=cfg.with_overrides(context=False))
    reply = "The saxophone, I practise every evening"
    assert contents(with_ctx).index(reply) <= contents(without).index(reply)
    assert contents(with_ctx).index(reply) <= 1
    assert any("context" in h.scores for h in with_ctx.hits)


def test_equal_scores_rank_by_evidence_not_by_the_random_id() -> None:
    """RRF ties are common (ranks 3 and 5 in one list, 5 and 3 in the other); ids are random, so a tie
    broken by id ranked the same memories differently in two stores holding the same data."""
    from cognis_memory.retrieval.fusion import tie_order, weighted_rrf
    from cognis_memory.retrieval.stages import SearchState

    mems = {mid: _mem(mid, None, minutes) for mid, minutes in (("a", 0), ("b", 5), ("c", 9), ("d", 1))}
    fused = weighted_rrf([(["x1", "x2", "b", "x3", "a"], 0.5), (["y1", "y2", "a", "y3", "b"], 0.5)], 10.0)
    assert fused["a"] == fused["b"]  # the tie
    evidence = {"a": {"vector": 0.61, "bm25": 2.0}, "b": {"vector": 0.72, "bm25": 1.0}, "c": {"bm25": 3.0}, "d": {}}
    state = SearchState(
        query=None, analysed=None, cfg=None, rec=None, candidates=mems, explain=evidence,  # type: ignore[arg-type]
        degraded=[], fused={}, ties=tie_order(mems, evidence),
    )  # fmt: skip
    assert state.by_score(["a", "b"], fused) == ["b", "a"]  # the more similar vector first, though "a" < "b"
    # no vector evidence: BM25 decides; no evidence at all: the earlier memory, then the text
    assert state.by_score("dcba", dict.fromkeys("abcd", 1.0)) == ["b", "a", "c", "d"]
    later = {**mems, "e": _mem("e", None, 0.5)}
    assert list(tie_order(later, {})) == ["a", "e", "d", "b", "c"]
