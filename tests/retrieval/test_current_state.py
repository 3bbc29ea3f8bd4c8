"""Current-state retrieval (issue 12): the newest statement about a thing first for present-state
questions, the older ones first for history questions; facts and the raw messages they came from
never contradict each other in the ranking.

The ordering rules are tested on hand-made vectors (so the test says exactly which pairs are
"about the same thing"), the whole pipeline on the real offline model, and the fact link through
the real ingest pipeline with a scripted OpenAI-compatible LLM.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from cognis_memory.domain import Memory, MemoryKind, Owner
from cognis_memory.providers.llms import OpenAICompatibleLLM
from cognis_memory.retrieval.current_state import order_by_state
from cognis_memory.retrieval.query_analysis import analyze_query
from cognis_memory.service import MessageBody
from tests.ingest.test_extraction import model
from tests.llm_server import ScriptedLLMServer

T = "acme"
JAN = datetime(2024, 1, 10, 18, tzinfo=UTC)
GAP = timedelta(minutes=60)


def _vec(*xs: float) -> np.ndarray:
    v = np.array(xs + (0.0,) * (8 - len(xs)), dtype=np.float32)
    return v / np.linalg.norm(v)


def _mem(mid: str, vec: np.ndarray, days: float, speaker: str = "user", **kw) -> Memory:
    """A statement: a raw message unless ``kind`` says otherwise."""
    kw.setdefault("kind", MemoryKind.RAW)
    return Memory(tenant_id=T, user_id="u", content=mid, category="personal_details",  # type: ignore[arg-type]
                  speaker=speaker, embedding=vec, message_time=JAN + timedelta(days=days), id=mid, **kw)  # fmt: skip


def _fact(mid: str, vec: np.ndarray, days: float, **kw) -> Memory:
    return _mem(mid, vec, days, kind=MemoryKind.FACT, **kw)


def _order(mems: list[Memory], intent: str = "present", similar: bool = True) -> tuple[list[str], dict[str, str]]:
    by_id = {m.id: m for m in mems}
    ids = [m.id for m in mems]
    return order_by_state(ids, by_id, intent, head=10, min_similarity=0.5, min_gap=GAP, similar=similar)  # type: ignore[arg-type]


def test_present_puts_the_newest_statement_above_the_ones_it_replaced() -> None:
    home = _vec(1, 0.2)
    mems = [_mem("porto", home, 0), _mem("noise", _vec(0, 1), 5), _mem("lisbon", _vec(1, 0.4), 60),
            _mem("madrid", _vec(1, 0.3), 120)]  # fmt: skip
    order, below = _order(mems)
    assert order == ["madrid", "porto", "noise", "lisbon"]  # the chain porto -> lisbon -> madrid ends at madrid
    assert below == {"porto": "madrid", "lisbon": "madrid"}
    history, _ = _order(mems, "history")
    assert history[0] == "porto"  # the oldest statement first for a history question


def test_no_supersession_across_speakers_within_the_gap_or_between_unrelated_statements() -> None:
    a = _vec(1, 0.2)
    assert _order([_mem("mine", a, 0), _mem("hers", a, 30, speaker="Ines")])[0] == ["mine", "hers"]
    assert _order([_mem("first", a, 0), _mem("elaboration", a, 0.01)])[0] == ["first", "elaboration"]
    assert _order([_mem("dog", a, 0), _mem("job", _vec(0, 0, 1), 30)])[0] == ["dog", "job"]


def test_a_fact_outranks_the_raw_message_it_replaced_whatever_their_similarity() -> None:
    stale_raw = _mem("raw-porto", _vec(1), 0, source_message_ids=["m1"])
    fact = _fact("fact-lisbon", _vec(0, 0, 0, 1), 30, source_message_ids=["m1", "m2"],
                 superseded_sources=["m1"])  # fmt: skip
    order, below = _order([stale_raw, _mem("noise", _vec(0, 1), 3), fact])
    assert order == ["fact-lisbon", "raw-porto", "noise"] and below == {"raw-porto": "fact-lisbon"}
    assert _order([stale_raw, fact], "history")[0] == ["raw-porto", "fact-lisbon"]
    # the link holds beyond the similarity head: a fact ranked 12th still comes before its stale message
    noise = [_mem(f"n{i}", _vec(0, 1, i), 3 + i) for i in range(10)]
    order, _ = _order([stale_raw, *noise, fact])
    assert order[:2] == ["fact-lisbon", "raw-porto"]
    # and it needs no reading of the query: a question without a present-state word gets it too
    order, _ = _order([stale_raw, _mem("noise", _vec(0, 1), 3), fact], similar=False)
    assert order == ["fact-lisbon", "raw-porto", "noise"]


def test_a_history_query_leads_with_the_message_of_the_value_replaced_last() -> None:
    first = _mem("raw-porto", _vec(1), 0, source_message_ids=["m1"])
    second = _mem("raw-lisbon", _vec(1, 0.1), 30, source_message_ids=["m2"])
    fact = _fact("fact-madrid", _vec(0, 0, 1), 60, source_message_ids=["m1", "m2", "m3"],
                 superseded_sources=["m1", "m2"])  # fmt: skip
    order, _ = _order([fact, first, second], "history", similar=False)
    assert order[0] == "raw-lisbon"  # the previous value, not the first one


def test_similarity_never_supersedes_a_fact() -> None:
    """A fact has versions: the extraction model saw each later message beside the facts it resembled and
    chose whether to UPDATE. A similar later message (a friend's new flat) or a later fact about another
    attribute (the commute, not the car) is not a newer statement of it."""
    home = _vec(1, 0.2)
    fact = _fact("fact-home", home, 0)
    order, below = _order([fact, _mem("friend-moved", home, 30)])
    assert order == ["fact-home", "friend-moved"] and below == {}
    order, below = _order([fact, _fact("fact-commute", home, 30)])
    assert order == ["fact-home", "fact-commute"] and below == {}
    # raw messages still supersede each other (no LLM)
    assert _order([_mem("old", home, 0), _mem("new", home, 30)])[0] == ["new", "old"]


def test_present_state_and_history_intent() -> None:
    now = datetime(2024, 6, 1, tzinfo=UTC)
    for q in ("Where do I live now?", "Where do I live?", "Do I still eat meat?", "Do I eat meat anymore?",
              "What is my dog called?", "What have I been reading lately?"):  # fmt: skip
        assert analyze_query(q, now, default_window_days=30).state == "present", q
    for q in ("Where did I live before?", "Which city did I use to live in?", "What was my previous car?",
              "What was Dana's old workout routine?", "Which job did I have previously?"):  # fmt: skip
        assert analyze_query(q, now, default_window_days=30).state == "history", q
    for q in ("What did I cook last week?", "When did I move?", "What did Priya research?"):
        assert analyze_query(q, now, default_window_days=30).state == "none", q
    for q in ("How old is my dog?", "What is in the old town?", "Is my son old enough to drive?"):
        assert not analyze_query(q, now, default_window_days=30).history, q


FILLER = ["Can you suggest a quick pasta recipe?", "The printer at work jammed again.",
          "I watched a documentary about octopuses.", "My phone battery dies so fast lately."]  # fmt: skip


async def test_search_answers_the_present_with_the_newest_statement(make_service) -> None:
    svc = await make_service()
    msgs = [MessageBody(content="I drive an old red Fiat, it breaks down every winter.", timestamp=JAN)]
    msgs += [MessageBody(content=f, timestamp=JAN + timedelta(days=10 + i)) for i, f in enumerate(FILLER)]
    msgs += [
        MessageBody(
            content="I finally sold the Fiat and bought a small electric car.", timestamp=JAN + timedelta(days=60)
        )
    ]
    await svc.add_messages(T, "u", msgs)
    now = JAN + timedelta(days=70)
    for q in ("What car do I drive now?", "What car do I drive?"):
        res = await svc.search(T, "u", q, now=now, explain=True)
        assert "electric car" in res.hits[0].memory.content, q
        assert res.analysis.state == "present"
        stale = "I drive an old red Fiat, it breaks down every winter."
        assert [h.memory.content for h in res.hits].index(stale) == 1  # directly below what replaced it
    old = await svc.search(T, "u", "What car did I drive before?", now=now)
    assert "old red Fiat" in old.hits[0].memory.content
    assert old.hits[0].memory.message_time == JAN  # the older statement, with its date
    plain = await svc.search(T, "u", "What car do I drive now?", now=now, recipe="default-current_state")
    assert "old red Fiat" in plain.hits[0].memory.content  # the leave-one-out recipe shows what the stage changes


async def test_with_an_llm_the_replaced_fact_link_ranks_stale_messages_below_the_fact(make_service) -> None:
    with ScriptedLLMServer(model()) as server:
        svc = await make_service(llm=OpenAICompatibleLLM(server.base_url, "scripted"))
        first = MessageBody(content="I moved to Berlin last month", speaker="Dana", timestamp=JAN)
        r1 = await svc.add_messages(T, "dana", [first])
        for i, f in enumerate(FILLER):
            await svc.add_messages(
                T, "dana", [MessageBody(content=f, speaker="Dana", timestamp=JAN + timedelta(days=5 + i))]
            )
        later = JAN + timedelta(days=90)
        r2 = await svc.add_messages(
            T, "dana", [MessageBody(content="I moved to Lisbon!", speaker="Dana", timestamp=later)]
        )
        assert r2.extraction["UPDATE"] == 1
    facts = [m for m in await svc.stores.memories.list_memories(Owner(T, "dana")) if m.kind is MemoryKind.FACT]
    (fact,) = facts
    assert fact.content == "Dana lives in Lisbon"
    assert fact.superseded_sources == [r1.messages[0].id]  # the message that stated Berlin
    assert fact.metadata == {}  # a field of its own, not a metadata key
    assert fact.message_time == later  # dated by the new evidence
    res = await svc.search(T, "dana", "Where does Dana live now?", now=later + timedelta(days=1), explain=True)
    ids = [h.memory.id for h in res.hits]
    stale = next(h.memory.id for h in res.hits if "Berlin" in h.memory.content)
    assert "Lisbon" in res.hits[0].memory.content
    assert ids.index(fact.id) < ids.index(stale)
    scores = [h.score for h in res.hits]
    assert scores == sorted(scores, reverse=True)  # the reordered ranking keeps non-increasing scores
    before = await svc.search(T, "dana", "Where did Dana live before?", now=later + timedelta(days=1))
    ids = [h.memory.id for h in before.hits]
    assert ids.index(stale) < ids.index(fact.id)
