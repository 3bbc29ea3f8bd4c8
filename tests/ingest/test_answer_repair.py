"""What ingest keeps of an extraction model's answers, and how its writes hold up when other writers act.

The readers (:func:`read_facts`, :func:`read_verdict`) are checked on answers in the shapes small models
give (a bare list, "Yes.", a boolean, a fact given as text); the rules that need the store (a stored fact
edited or deleted while the model was asked about it, two new facts that would replace one stored fact)
run through the real pipeline against a scripted server.
"""

from __future__ import annotations

import asyncio
import re
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cognis_memory.domain import MemoryKind, Owner
from cognis_memory.ingest.answer_repair import Notes, Unusable, read_facts, read_verdict
from cognis_memory.ingest.fact_extraction import EXTRACT_SYSTEM
from cognis_memory.providers.llms import OpenAICompatibleLLM
from cognis_memory.service import MessageBody
from tests.llm_server import ScriptedLLMServer

TS = datetime(2023, 3, 19, 9, 0, tzinfo=UTC)


def _facts(value: Any) -> tuple[list[tuple[str, str, str]], Notes]:
    notes = Notes()
    return [(f.subject, f.attribute, f.value) for f in read_facts(value, notes)], notes


def _verdict(value: Any) -> tuple[bool, Notes]:
    notes = Notes()
    return read_verdict(value, notes), notes


def test_facts_are_read_item_by_item() -> None:
    facts, notes = _facts({"facts": [
        {"subject": "speaker", "attribute": "home city", "value": "Lisbon"},
        "Maya lives in Lisbon",  # no attribute to compare it by
        {"subject": "speaker", "attribute": "", "value": "Lisbon"},
        {"subject": "speaker", "attribute": "plan", "value": "Can you help me pack?"},
        {"attribute": "dog", "value": "Pixel", "confidence": 0.9},
        {"subject": "Ines", "attribute": "wedding", "value": 2025},
    ]})  # fmt: skip
    assert facts == [("speaker", "home city", "Lisbon"), ("", "dog", "Pixel"), ("Ines", "wedding", "2025")]
    assert notes.dropped == {"fact_as_text": 1, "fact_without_attribute": 1, "fact_is_a_question": 1}
    assert notes.repairs == {"subject_missing": 1, "extra_key": 1}


def test_a_bare_list_or_another_single_list_is_the_list_of_facts() -> None:
    item = {"subject": "speaker", "attribute": "diet", "value": "vegan"}
    assert _facts([item])[0] == [("speaker", "diet", "vegan")]
    assert _facts({"items": [item]})[0] == [("speaker", "diet", "vegan")]


@pytest.mark.parametrize("value", [None, "no facts", 3, {"a": 1, "b": 2}])
def test_an_answer_with_no_readable_list_is_unusable(value: Any) -> None:
    with pytest.raises(Unusable):
        _facts(value)


@pytest.mark.parametrize(
    ("value", "said", "repairs"),
    [
        ({"no_longer_true": "yes"}, True, {}),
        ({"no_longer_true": "no"}, False, {}),
        ({"no_longer_true": "No."}, False, {"verdict_spelling": 1}),
        ({"no_longer_true": False}, False, {"verdict_as_boolean": 1}),
        ({"answer": "YES"}, True, {"envelope_key": 1, "verdict_spelling": 1}),
        ("yes", True, {"envelope_single": 1}),
        ({"no_longer_true": "yes", "why": "moved"}, True, {"extra_key": 1}),
    ],
)
def test_a_verdict_is_read_in_the_spellings_models_use(value: Any, said: bool, repairs: dict[str, int]) -> None:
    got, notes = _verdict(value)
    assert got is said and notes.repairs == repairs


@pytest.mark.parametrize("value", [{"no_longer_true": "maybe"}, {"a": "yes", "b": "no"}, None, 1.5])
def test_a_verdict_that_is_neither_yes_nor_no_is_unusable(value: Any) -> None:
    with pytest.raises(Unusable):
        _verdict(value)


def test_the_extract_prompt_example_is_not_about_anything_the_tests_or_benchmarks_state() -> None:
    """The example in the extract prompt teaches the shape (and a negation, and someone else); a small model
    copies examples, so its values must not be ones a real conversation here states."""
    assert "Leo" in EXTRACT_SYSTEM and "bakery" in EXTRACT_SYSTEM
    from cognis_dev.update_set import ATTRIBUTES, NAMES

    values = {v.lower() for a in ATTRIBUTES for v in a.values} | {n.lower() for n in NAMES}
    assert not any(re.search(rf"\b{re.escape(v)}\b", EXTRACT_SYSTEM.lower()) for v in values)


# -- through the pipeline: another writer acts while the model is asked ---------------------------------------
_MESSAGE = re.compile(r"^Message from .*\):\n(.*)\Z", re.MULTILINE | re.DOTALL)
PORTO, LISBON, ALFAMA = "I live in Porto.", "We moved to Lisbon.", "Our flat in Lisbon is in Alfama."
FACTS = {PORTO: ("home city", "Porto"), LISBON: ("home city", "Lisbon"), ALFAMA: ("home city", "Alfama in Lisbon")}


def _porto_then(second: list[str], verdict: str, *, between: Any = None) -> Any:
    """A user who said "I live in Porto", then a batch of ``second`` messages; every change check is answered
    ``verdict``; ``between(svc, porto_id)`` runs while the first change check waits (another writer)."""
    asked, go_on = threading.Event(), threading.Event()

    def respond(schema: str, body: dict) -> dict:
        prompt = body["messages"][-1]["content"]
        if schema == "extracted_facts":
            m = _MESSAGE.search(prompt)
            attribute, value = FACTS[m.group(1) if m else ""]
            return {"facts": [{"subject": "speaker", "attribute": attribute, "value": value}]}
        asked.set()
        go_on.wait(30)
        return {"no_longer_true": verdict}

    async def run(make_service: Any) -> tuple[Any, Any, str]:
        with ScriptedLLMServer(respond) as server:
            svc = await make_service(llm=OpenAICompatibleLLM(server.base_url, "scripted"))
            await svc.add_messages("acme", "u5", [MessageBody(content=PORTO, timestamp=TS)])
            porto_id = next(m.id for m in await svc.stores.memories.list_memories(Owner("acme", "u5"))
                            if m.kind is MemoryKind.FACT)  # fmt: skip
            later = TS + timedelta(days=30)
            ingest = asyncio.create_task(
                svc.add_messages("acme", "u5", [MessageBody(content=t, timestamp=later) for t in second])
            )
            await asyncio.to_thread(asked.wait, 30)
            if between is not None:
                await between(svc, porto_id)
            go_on.set()
            return await ingest, svc, porto_id

    return run


async def _current_facts(svc: Any) -> set[str]:
    return {m.content for m in await svc.stores.memories.list_memories(Owner("acme", "u5"))
            if m.kind is MemoryKind.FACT and m.is_current}  # fmt: skip


async def test_a_stored_fact_two_new_facts_would_replace_is_replaced_once(make_service) -> None:
    """Two facts of one batch both said to make the same stored fact no longer true: applied in turn, the second
    would retire the first's new value. The first replaces it, the second is added."""
    run = _porto_then([LISBON, ALFAMA], "yes")
    r, svc, porto_id = await run(make_service)
    assert (r.extraction["ADD"], r.extraction["UPDATE"], r.extraction["change_checks"]) == (1, 1, 2)
    assert r.extraction["answers"]["overruled"] == {"target_already_replaced": 1}
    chain = await svc.history("acme", "u5", porto_id)
    assert [m.content for m in chain] == ["The user's home city: Porto", "The user's home city: Lisbon"]
    assert await _current_facts(svc) == {"The user's home city: Lisbon", "The user's home city: Alfama in Lisbon"}


async def test_a_replacement_of_a_fact_edited_meanwhile_goes_on_its_newest_version(make_service) -> None:
    """While the model was asked, the user edited the fact (PATCH): the replacement is written on top of the
    edit, so the chain keeps both and the new value is current; nothing is lost."""

    async def edit(svc: Any, porto_id: str) -> None:
        await svc.update_memory("acme", "u5", porto_id, content="The user's home city: Porto, near the river")

    r, svc, porto_id = await _porto_then([LISBON], "yes", between=edit)(make_service)
    assert (r.extraction["ADD"], r.extraction["UPDATE"], r.extraction["conflicts"]) == (0, 1, 0)
    chain = await svc.history("acme", "u5", porto_id)
    assert [m.content for m in chain] == [
        "The user's home city: Porto",
        "The user's home city: Porto, near the river",
        "The user's home city: Lisbon",
    ]
    assert [m.is_current for m in chain] == [False, False, True]


async def test_a_replacement_of_a_fact_deleted_meanwhile_keeps_the_new_value(make_service) -> None:
    """While the model was asked, the fact it would replace was deleted: the deletion stands (nothing brings
    the old value back) and the new value is added as a fact of its own (counted as a conflict)."""

    async def delete(svc: Any, porto_id: str) -> None:
        await svc.delete_memory("acme", "u5", porto_id)

    r, svc, porto_id = await _porto_then([LISBON], "yes", between=delete)(make_service)
    assert (r.extraction["ADD"], r.extraction["UPDATE"], r.extraction["conflicts"]) == (0, 0, 1)  # added, as a conflict
    chain = await svc.history("acme", "u5", porto_id)
    assert chain[0].content == "The user's home city: Porto" and not any(m.is_current for m in chain)
    assert await _current_facts(svc) == {"The user's home city: Lisbon"}


async def test_a_no_keeps_both_facts_current(make_service) -> None:
    r, svc, porto_id = await _porto_then([LISBON], "no")(make_service)
    assert (r.extraction["ADD"], r.extraction["UPDATE"], r.extraction["changes_said"]) == (1, 0, 0)
    assert await _current_facts(svc) == {"The user's home city: Porto", "The user's home city: Lisbon"}
