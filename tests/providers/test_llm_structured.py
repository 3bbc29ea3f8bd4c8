"""The schema sent for a response model (wire_schema) and the check of an answer against it (validated)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from cognis_memory.providers.base import LLMOutputError
from cognis_memory.providers.llms import extract_json_text, validated, wire_schema
from cognis_memory.providers.llms.structured import repair_json_text


class Mood(StrEnum):
    """A docstring pydantic would send as the enum's description."""

    CALM = "calm"
    TENSE = "tense"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Item(Strict):
    """A nested model: inlined, without its docstring."""

    label: str = Field(description="What the item is called.")
    mood: Mood | None


class Answer(Strict):
    """The root's docstring is not sent either."""

    items: list[Item]
    best: Item | None
    count: int
    note: str | None


EXPECTED_ITEM = {
    "type": "object",
    "properties": {
        "label": {"type": "string", "description": "What the item is called."},
        "mood": {"type": ["string", "null"], "enum": ["calm", "tense", None]},
    },
    "required": ["label", "mood"],
    "additionalProperties": False,
}


def test_refs_are_inlined_nullables_are_type_lists_and_python_names_are_not_sent() -> None:
    assert wire_schema(Answer) == {
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": EXPECTED_ITEM},
            "best": {**EXPECTED_ITEM, "type": ["object", "null"]},
            "count": {"type": "integer"},
            "note": {"type": ["string", "null"]},
        },
        "required": ["items", "best", "count", "note"],
        "additionalProperties": False,
    }


def test_each_call_gets_its_own_copy() -> None:
    wire_schema(Answer)["properties"].clear()
    assert list(wire_schema(Answer)["properties"]) == ["items", "best", "count", "note"]


class WithDefault(Strict):
    name: str
    tags: list[str] = []


class ExtraAllowed(BaseModel):
    name: str


class NestedExtraAllowed(Strict):
    inner: ExtraAllowed


class WithLength(Strict):
    name: str = Field(min_length=1)


class WithUnion(Strict):
    value: int | str


class Node(Strict):
    children: list[Node]


class NotAnObject(Strict):
    pass


@pytest.mark.parametrize(
    ("model", "match"),
    [
        (WithDefault, r"\$: every property must be required \(no default\), not \['tags'\]"),
        (ExtraAllowed, r"\$: an object must forbid extra keys"),
        (NestedExtraAllowed, r"\$\.inner: an object must forbid extra keys"),
        (WithLength, r"\$\.name: keyword 'minLength'"),
        (WithUnion, r"\$\.value: the only union sent is a nullable value"),
        (Node, r"\$\.children\[\]: recursive schemas are not sent \(Node -> Node\)"),
    ],
    ids=["default", "extra-allowed", "nested-extra-allowed", "unsupported-keyword", "union", "recursive"],
)
def test_a_model_outside_the_providers_subset_is_a_programming_error(model: type[BaseModel], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        wire_schema(model)


GOOD = {"items": [{"label": "tea", "mood": "calm"}], "best": None, "count": 1, "note": None}


def test_a_valid_answer_becomes_the_model() -> None:
    answer = validated(GOOD, Answer, "answer", "test")
    assert answer == Answer(items=[Item(label="tea", mood=Mood.CALM)], best=None, count=1, note=None)
    assert answer.items[0].mood is Mood.CALM


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ({**GOOD, "count": "1"}, r"\$\.count: Input should be a valid integer, got \"1\""),
        ({**GOOD, "count": True}, r"\$\.count: Input should be a valid integer, got true"),
        ({**GOOD, "count": 1.5}, r"\$\.count: Input should be a valid integer"),
        ({**GOOD, "note": 3}, r"\$\.note: Input should be a valid string, got 3"),
        ({**GOOD, "items": [{"label": "tea", "mood": "happy"}]}, r"\$\.items\[0\]\.mood: Input should be 'calm'"),
        ({**GOOD, "items": [{"label": "tea"}]}, r"\$\.items\[0\]\.mood: Field required"),
        ({**GOOD, "why": "because"}, r"\$\.why: Extra inputs are not permitted, got \"because\""),
        ({**GOOD, "items": {"label": "tea"}}, r"\$\.items: Input should be a valid (array|list)"),
        ({k: v for k, v in GOOD.items() if k != "count"}, r"\$\.count: Field required"),
        (["items"], r"test: expected a JSON object for answer, got array"),
        (None, "expected a JSON object for answer, got null"),
        ({**GOOD, "count": float("nan")}, "answer is not JSON"),
    ],
    ids=[
        "int-as-string",
        "bool-for-int",
        "fraction",
        "int-for-string",
        "enum",
        "missing-nested",
        "extra-key",
        "object-for-array",
        "missing",
        "array",
        "null",
        "nan",
    ],  # fmt: skip
)
def test_a_mismatch_is_an_output_error_naming_the_path(value: Any, match: str) -> None:
    with pytest.raises(LLMOutputError, match=match):
        validated(value, Answer, "answer", "test")


def test_many_mismatches_are_summed_up() -> None:
    value = {"items": [{"label": i, "mood": None} for i in range(7)], "best": None, "count": 0, "note": None}
    with pytest.raises(LLMOutputError, match=r"\$\.items\[4\]\.label: .*; and 2 more$"):
        validated(value, Answer, "answer", "test")


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1}',
        '  {"a": 1}\n',
        '```json\n{"a": 1}\n```',
        '```JSON\n{"a": 1}```',
        '```\n{"a": 1}\n```',
        'Here you go:\n```json\n{"a": 1}\n```\nAnything else?',
    ],
)
def test_extract_json_text_tolerates_fences(text: str) -> None:
    assert extract_json_text(text) == {"a": 1}


@pytest.mark.parametrize("text", ["", "{'a': 1}", '```json\n{"a": \n```', "sure!"])
def test_extract_json_text_rejects_non_json(text: str) -> None:
    with pytest.raises(ValueError):
        extract_json_text(text)


# -- repairing a text answer -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "value", "repairs"),
    [
        ('Here is the JSON:\n{"facts": []}\nHope it helps!', {"facts": []}, ["json_prose"]),
        ('{"facts": [{"content": "a"}]} and {"more": 1}', {"facts": [{"content": "a"}]}, ["json_prose"]),
        ('{"facts": [{"content": "a"},]}', {"facts": [{"content": "a"}]}, ["json_trailing_comma"]),
        (
            '{"facts": [{"content": "a \\"quoted\\" b"}, {"content": "cut her',
            {"facts": [{"content": 'a "quoted" b'}]},
            ["json_truncated"],
        ),
        # the last complete key-value pair is kept too; the reader drops an item it cannot use
        ('```json\n{"decisions": [{"fact": 0}, {"fact": 1, "act', {"decisions": [{"fact": 0}, {"fact": 1}]}, ["json_truncated"]),
        ('[{"a": 1}, {"a": 2', [{"a": 1}], ["json_truncated"]),
        ('{"facts": ["one", "two", "thr', {"facts": ["one", "two"]}, ["json_truncated"]),
        ('{"a": "}]{[", "b": [1, 2]}', {"a": "}]{[", "b": [1, 2]}, []),
    ],
    ids=["prose", "two-objects", "trailing-comma", "cut-in-a-string", "cut-in-a-fence", "top-level-list",
         "cut-string-list", "brackets-in-strings"],
)  # fmt: skip
def test_repair_json_text_recovers_what_was_complete(text: str, value: Any, repairs: list[str]) -> None:
    assert repair_json_text(text) == (value, repairs)


@pytest.mark.parametrize("text", ["no JSON at all", "{", '{"unclosed": "string', "}{"])
def test_repair_json_text_never_invents_a_value(text: str) -> None:
    with pytest.raises(ValueError):
        repair_json_text(text)
