"""The extraction answers' models: the schemas sent are pinned here, and an answer is accepted exactly when
it matches the schema sent."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel

from cognis_memory.ingest.answers import ChangeVerdict, ExtractedFact, ExtractedFacts, Verdict
from cognis_memory.providers.base import LLMOutputError
from cognis_memory.providers.llms import validated, wire_schema

EXTRACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "subject": {"type": "string"},
                    "attribute": {"type": "string"},
                    "value": {"type": "string"},
                },
                "required": ["subject", "attribute", "value"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["facts"],
    "additionalProperties": False,
}

CHANGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"no_longer_true": {"type": "string", "enum": ["yes", "no"]}},
    "required": ["no_longer_true"],
    "additionalProperties": False,
}


def _property_orders(schema: Any) -> list[list[str]]:
    """The order of the properties of every object, depth first (constrained decoding writes them in it)."""
    if not isinstance(schema, dict):
        return []
    own = [list(schema["properties"])] if "properties" in schema else []
    return own + [order for value in schema.values() for order in _property_orders(value)]


@pytest.mark.parametrize(
    ("model", "expected"), [(ExtractedFacts, EXTRACT_SCHEMA), (ChangeVerdict, CHANGE_SCHEMA)], ids=["extract", "change"]
)
def test_the_schema_sent_is_the_pinned_one(model: type[BaseModel], expected: dict[str, Any]) -> None:
    sent = wire_schema(model)
    assert sent == expected  # no key added or left out (no title, $defs, default, description)
    # the subject and attribute come before the value: a model names what it is about before it says it
    assert _property_orders(sent) == _property_orders(expected)


FACT = {"subject": "speaker", "attribute": "home city", "value": "Berlin"}

CASES: list[tuple[str, type[BaseModel], Any]] = [
    ("facts: minimal", ExtractedFacts, {"facts": []}),
    ("facts: full", ExtractedFacts, {"facts": [FACT, {**FACT, "subject": "Ines"}]}),
    ("facts: missing value", ExtractedFacts, {"facts": [{k: v for k, v in FACT.items() if k != "value"}]}),
    ("facts: extra key", ExtractedFacts, {"facts": [{**FACT, "confidence": 0.9}]}),
    ("facts: top-level extra key", ExtractedFacts, {"facts": [], "note": "none"}),
    ("facts: value not a string", ExtractedFacts, {"facts": [{**FACT, "value": 7}]}),
    ("facts: null subject", ExtractedFacts, {"facts": [{**FACT, "subject": None}]}),
    ("facts: object for array", ExtractedFacts, {"facts": FACT}),
    ("facts: no list", ExtractedFacts, {}),
    ("change: yes", ChangeVerdict, {"no_longer_true": "yes"}),
    ("change: no", ChangeVerdict, {"no_longer_true": "no"}),
    ("change: capitals", ChangeVerdict, {"no_longer_true": "Yes"}),
    ("change: boolean", ChangeVerdict, {"no_longer_true": True}),
    ("change: other key", ChangeVerdict, {"answer": "yes"}),
    ("change: extra key", ChangeVerdict, {"no_longer_true": "no", "reason": "both"}),
]


@pytest.mark.parametrize(("label", "model", "answer"), CASES, ids=[c[0] for c in CASES])
def test_an_answer_is_accepted_exactly_when_it_matches_the_schema_sent(
    label: str, model: type[BaseModel], answer: Any
) -> None:
    matches = jsonschema.Draft202012Validator(wire_schema(model)).is_valid(answer)
    try:
        validated(answer, model, "answer", "test")
        accepted = True
    except LLMOutputError:
        accepted = False
    assert accepted == matches


def test_fact_fields_are_stripped_and_a_blank_one_refused() -> None:
    """Beyond the schema sent (which cannot say "not blank"): a fact with a blank field is an output error."""
    answer = validated({"facts": [{**FACT, "value": "  Berlin\n"}]}, ExtractedFacts, "f", "test")
    assert answer.facts == [ExtractedFact(subject="speaker", attribute="home city", value="Berlin")]
    with pytest.raises(LLMOutputError, match=r"\$\.facts\[1\]\.attribute: Value error, expected a non-empty string"):
        validated({"facts": [FACT, {**FACT, "attribute": " \n"}]}, ExtractedFacts, "f", "test")
    assert validated({"no_longer_true": "no"}, ChangeVerdict, "c", "test").no_longer_true is Verdict.NO
