"""The runtime's small JSON Schema validator, cross-checked against the reference ``jsonschema``."""

from __future__ import annotations

from typing import Any

import pytest

from cognis_memory.providers.llms import extract_json_text, validate_json_schema

jsonschema = pytest.importorskip("jsonschema")

CATEGORY = {"type": "string", "enum": ["preferences", "health", "travel"]}
FACTS = {
    "type": "object",
    "$defs": {
        "fact": {
            "type": "object",
            "properties": {
                "content": {"type": "string", "minLength": 1},
                "category": CATEGORY,
                "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                "event_time": {"type": ["string", "null"], "pattern": "^\\d{4}-\\d{2}-\\d{2}"},
                "count": {"type": "integer"},
                "negated": {"type": "boolean"},
            },
            "required": ["content", "category"],
            "additionalProperties": False,
        }
    },
    "properties": {
        "facts": {"type": "array", "items": {"$ref": "#/$defs/fact"}, "maxItems": 3},
        "action": {"anyOf": [{"const": "NONE"}, {"type": "object", "required": ["id"]}]},
        "mode": {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 10}]},
    },
    "required": ["facts"],
}

FACT = {"content": "likes tea", "category": "preferences"}

CASES: list[tuple[str, Any]] = [
    ("minimal", {"facts": []}),
    ("full", {"facts": [{**FACT, "confidence": 0.5, "event_time": "2024-05-01", "count": 3, "negated": False}]}),
    ("null union", {"facts": [{**FACT, "event_time": None}]}),
    ("integer as float", {"facts": [{**FACT, "count": 3.0}]}),
    ("missing required top", {}),
    ("missing required nested", {"facts": [{"content": "x"}]}),
    ("wrong top type", ["facts"]),
    ("array wrong type", {"facts": {"content": "x"}}),
    ("enum", {"facts": [{**FACT, "category": "food"}]}),
    ("additional property", {"facts": [{**FACT, "extra": 1}]}),
    ("string for number", {"facts": [{**FACT, "confidence": "0.5"}]}),
    ("bool is not a number", {"facts": [{**FACT, "confidence": True}]}),
    ("bool is not an integer", {"facts": [{**FACT, "count": False}]}),
    ("float is not an integer", {"facts": [{**FACT, "count": 2.5}]}),
    ("number below minimum", {"facts": [{**FACT, "confidence": -0.1}]}),
    ("number above maximum", {"facts": [{**FACT, "confidence": 1.5}]}),
    ("int for boolean", {"facts": [{**FACT, "negated": 0}]}),
    ("null not allowed", {"facts": [{**FACT, "content": None}]}),
    ("empty string", {"facts": [{**FACT, "content": ""}]}),
    ("pattern", {"facts": [{**FACT, "event_time": "May 1st"}]}),
    ("too many items", {"facts": [FACT, FACT, FACT, FACT]}),
    ("anyOf const", {"facts": [], "action": "NONE"}),
    ("anyOf object", {"facts": [], "action": {"id": "m1"}}),
    ("anyOf neither", {"facts": [], "action": "ADD"}),
    ("oneOf single", {"facts": [], "mode": 3.5 + 10}),
    ("oneOf both", {"facts": [], "mode": 12}),
    ("oneOf none", {"facts": [], "mode": 2.5}),
    ("extra top-level allowed", {"facts": [], "note": "ok"}),
]


@pytest.mark.parametrize(("label", "instance"), CASES, ids=[c[0] for c in CASES])
def test_agrees_with_jsonschema(label: str, instance: Any) -> None:
    reference_valid = jsonschema.Draft202012Validator(FACTS).is_valid(instance)
    errors = validate_json_schema(instance, FACTS)
    assert (errors == []) == reference_valid, errors


def test_errors_name_the_path() -> None:
    errors = validate_json_schema({"facts": [FACT, {"content": "x", "category": "food"}]}, FACTS)
    assert errors == ["$.facts[1].category: 'food' is not one of ['preferences', 'health', 'travel']"]
    assert validate_json_schema({}, FACTS) == ["$: missing required property 'facts'"]


def test_enum_and_const_use_json_equality() -> None:
    assert validate_json_schema(1.0, {"enum": [1]}) == []
    assert validate_json_schema(True, {"enum": [1]}) != []
    assert validate_json_schema(1, {"const": True}) != []
    assert validate_json_schema("1", {"const": 1}) != []


def test_unsupported_schema_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unsupported type"):
        validate_json_schema(1, {"type": "decimal"})
    with pytest.raises(ValueError, match="local"):
        validate_json_schema(1, {"$ref": "https://example.com/schema.json"})


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
