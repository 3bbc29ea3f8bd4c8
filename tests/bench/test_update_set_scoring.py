"""How ``cognis_dev.update_set`` credits search hits with the turns they state, that its generator is
deterministic, and what :func:`cognis_dev.update_set.fact_audit` counts in a store holding hand-written facts."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

from cognis_dev import update_set as bu

from cognis_memory.domain import Category, Memory, MemoryKind

#: sha256 of the JSON of ``generate(5, 1)`` without the ``others`` field of its turns
GENERATED_5_1 = "2852d2a03d13584ed64e02871e808337fb171ac0cd2ac5ad5dfac9f483ba1764"

TURN_OF = {"m-porto": "t-porto", "m-lisbon": "t-lisbon", "m-chat": "t-chat", "m-dog": "t-dog"}
VALUES_OF = {"t-porto": ["Porto"], "t-lisbon": ["Lisbon"], "t-dog": ["Biscuit"]}


def memory(
    content: str, sources: list[str], *, kind: MemoryKind = MemoryKind.FACT, stale: list[str] | None = None
) -> Memory:
    return Memory(
        tenant_id="t",
        user_id="u",
        content=content,
        category=Category.PERSONAL_DETAILS,
        kind=kind,
        source_message_ids=sources,
        superseded_sources=stale or [],
    )


def test_a_fact_is_credited_with_a_cited_turn_only_when_its_text_mentions_the_value_the_turn_states() -> None:
    assert bu.stated_turns(memory("Maya has a dog", ["m-porto"]), TURN_OF, VALUES_OF) == set()
    assert bu.stated_turns(memory("Maya lives in Porto", ["m-porto"]), TURN_OF, VALUES_OF) == {"t-porto"}
    both = memory("Maya lives in Porto with her dog Biscuit", ["m-porto", "m-dog", "m-chat", "m-unknown"])
    assert bu.stated_turns(both, TURN_OF, VALUES_OF) == {"t-porto", "t-dog"}  # chit-chat never credited
    assert bu.stated_turns(memory("Maya mentioned Porto", ["m-chat"]), TURN_OF, VALUES_OF) == set()


def test_a_raw_memory_is_credited_with_its_own_message_whatever_it_says() -> None:
    for text, source, turn in (("Nice weather today", "m-chat", "t-chat"), ("I live in Porto", "m-porto", "t-porto")):
        assert bu.stated_turns(memory(text, [source], kind=MemoryKind.RAW), TURN_OF, VALUES_OF) == {turn}


def test_a_facts_superseded_sources_stay_uncredited_even_when_it_mentions_their_value() -> None:
    moved = memory("Maya moved from Porto to Lisbon", ["m-porto", "m-lisbon"], stale=["m-porto"])
    assert bu.stated_turns(moved, TURN_OF, VALUES_OF) == {"t-lisbon"}
    assert (
        bu.stated_turns(memory("Maya lives in Lisbon", ["m-lisbon"], stale=["m-lisbon"]), TURN_OF, VALUES_OF) == set()
    )


def test_score_counts_only_what_the_hits_state() -> None:
    q = bu.QuestionItem("current", "home", "Where does Maya live now?", gold=["t-lisbon"], stale=["t-porto"])
    hits = [memory("Maya has a dog", ["m-lisbon"]), memory("I live in Porto", ["m-porto"], kind=MemoryKind.RAW),
            memory("Maya lives in Lisbon", ["m-lisbon"])]  # fmt: skip
    ranked = [bu.stated_turns(m, TURN_OF, VALUES_OF) for m in hits]
    assert ranked == [set(), {"t-porto"}, {"t-lisbon"}]
    assert bu.score(q, ranked) == {"hit@1": 0.0, "recall@5": 1.0, "stale_above": 1.0}
    ranked = [bu.stated_turns(m, TURN_OF, VALUES_OF) for m in [hits[2], hits[1]]]
    assert bu.score(q, ranked) == {"hit@1": 1.0, "recall@5": 1.0, "stale_above": 0.0}


def test_the_generator_draws_the_same_set_and_records_each_distractors_statement() -> None:
    histories = bu.generate(5, 1)
    dump = [dataclasses.asdict(h) for h in histories]
    for d in dump:
        for t in d["turns"]:
            del t["others"]
    assert hashlib.sha256(json.dumps(dump, sort_keys=True).encode()).hexdigest() == GENERATED_5_1
    attributes = {a.name: a for a in bu.ATTRIBUTES}
    distractors = [t for h in histories for t in h.turns if t.others]
    assert distractors
    for h in histories:
        for t in h.turns:
            assert not (t.states and t.others)
            for st in t.others:
                name, value = st.split("=", 1)
                planned = {s.split("=", 1)[1] for u in h.turns for s in u.states if s.startswith(f"{name}=")}
                assert value in t.content and value not in planned
                assert any(f.format(v=value) == t.content for f in attributes[name].others)


async def test_fact_audit_counts_what_the_facts_say_of_the_statements(tmp_path: Path) -> None:
    from cognis_dev.bench_common import quality_service

    histories = bu.generate(2, 1)
    maps = {h.user_id: {f"msg-{t.id}": t.id for t in h.turns} for h in histories}
    svc = quality_service(tmp_path / "m.db", cache=False)
    await svc.start(run_worker=False)
    try:
        await svc.stores.memories.insert_memories(await _fixture_facts(svc, histories))
        plain = await bu.fact_audit(svc, histories)
        audit = await bu.fact_audit(svc, histories, maps=maps)
    finally:
        await svc.close()
    old = {"changed_attributes": {"updated": 1, "both_current": 0, "new_only": 0, "old_only": 0, "neither": 5},
           "fact_versions": 8, "current_facts": 6, "unplanned_current_facts": 4}  # fmt: skip
    assert plain == old
    statements = sum(len(t.states) for h in histories for t in h.turns)
    messages = sum(len(h.turns) for h in histories)
    assert audit == {
        **old,
        "statements": statements,
        "statements_with_fact": 4,
        "statement_coverage": round(4 / statements, 4),
        "unstated_facts": 2,
        "unstated_facts_per_message": round(2 / messages, 4),
        "about_others_facts": 2,
        "unchanged_retired": 1,
    }


async def _fixture_facts(svc: Any, histories: list[bu.UserHistory]) -> list[Memory]:
    """Facts for the first two users of ``generate(2, 1)``, embedded; which statements they cover is spelled out."""
    u0, u1 = histories
    assert [t.content for t in u0.turns if t.id in ("u000-s1-t00", "u000-s3-t04", "u000-s5-t06", "u000-s3-t06")] == [
        "My dog Otis loves chasing the neighbour's cat.",
        "I work as a data engineer at Orbital Foods.",
        "Home for me is Ghent; I've been here since university.",
        "I accepted the offer from Bluefin Robotics and handed in my notice.",
    ]
    assert next(t for t in u0.turns if t.id == "u000-s3-t02").others == ["drink=green tea"]
    assert next(t for t in u1.turns if t.id == "u001-s7-t00").others == ["home=Lisbon"]

    def fact(h: bu.UserHistory, content: str, *turns: str, **kw: Any) -> Memory:
        return Memory(tenant_id=bu.TENANT, user_id=h.user_id, content=content, category=Category.PERSONAL_DETAILS,
                      kind=MemoryKind.FACT, source_message_ids=[f"msg-{t}" for t in turns], **kw)  # fmt: skip

    otis = fact(u0, "User has a dog named Otis", "u000-s1-t00")  # covers pet=Otis
    orbital = fact(u0, "User works at Orbital Foods", "u000-s3-t04", is_current=False)  # covers employer=Orbital Foods
    bluefin = orbital.next_version(  # covers employer=Bluefin Robotics; not Orbital Foods again
        content="User works at Bluefin Robotics",
        source_message_ids=["msg-u000-s3-t04", "msg-u000-s5-t06"],
        superseded_sources=["msg-u000-s3-t04"],
    )
    ghent = fact(u0, "User lives in Ghent", "u000-s3-t06", is_current=False)  # covers home=Ghent, then deleted
    memories = [
        otis,
        orbital,
        bluefin,
        ghent,
        fact(u0, "User's friend swears by green tea", "u000-s3-t02"),  # about others
        fact(u0, "User reorganised their bookshelf", "u000-s1-t02"),  # unstated
        fact(u0, "User drives a car", "u000-s2-t04"),  # unstated; cites car=a red Toyota Corolla, does not cover it
        fact(u1, "Tomas's cousin moved to Lisbon for a job", "u001-s7-t00"),  # about others
    ]
    full, short = await svc.encoder.encode_async([m.content for m in memories])
    for m, f, s in zip(memories, full, short, strict=True):
        m.embedding, m.embedding_short = f, s
    return [*memories, ghent.tombstone()]
