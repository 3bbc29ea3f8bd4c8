"""Real models' answers, as they answered, and what ingest keeps of them (issue 21).

Every answer here was given by a real model on this project's prompts: Qwen2.5-Coder 1.5B and 0.5B
Instruct (GGUF, Q4_K_M) on llama.cpp's ``llama-server`` and llama-cpp-python's server, recorded with
``scripts/bench_updates.py --record`` or the real-model tests, plus the answers issue 21 reported from
the first tries (categories such as "work" or "nursing", targets given as a memory's text). Each failure
mode a real model showed is a case: the reader's repair or drop is checked on the recorded answer
itself, and the guards that need the messages run through the real pipeline against a scripted server
that replays the recorded answer.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cognis_memory.domain import Category, MemoryKind, Owner, Scope
from cognis_memory.ingest.answer_repair import Notes, Unusable, read_decisions, read_facts
from cognis_memory.ingest.answers import Action
from cognis_memory.ingest.extraction import EXTRACT_SYSTEM
from cognis_memory.providers.llms import OpenAICompatibleLLM
from cognis_memory.search_text import search_text
from cognis_memory.service import MessageBody
from tests.llm_server import ScriptedLLMServer

TS = datetime(2023, 3, 19, 9, 0, tzinfo=UTC)


def _facts(value: Any, messages: int = 12) -> tuple[list, Notes]:
    notes = Notes()
    return read_facts(value, notes, messages=messages), notes


def _decisions(value: Any, facts: int, aliases: dict[str, str]) -> tuple[list, Notes]:
    notes = Notes()
    return read_decisions(value, notes, facts=facts, aliases=aliases), notes


# -- what issue 21 saw the first real models answer -------------------------------------------------------
def test_categories_outside_the_enum_are_left_to_the_categorizer_not_fatal() -> None:
    """Issue 21: the 1.5B model answered the categories "work" and "commute", the 0.5B "nursing", "memory" and
    "user" (the issue recorded the categories, not the whole answers: the fact texts here are ours). The
    whole answer used to be refused; now each fact is kept and the categorizer picks."""
    answer = {"facts": [
        {"content": "The user works as a nurse at the city hospital.", "category": "work", "scope": "USER",
         "event_date": None, "sources": [1]},
        {"content": "The user cycles to the hospital.", "category": "commute", "scope": "USER",
         "event_date": None, "sources": [3]},
        {"content": "The user is a nurse.", "category": "nursing", "scope": "user", "event_date": None,
         "sources": [1]},
    ]}  # fmt: skip
    facts, notes = _facts(answer)
    assert [f.content for f in facts] == [a["content"] for a in answer["facts"]]
    assert [f.category for f in facts] == [None, None, None] and facts[2].scope is Scope.USER
    assert notes.repairs == {"category_unknown": 3, "scope_spelling": 1} and not notes.dropped


def test_a_target_given_as_the_memory_text_is_read_as_its_alias() -> None:
    """Issue 21: the 0.5B model gave targets as a memory's text instead of its alias (texts here are ours)."""
    aliases = {"m1": "The user lives in Porto.", "m2": "The user has a dog called Otis."}
    answer = {"decisions": [{"fact": 0, "action": "UPDATE", "target": "The user lives in Porto",
                             "content": "The user lives in Lisbon.", "category": "memory"}]}  # fmt: skip
    decisions, notes = _decisions(answer, 1, aliases)
    assert [(d.action, d.target, d.content, d.category) for d in decisions] == [
        (Action.UPDATE, "m1", "The user lives in Lisbon.", None)
    ]
    assert notes.repairs == {"target_by_text": 1}


def test_a_question_is_not_a_fact() -> None:
    """Issue 21: the 1.5B model ADDed a question as a fact (the issue did not record its text; this one is ours)."""
    facts, notes = _facts({"facts": [
        {"content": "Where can I find a good plumber?", "category": "personal_details", "scope": "USER",
         "event_date": None, "sources": [1]},
    ]})  # fmt: skip
    assert facts == [] and notes.dropped == {"fact_is_a_question": 1}


# -- recorded with scripts/bench_updates.py --record (Qwen2.5-Coder 1.5B on llama-server, json_schema) ------
def test_an_add_that_names_a_target_and_copies_its_text_adds_the_new_fact() -> None:
    """The 1.5B model filled target and content of its ADDs with an existing memory's id and text; an ADD
    uses neither (the new fact is added, the memory named is not touched)."""
    aliases = {"m3": "The user is trying to get rid of fruit flies in the kitchen."}
    answer = {"decisions": [{"fact": 0, "action": "ADD", "target": "m3",
                             "content": "The user is trying to get rid of fruit flies in the kitchen.",
                             "category": "health"}]}  # fmt: skip
    decisions, notes = _decisions(answer, 1, aliases)
    assert [(d.action, d.target, d.content, d.category) for d in decisions] == [(Action.ADD, None, None, None)]
    assert not notes.repairs and not notes.dropped


def test_a_decision_left_out_leaves_its_fact_to_be_added() -> None:
    """The 1.5B model answered one decision for two facts."""
    aliases = {"m3": "The user is getting a cold."}
    decisions, _ = _decisions({"decisions": [{"fact": 0, "action": "ADD", "target": "m3",
                                              "content": "The user is getting a cold.", "category": None}]},
                              2, aliases)  # fmt: skip
    assert [d.fact for d in decisions] == [0]  # the extractor adds fact 1 (test_extraction covers it)


# -- recorded by tests/ingest/test_real_llm.py (Qwen2.5-Coder 0.5B, prompt mode) ------------------------------
def test_a_list_of_strings_is_read_as_facts_without_categories() -> None:
    answer = ["Dana moved to Lisbon last weekend.", "Dana started as a nurse at the city hospital on Monday."]
    facts, notes = _facts(answer, messages=3)
    assert [(f.content, f.category, f.scope, f.sources) for f in facts] == [
        (answer[0], None, Scope.USER, []), (answer[1], None, Scope.USER, [])
    ]  # fmt: skip
    assert notes.repairs == {"envelope_list": 1, "fact_as_text": 2, "category_unknown": 2, "scope_default": 2,
                             "sources_missing": 2}  # fmt: skip


def test_the_extract_prompt_carries_no_example_fact_to_copy() -> None:
    """The 0.5B model answered "Dana is allergic to peanuts", the example the prompt gave, as a fact of a
    conversation that never mentioned it. The prompt describes the form without an example value."""
    assert "allergic" not in EXTRACT_SYSTEM and "e.g. '" not in EXTRACT_SYSTEM and "example '" not in EXTRACT_SYSTEM


@pytest.mark.parametrize("value", [{"decisions": "none"}, "ADD everything!", 7, {"note": "nothing to do"}])
def test_an_answer_with_no_readable_envelope_is_unusable(value: Any) -> None:
    with pytest.raises(Unusable):
        _decisions(value, 1, {})


# -- through the pipeline: the recorded extract answer replayed by a scripted server ---------------------------
SESSION = [  # the 1.5B model's session, as bench_updates.py generated it (seed 1, user000, session 1)
    ("user", "My dog Otis loves chasing the neighbour's cat."),
    ("assistant", "I'd be glad to help you plan it."),
    ("user", "I spent the afternoon reorganising my bookshelf."),
    ("assistant", "That sounds like a good plan!"),
    ("user", "Can you suggest a quick recipe for a weeknight dinner?"),
    ("assistant", "Let me know how it goes!"),
    ("user", "I'm getting a cold, I think."),
    ("assistant", "I'd be glad to help you plan it."),
]
#: its answer, as recorded (the last fact cites the assistant's reply [8] for the user's [7]; the second
#: one is drawn from a question, as the same model did in another session)
RECORDED = {"facts": [
    {"content": "The user's dog Otis loves chasing the neighbour's cat.", "category": "personal_details",
     "scope": "CONTEXT", "event_date": "2023-03-19", "sources": [1]},
    {"content": "The user can suggest a quick recipe for a weeknight dinner.", "category": "preferences",
     "scope": "USER", "event_date": "2023-03-19", "sources": [5]},
    {"content": "The user is getting a cold, I think.", "category": "health", "scope": "CONTEXT",
     "event_date": "2023-03-19", "sources": [8]},
]}  # fmt: skip


async def _replay_session(make_service: Any, user: str, session: list[tuple[str, str]], answer: dict, start: datetime):
    """``session`` (role, text) stored for ``user`` of tenant acme, one message every 2 minutes from ``start``,
    extracted by a scripted server that gives the recorded ``answer`` to every call."""
    with ScriptedLLMServer(lambda schema, body: answer) as server:
        svc = await make_service(llm=OpenAICompatibleLLM(server.base_url, "recorded"))
        r = await svc.add_messages("acme", user, [
            MessageBody(content=text, role=role, timestamp=start + timedelta(minutes=2 * i)) for i, (role, text) in enumerate(session)
        ])  # fmt: skip
    return svc, r


async def test_a_wrong_source_is_corrected_and_a_fact_from_a_question_dropped(make_service) -> None:
    svc, r = await _replay_session(make_service, "u1", SESSION, RECORDED, TS)
    answers = r.extraction["answers"]
    assert answers["valid"] == 1 and answers["repairs"] == {"source_corrected": 1}
    assert answers["dropped"] == {"fact_from_a_question": 1}
    facts = {
        m.content: m for m in await svc.stores.memories.list_memories(Owner("acme", "u1")) if m.kind is MemoryKind.FACT
    }
    assert set(facts) == {RECORDED["facts"][0]["content"], RECORDED["facts"][2]["content"]}
    cold = facts["The user is getting a cold, I think."]
    assert cold.source_message_ids == [r.messages[6].id] and cold.speaker == "user"  # the user's line, not [8]
    assert facts[RECORDED["facts"][0]["content"]].source_message_ids == [r.messages[0].id]
    assert cold.category is Category.HEALTH


async def test_an_update_of_an_unrelated_fact_is_taken_as_an_add(make_service) -> None:
    """Recorded (1.5B, llama-server): the decide answer UPDATEd the dog fact with "The user is thinking about
    learning to bake bread" (cosine 0.16 with all-MiniLM-L6-v2). Applied, it would have retired a good
    fact; the guard adds the new fact and leaves the dog fact current. A real update passes."""
    first = {"facts": [{"content": "The user's dog Otis loves chasing the neighbour's cat.", "category": "relationships",
                        "scope": "USER", "event_date": None, "sources": [1]},
                       {"content": "The user works as a data engineer at Orbital Foods.", "category": "professional",
                        "scope": "USER", "event_date": None, "sources": [2]}]}  # fmt: skip
    second = {"facts": [{"content": "The user is thinking about learning to bake bread.", "category": "hobbies",
                         "scope": "USER", "event_date": None, "sources": [1]},
                        {"content": "The user works at Bluefin Robotics.", "category": "professional",
                         "scope": "USER", "event_date": None, "sources": [2]}]}  # fmt: skip
    answers = iter([first, second])
    prompts: list[str] = []

    def respond(schema: str, body: dict) -> dict:
        if schema == "extracted_facts":
            return next(answers)
        prompt = body["messages"][-1]["content"]
        prompts.append(prompt)
        dog = next(line.split(":")[0].strip(" -") for line in prompt.splitlines() if "Otis" in line)
        job = next(line.split(":")[0].strip(" -") for line in prompt.splitlines() if "Orbital" in line)
        return {"decisions": [
            {"fact": 0, "action": "UPDATE", "target": dog, "content": None, "category": None},
            {"fact": 1, "action": "UPDATE", "target": job, "content": None, "category": None},
        ]}  # fmt: skip

    with ScriptedLLMServer(respond) as server:
        svc = await make_service(llm=OpenAICompatibleLLM(server.base_url, "recorded"))
        await svc.add_messages("acme", "u2", [MessageBody(content="My dog Otis loves chasing the neighbour's cat.", timestamp=TS),
                                              MessageBody(content="I work as a data engineer at Orbital Foods.", timestamp=TS)])  # fmt: skip
        later = TS + timedelta(days=30)
        r = await svc.add_messages("acme", "u2", [MessageBody(content="I'm thinking about learning to bake bread.", timestamp=later),
                                                  MessageBody(content="I just joined Bluefin Robotics!", timestamp=later)])  # fmt: skip
    assert (r.extraction["ADD"], r.extraction["UPDATE"]) == (1, 1)
    assert r.extraction["answers"]["overruled"] == {"update_not_similar": 1}
    current = {
        m.content
        for m in await svc.stores.memories.list_memories(Owner("acme", "u2"))
        if m.kind is MemoryKind.FACT and m.is_current
    }
    assert current == {"The user's dog Otis loves chasing the neighbour's cat.",
                       "The user is thinking about learning to bake bread.", "The user works at Bluefin Robotics."}  # fmt: skip


async def test_an_updates_merged_text_that_repeats_the_old_or_another_memory_keeps_the_new_fact(make_service) -> None:
    """Recorded (1.5B, llama-server, update set): UPDATE answers whose ``content`` was not the merged fact but
    a listed memory's own text: the target's ("Tomas started a new TV series about detectives." as the
    update of that very memory) or another memory's (a keto-diet memory as the content of a job update).
    Stored as given, the new version states the old value, or something else, as current. The fact's own
    text is kept instead (counted under ``overruled``); a merged text that says the fact is used."""
    first = {"facts": [{"content": "The user works as a data engineer at Orbital Foods.", "category": "professional",
                        "scope": "USER", "event_date": None, "sources": [1]},
                       {"content": "The user follows a keto diet.", "category": "dietary",
                        "scope": "USER", "event_date": None, "sources": [2]},
                       {"content": "The user lives in Porto.", "category": "personal_details",
                        "scope": "USER", "event_date": None, "sources": [3]}]}  # fmt: skip
    second = {"facts": [{"content": "The user works at Bluefin Robotics.", "category": "professional",
                         "scope": "USER", "event_date": None, "sources": [1]},
                        {"content": "The user went vegan.", "category": "dietary",
                         "scope": "USER", "event_date": None, "sources": [2]},
                        {"content": "The user moved to Lisbon.", "category": "personal_details",
                         "scope": "USER", "event_date": None, "sources": [3]}]}  # fmt: skip
    answers = iter([first, second])

    def respond(schema: str, body: dict) -> dict:
        if schema == "extracted_facts":
            return next(answers)
        prompt = body["messages"][-1]["content"]

        def alias(word: str) -> str:
            return next(line.split(":")[0].strip(" -") for line in prompt.splitlines() if word in line and "-" in line)

        return {"decisions": [
            {"fact": 0, "action": "UPDATE", "target": alias("Orbital"),
             "content": "The user works as a data engineer at Orbital Foods.", "category": None},  # the target's text
            {"fact": 1, "action": "UPDATE", "target": alias("keto"),
             "content": "The user lives in Porto.", "category": None},  # another memory's text
            {"fact": 2, "action": "UPDATE", "target": alias("Porto"),
             "content": "The user lives in Lisbon.", "category": None},  # a merge that says the fact
        ]}  # fmt: skip

    with ScriptedLLMServer(respond) as server:
        svc = await make_service(llm=OpenAICompatibleLLM(server.base_url, "recorded"))
        await svc.add_messages("acme", "u3", [MessageBody(content=t, timestamp=TS) for t in (
            "I work as a data engineer at Orbital Foods.", "I'm on a keto diet.", "I live in Porto.")])  # fmt: skip
        later = TS + timedelta(days=30)
        r = await svc.add_messages("acme", "u3", [MessageBody(content=t, timestamp=later) for t in (
            "I just joined Bluefin Robotics!", "I went vegan last month.", "We moved to Lisbon.")])  # fmt: skip
    assert r.extraction["UPDATE"] == 3
    assert r.extraction["answers"]["overruled"] == {"update_content_is_the_target": 1, "update_content_not_the_fact": 1}
    current = {
        m.content
        for m in await svc.stores.memories.list_memories(Owner("acme", "u3"))
        if m.kind is MemoryKind.FACT and m.is_current
    }
    assert current == {"The user works at Bluefin Robotics.", "The user went vegan.", "The user lives in Lisbon."}


# -- first person, and UPDATEs of a memory that is no longer what the model saw ----------------------------
#: Recorded (1.5B, llama-server, update set): the extract answer for a user's session copied four lines as
#: they were said; one of them ("Today ... was my first day at Bluefin Robotics!") has its "my" mid-sentence,
#: and the last cites the assistant's reply [10] for the user's [9].
BLUEFIN_SESSION = [
    ("user", "My friend recommended a podcast about history."),
    ("assistant", "Good question, let me explain."),
    ("user", "My roommate is vegan and cooks amazing dinners."),
    ("assistant", "Good question, let me explain."),
    ("user", "I'm thinking about learning to bake bread."),
    ("assistant", "That sounds lovely."),
    ("user", "Today was my first day at Bluefin Robotics!"),
    ("assistant", "Good question, let me explain."),
    ("user", "I tried a new pasta place downtown."),
    ("assistant", "Here are a few ideas you could try."),
]
BLUEFIN_ANSWER = {"facts": [
    {"content": "The user's friend recommended a podcast about history.", "category": "preferences",
     "scope": "USER", "event_date": "2023-05-09", "sources": [1]},
    {"content": "My roommate is vegan and cooks amazing dinners.", "category": "relationships",
     "scope": "USER", "event_date": "2023-05-09", "sources": [3]},
    {"content": "I'm thinking about learning to bake bread.", "category": "preferences",
     "scope": "USER", "event_date": "2023-05-09", "sources": [5]},
    {"content": "Today [9 May 2023] was my first day at Bluefin Robotics!", "category": "professional",
     "scope": "USER", "event_date": "2023-05-09", "sources": [7]},
    {"content": "I tried a new pasta place downtown.", "category": "preferences",
     "scope": "USER", "event_date": "2023-05-09", "sources": [10]},
]}  # fmt: skip


async def test_a_fact_in_the_first_person_is_found_as_its_speaker_s_wherever_the_pronoun_is(make_service) -> None:
    """A fact such as "I'm thinking about learning to bake bread." says nothing about whose it is:
    the fact is stored as the model wrote it, and its speaker goes in front of its search text (what is embedded
    and indexed), as in a raw memory; a third-person fact's search text is its content."""
    may9 = datetime(2023, 5, 9, 23, 0, tzinfo=UTC)
    svc, r = await _replay_session(make_service, "u4", BLUEFIN_SESSION, BLUEFIN_ANSWER, may9)
    assert r.extraction["answers"]["repairs"] == {"first_person": 4, "source_corrected": 1}
    facts = {m.content: m for m in await svc.stores.memories.list_memories(Owner("acme", "u4"))
             if m.kind is MemoryKind.FACT}  # fmt: skip
    assert set(facts) == {d["content"] for d in BLUEFIN_ANSWER["facts"]}
    assert {search_text(m) for m in facts.values()} == {
        "The user's friend recommended a podcast about history.",
        "user: My roommate is vegan and cooks amazing dinners.",
        "user: I'm thinking about learning to bake bread.",
        "user: Today [9 May 2023] was my first day at Bluefin Robotics!",
        "user: I tried a new pasta place downtown.",
    }
    pasta = facts["I tried a new pasta place downtown."]
    assert pasta.source_message_ids == [r.messages[8].id] and pasta.speaker == "user"
    # the vectors are those of the search text, not of the content alone
    (vector,), _ = await svc.encoder.encode_async([search_text(pasta)])
    assert float(vector @ pasta.embedding) > 0.999


@pytest.mark.parametrize(
    ("text", "first_person"),
    [("The user moved to the US.", False), ("The user works for ME Bank.", False), ("Myra lives in Ourense.", False),
     ("We adopted a greyhound.", True), ("The dog sleeps next to me.", True), ("Our flat is in Alfama.", True)],
)  # fmt: skip
def test_first_person_words_are_pronouns_not_letters(text: str, first_person: bool) -> None:
    from cognis_memory.search_text import FIRST_PERSON

    assert bool(FIRST_PERSON.search(text)) is first_person


def _porto_then(second: dict, decide: Any, *, between: Any = None) -> Any:
    """A user who said "I live in Porto", then a batch whose facts the scripted model decides with
    ``decide(prompt)``; ``between(svc, porto_id)`` runs while the decide call is waiting (another writer)."""
    import asyncio
    import threading

    first = {"facts": [{"content": "The user lives in Porto.", "category": "personal_details", "scope": "USER",
                        "event_date": None, "sources": [1]}]}  # fmt: skip
    answers = iter([first, second])
    asked, go_on = threading.Event(), threading.Event()

    def respond(schema: str, body: dict) -> dict:
        if schema == "extracted_facts":
            return next(answers)
        prompt = body["messages"][-1]["content"]
        porto = next(line.split(":")[0].strip(" -") for line in prompt.splitlines() if "Porto" in line)
        asked.set()
        go_on.wait(30)
        return decide(porto)

    async def run(make_service: Any) -> tuple[Any, Any, str]:
        with ScriptedLLMServer(respond) as server:
            svc = await make_service(llm=OpenAICompatibleLLM(server.base_url, "recorded"))
            await svc.add_messages("acme", "u5", [MessageBody(content="I live in Porto.", timestamp=TS)])
            porto_id = next(m.id for m in await svc.stores.memories.list_memories(Owner("acme", "u5"))
                            if m.kind is MemoryKind.FACT)  # fmt: skip
            later = TS + timedelta(days=30)
            ingest = asyncio.create_task(svc.add_messages("acme", "u5", [
                MessageBody(content=t, timestamp=later) for t in ("We moved to Lisbon.", "Our flat in Lisbon is in Alfama.")]))  # fmt: skip
            await asyncio.to_thread(asked.wait, 30)
            if between is not None:
                await between(svc, porto_id)
            go_on.set()
            return await ingest, svc, porto_id

    return run


LISBON = {"facts": [{"content": "The user lives in Lisbon.", "category": "personal_details", "scope": "USER",
                     "event_date": None, "sources": [1]},
                    {"content": "The user's flat in Lisbon is in the Alfama district.", "category": "personal_details",
                     "scope": "USER", "event_date": None, "sources": [2]}]}  # fmt: skip


async def test_a_second_update_of_the_same_memory_in_one_answer_is_an_add(make_service) -> None:
    """The 1.5B model, guard off, UPDATEd one memory with two facts of one answer (7 times on 3 users): applied
    in turn, the second would retire the first's new value. The first UPDATE stands, the second is added."""
    run = _porto_then(LISBON, lambda porto: {"decisions": [
        {"fact": 0, "action": "UPDATE", "target": porto, "content": None, "category": None},
        {"fact": 1, "action": "UPDATE", "target": porto, "content": None, "category": None}]})  # fmt: skip
    r, svc, porto_id = await run(make_service)
    assert (r.extraction["ADD"], r.extraction["UPDATE"]) == (1, 1)
    assert r.extraction["answers"]["overruled"].get("target_already_changed") == 1
    chain = await svc.history("acme", "u5", porto_id)
    assert [m.content for m in chain] == ["The user lives in Porto.", "The user lives in Lisbon."]
    current = {m.content for m in await svc.stores.memories.list_memories(Owner("acme", "u5"))
               if m.kind is MemoryKind.FACT and m.is_current}  # fmt: skip
    assert current == {"The user lives in Lisbon.", "The user's flat in Lisbon is in the Alfama district."}


async def test_an_update_of_a_memory_edited_meanwhile_goes_on_its_newest_version(make_service) -> None:
    """While the model decided, the user edited the memory it is about to UPDATE (PATCH): the UPDATE is written
    on top of the edit, so the chain keeps both and the model's value is current; nothing is lost."""

    async def edit(svc: Any, porto_id: str) -> None:
        await svc.update_memory("acme", "u5", porto_id, content="The user lives in Porto, near the river.")

    run = _porto_then(LISBON, lambda porto: {"decisions": [
        {"fact": 0, "action": "UPDATE", "target": porto, "content": None, "category": None},
        {"fact": 1, "action": "ADD", "target": None, "content": None, "category": None}]}, between=edit)  # fmt: skip
    r, svc, porto_id = await run(make_service)
    assert (r.extraction["ADD"], r.extraction["UPDATE"], r.extraction["conflicts"]) == (1, 1, 0)
    chain = await svc.history("acme", "u5", porto_id)
    assert [m.content for m in chain] == [
        "The user lives in Porto.",
        "The user lives in Porto, near the river.",
        "The user lives in Lisbon.",
    ]
    assert [m.is_current for m in chain] == [False, False, True]


async def test_an_update_of_a_memory_deleted_meanwhile_keeps_the_new_value(make_service) -> None:
    """While the model decided, the memory it UPDATEs was deleted: the deletion stands (nothing brings the old
    value back) and the new value is added as a fact of its own (counted as a conflict)."""

    async def delete(svc: Any, porto_id: str) -> None:
        await svc.delete_memory("acme", "u5", porto_id)

    run = _porto_then(LISBON, lambda porto: {"decisions": [
        {"fact": 0, "action": "UPDATE", "target": porto, "content": None, "category": None},
        {"fact": 1, "action": "ADD", "target": None, "content": None, "category": None}]}, between=delete)  # fmt: skip
    r, svc, porto_id = await run(make_service)
    assert (r.extraction["ADD"], r.extraction["UPDATE"], r.extraction["conflicts"]) == (1, 0, 1)
    chain = await svc.history("acme", "u5", porto_id)
    assert [m.content for m in chain][0] == "The user lives in Porto." and not any(m.is_current for m in chain)
    current = {m.content for m in await svc.stores.memories.list_memories(Owner("acme", "u5"))
               if m.kind is MemoryKind.FACT and m.is_current}  # fmt: skip
    assert current == {"The user lives in Lisbon.", "The user's flat in Lisbon is in the Alfama district."}


async def test_a_session_only_fact_does_not_change_a_memory_every_session_sees(make_service) -> None:
    """A CONTEXT message ("this week I'm staying in Paris", one trip's session) decided as an UPDATE of the
    user's home would rewrite what every session sees: it is added in its session instead, the home stays."""
    porto = {"facts": [{"content": "The user lives in Porto.", "category": "personal_details", "scope": "USER",
                        "event_date": None, "sources": [1]}]}  # fmt: skip
    paris = {"facts": [{"content": "The user lives in Paris this week.", "category": "personal_details",
                        "scope": "USER", "event_date": None, "sources": [1]}]}  # fmt: skip
    answers = iter([porto, paris])

    def respond(schema: str, body: dict) -> dict:
        if schema == "extracted_facts":
            return next(answers)
        home = next(
            line.split(":")[0].strip(" -") for line in body["messages"][-1]["content"].splitlines() if "Porto" in line
        )
        return {"decisions": [{"fact": 0, "action": "UPDATE", "target": home, "content": None, "category": None}]}

    with ScriptedLLMServer(respond) as server:
        svc = await make_service(llm=OpenAICompatibleLLM(server.base_url, "scripted"))
        await svc.add_messages("acme", "u9", [MessageBody(content="I live in Porto.", timestamp=TS, session_id="s1")])
        r = await svc.add_messages("acme", "u9", [MessageBody(content="This week I'm staying in Paris.", session_id="trip",
                                                              scope=Scope.CONTEXT, timestamp=TS + timedelta(days=3))])  # fmt: skip
    assert (r.extraction["ADD"], r.extraction["UPDATE"]) == (1, 0)
    assert r.extraction["answers"]["overruled"] == {"scope_of_context_messages": 1, "context_fact_on_user_memory": 1}
    facts = {
        m.content: m for m in await svc.stores.memories.list_memories(Owner("acme", "u9")) if m.kind is MemoryKind.FACT
    }
    assert facts["The user lives in Porto."].is_current and facts["The user lives in Porto."].version == 1
    assert (
        facts["The user lives in Paris this week."].scope,
        facts["The user lives in Paris this week."].session_id,
    ) == (
        Scope.CONTEXT,
        "trip",
    )
