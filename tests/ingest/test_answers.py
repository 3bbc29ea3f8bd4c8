"""The extraction answers' models: the schemas sent are the hand-written ones they replaced, and an
answer is accepted exactly when it matches the schema sent."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel

from cognis_memory.domain import Category, Scope
from cognis_memory.ingest.answers import Action, Decision, Decisions, ExtractedFact, ExtractedFacts
from cognis_memory.providers.base import LLMOutputError
from cognis_memory.providers.llms import validated, wire_schema

# The schemas ingest/extraction.py declared by hand until the answers became pydantic models
# (EXTRACT_SCHEMA and DECIDE_SCHEMA as of 276f986), copied unchanged but for the one field added since:
# each fact's ``sources`` (the numbers of the messages it was said in), required like every field.
EXTRACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "content": {"type": "string"},
                    "category": {"type": "string", "enum": [c.value for c in Category]},
                    "scope": {"type": "string", "enum": [s.value for s in Scope]},
                    "event_date": {"type": ["string", "null"]},
                    "sources": {"type": "array", "items": {"type": "integer"}},
                },
                "required": ["content", "category", "scope", "event_date", "sources"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["facts"],
    "additionalProperties": False,
}

DECIDE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decisions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "fact": {"type": "integer"},
                    "action": {"type": "string", "enum": [a.value for a in Action]},
                    "target": {"type": ["string", "null"]},
                    "content": {"type": ["string", "null"]},
                    "category": {"type": ["string", "null"], "enum": [*(c.value for c in Category), None]},
                },
                "required": ["fact", "action", "target", "content", "category"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["decisions"],
    "additionalProperties": False,
}


def _property_orders(schema: Any) -> list[list[str]]:
    """The order of the properties of every object, depth first (constrained decoding writes them in it)."""
    if not isinstance(schema, dict):
        return []
    own = [list(schema["properties"])] if "properties" in schema else []
    return own + [order for value in schema.values() for order in _property_orders(value)]


@pytest.mark.parametrize(
    ("model", "expected"), [(ExtractedFacts, EXTRACT_SCHEMA), (Decisions, DECIDE_SCHEMA)], ids=["extract", "decide"]
)
def test_the_schema_sent_is_the_hand_written_one(model: type[BaseModel], expected: dict[str, Any]) -> None:
    sent = wire_schema(model)
    assert sent == expected  # no key added or left out (no title, $defs, default, description)
    assert _property_orders(sent) == _property_orders(expected)


FACT = {
    "content": "Dana lives in Berlin", "category": "personal_details", "scope": "USER", "event_date": None, "sources": [1]
}  # fmt: skip
DECISION = {"fact": 0, "action": "UPDATE", "target": "m1", "content": "Dana lives in Lisbon", "category": None}

CASES: list[tuple[str, type[BaseModel], Any]] = [
    ("facts: minimal", ExtractedFacts, {"facts": []}),
    ("facts: full", ExtractedFacts, {"facts": [FACT, {**FACT, "scope": "CONTEXT", "event_date": "2024-03-01"}]}),
    ("facts: missing event_date", ExtractedFacts, {"facts": [{k: v for k, v in FACT.items() if k != "event_date"}]}),
    ("facts: extra key", ExtractedFacts, {"facts": [{**FACT, "confidence": 0.9}]}),
    ("facts: top-level extra key", ExtractedFacts, {"facts": [], "note": "none"}),
    ("facts: bad category", ExtractedFacts, {"facts": [{**FACT, "category": "food"}]}),
    ("facts: lower-case scope", ExtractedFacts, {"facts": [{**FACT, "scope": "user"}]}),
    ("facts: content not a string", ExtractedFacts, {"facts": [{**FACT, "content": 7}]}),
    ("facts: null content", ExtractedFacts, {"facts": [{**FACT, "content": None}]}),
    ("facts: object for array", ExtractedFacts, {"facts": FACT}),
    ("facts: date as number", ExtractedFacts, {"facts": [{**FACT, "event_date": 20240301}]}),
    ("facts: missing sources", ExtractedFacts, {"facts": [{k: v for k, v in FACT.items() if k != "sources"}]}),
    ("facts: source as string", ExtractedFacts, {"facts": [{**FACT, "sources": ["1"]}]}),
    ("facts: source not a list", ExtractedFacts, {"facts": [{**FACT, "sources": 1}]}),
    ("facts: no sources", ExtractedFacts, {"facts": [{**FACT, "sources": []}]}),
    ("decide: minimal", Decisions, {"decisions": []}),
    ("decide: full", Decisions, {"decisions": [DECISION, {**DECISION, "category": "travel"}]}),
    ("decide: all nulls", Decisions, {"decisions": [{**DECISION, "target": None, "content": None}]}),
    ("decide: index as float", Decisions, {"decisions": [{**DECISION, "fact": 1.0}]}),
    ("decide: fractional index", Decisions, {"decisions": [{**DECISION, "fact": 1.5}]}),
    ("decide: index as string", Decisions, {"decisions": [{**DECISION, "fact": "0"}]}),
    ("decide: index as boolean", Decisions, {"decisions": [{**DECISION, "fact": False}]}),
    ("decide: unknown action", Decisions, {"decisions": [{**DECISION, "action": "MERGE"}]}),
    ("decide: lower-case action", Decisions, {"decisions": [{**DECISION, "action": "update"}]}),
    ("decide: missing target", Decisions, {"decisions": [{k: v for k, v in DECISION.items() if k != "target"}]}),
    ("decide: bad category", Decisions, {"decisions": [{**DECISION, "category": "food"}]}),
    ("decide: extra key", Decisions, {"decisions": [{**DECISION, "reason": "moved"}]}),
    ("decide: no list", Decisions, {}),
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


def test_a_float_index_is_read_as_the_integer() -> None:
    answer = validated({"decisions": [{**DECISION, "fact": 2.0}]}, Decisions, "memory_decisions", "test")
    assert answer.decisions == [
        Decision(fact=2, action=Action.UPDATE, target="m1", content="Dana lives in Lisbon", category=None)
    ]
    assert type(answer.decisions[0].fact) is int


def test_fact_content_is_stripped_and_a_blank_one_refused() -> None:
    """Beyond the schema sent (which cannot say "not blank"): a fact without content is an output error."""
    answer = validated({"facts": [{**FACT, "content": "  Dana lives in Berlin\n"}]}, ExtractedFacts, "f", "test")
    assert answer.facts == [
        ExtractedFact(
            content="Dana lives in Berlin",
            category=Category.PERSONAL_DETAILS,
            scope=Scope.USER,
            event_date=None,
            sources=[1],
        )
    ]
    with pytest.raises(LLMOutputError, match=r"\$\.facts\[1\]\.content: Value error, expected a non-empty string"):
        validated({"facts": [FACT, {**FACT, "content": " \n"}]}, ExtractedFacts, "f", "test")
