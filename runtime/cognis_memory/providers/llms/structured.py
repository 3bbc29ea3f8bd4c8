"""What the LLM providers share: the schema-name rule, the configuration-problem prefix, the schema
sent for a response model (:func:`wire_schema`), the check of an answer against that model
(:func:`validated`), :func:`extract_json_text` for text answers, :func:`schema_instructions` for
servers that take no schema, and :func:`repair_json_text` for answers that are JSON only after a
repair (prose around the object, a truncated answer, trailing commas).

The schema sent is derived from the pydantic model, never written by hand, and has to satisfy both
providers:

* OpenAI structured outputs with ``strict: true`` accept a subset of JSON Schema: the root is an
  object (not ``anyOf``), every object lists all its properties in ``required`` and sets
  ``additionalProperties: false``, an optional value is a union with ``null``
  (https://platform.openai.com/docs/guides/structured-outputs#supported-schemas; Azure OpenAI
  documents the same subset: https://learn.microsoft.com/en-us/azure/ai-services/openai/how-to/structured-outputs).
* Bedrock Converse takes any JSON Schema as ``toolSpec.inputSchema.json`` whose top level type is
  ``object`` (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ToolInputSchema.html).

:func:`wire_schema` rewrites what ``model_json_schema()`` adds around that (``title``s, ``$defs`` and
``$ref``, nullable fields as ``anyOf``) and refuses a model outside the subset (a field with a
default, extra keys allowed, a keyword outside :data:`WIRE_KEYWORDS`) with ``ValueError``: a
programming error, caught by the tests, never a bad answer.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from cognis_memory.providers.base import AnswerT, LLMOutputError

_SCHEMA_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: The start of a DependencyUnavailableError message that retrying will not fix until the settings change.
CONFIG_PREFIX = "configuration problem:"

#: The JSON Schema keywords a sent schema may use: the ones both providers document and the
#: pipelines' answers need. Another keyword is added here after checking both providers' rules.
WIRE_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "items", "enum", "description"})


def wire_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema sent to the provider for answers of ``model`` (a fresh copy).

    From ``model.model_json_schema()``: every ``$ref`` is inlined (the ``$defs`` go), a nullable
    field (``anyOf`` of a type and ``null``) becomes ``"type": [type, "null"]`` (with ``null``
    added to its ``enum``, if any), and ``title``s (Python names) are dropped, as are the
    ``description``s pydantic takes from class docstrings (the root's and the inlined classes':
    what the model is told is in the prompts); a ``Field(description=...)`` stays.
    """
    return copy.deepcopy(_wire_schema(model))


@functools.cache
def _wire_schema(model: type[BaseModel]) -> dict[str, Any]:
    # built once per model: pydantic's schema generation costs milliseconds, every call sends it
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})
    schema.pop("description", None)  # the model's docstring
    out = _wire(schema, defs, (), "$")
    if out.get("type") != "object":
        raise ValueError(f"{model.__name__}: the root of an answer must be an object")
    return out


def _wire(node: Mapping[str, Any], defs: Mapping[str, Any], refs: tuple[str, ...], path: str) -> dict[str, Any]:
    node = dict(node)
    ref = node.pop("$ref", None)
    if ref is not None:
        name = str(ref).removeprefix("#/$defs/")
        if name in refs:
            raise ValueError(f"{path}: recursive schemas are not sent ({' -> '.join((*refs, name))})")
        target = {k: v for k, v in defs[name].items() if k not in ("title", "description")}  # the class's
        return _wire({**target, **node}, defs, (*refs, name), path)
    options = node.pop("anyOf", None)
    if options is None:
        return _keywords(node, defs, refs, path)
    nullable = [option for option in options if option != {"type": "null"}]
    if len(options) != 2 or len(nullable) != 1:
        raise ValueError(f"{path}: the only union sent is a nullable value (X | None)")
    inner = _wire(nullable[0], defs, refs, path)
    if not isinstance(inner.get("type"), str):
        raise ValueError(f"{path}: a nullable value needs one plain type")
    inner["type"] = [inner["type"], "null"]
    if "enum" in inner:
        inner["enum"] = [*inner["enum"], None]
    return {**inner, **_keywords(node, defs, refs, path)}  # the field's own keywords (a description)


def _keywords(node: Mapping[str, Any], defs: Mapping[str, Any], refs: tuple[str, ...], path: str) -> dict[str, Any]:
    if node.get("type") == "object":
        properties = list(node.get("properties", {}))
        optional = [name for name in properties if name not in node.get("required", [])]
        if optional:
            raise ValueError(f"{path}: every property must be required (no default), not {optional}")
        if node.get("additionalProperties") is not False:
            raise ValueError(f"{path}: an object must forbid extra keys (model_config extra='forbid')")
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title":
            continue
        if key not in WIRE_KEYWORDS:
            raise ValueError(f"{path}: keyword {key!r} is not among the ones sent to the providers")
        if key == "properties":
            out[key] = {name: _wire(sub, defs, refs, f"{path}.{name}") for name, sub in value.items()}
        elif key == "items":
            out[key] = _wire(value, defs, refs, f"{path}[]")
        else:
            out[key] = value
    return out


def check_schema_name(schema_name: str) -> None:
    if not _SCHEMA_NAME.match(schema_name):
        raise ValueError(f"schema_name must match {_SCHEMA_NAME.pattern}, got {schema_name!r}")


_JSON_TYPES = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number"}


def validated(result: Any, response_model: type[AnswerT], schema_name: str, source: str) -> AnswerT:
    """``result`` (a parsed JSON answer) as ``response_model``, or :class:`LLMOutputError` naming each
    path that does not match.

    Validated in pydantic's strict JSON mode, so the answer is held to JSON's types as the sent
    schema states them: an enum is one of its values, a string is never a number, an integer never
    a string or a boolean (a model may let ``3.0`` count as an integer, as JSON Schema does).
    """
    if not isinstance(result, dict):
        got = _JSON_TYPES.get(type(result), "null" if result is None else type(result).__name__)
        raise LLMOutputError(f"{source}: expected a JSON object for {schema_name}, got {got}", answer=result)
    try:
        text = json.dumps(result, allow_nan=False)
    except ValueError as exc:  # NaN or Infinity, which Python's JSON parser lets through
        raise LLMOutputError(f"{source}: answer is not JSON: {exc}", text=str(result)[:100_000]) from exc
    try:
        return response_model.model_validate_json(text, strict=True)
    except ValidationError as exc:
        errors = [_describe(error) for error in exc.errors(include_url=False)]
        shown = "; ".join(errors[:5]) + (f"; and {len(errors) - 5} more" if len(errors) > 5 else "")
        raise LLMOutputError(f"{source}: answer does not match schema {schema_name}: {shown}", answer=result) from exc


def _describe(error: Mapping[str, Any]) -> str:
    """One pydantic error as ``$.path: message``, with the offending value unless a key is missing."""
    path = "$" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"])
    if error["type"] == "missing":
        return f"{path}: {error['msg']}"
    return f"{path}: {error['msg']}, got {json.dumps(error.get('input'), default=str)[:100]}"


_FENCED = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\r?\n?(.*?)```", re.DOTALL)


def extract_json_text(content: str) -> Any:
    """Parse a model's text answer as JSON, tolerating a Markdown code fence around it.

    Tries the whole text first, then the first fenced block (```json ... ``` or ``` ... ```).
    Raises ``ValueError`` when neither parses.
    """
    text = content.strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    match = _FENCED.search(text)
    if match:
        try:
            return json.loads(match.group(1).strip())
        except json.JSONDecodeError as exc:
            raise ValueError(f"fenced block is not valid JSON: {exc}") from exc
    raise ValueError(f"not valid JSON: {text[:200]!r}")


def schema_instructions(schema: Mapping[str, Any]) -> str:
    """What a prompt says about the answer's shape when the server is not given the schema (or may
    ignore it): the JSON Schema itself, compact, and the rule to answer with JSON only."""
    return (
        "Answer with one JSON object and nothing else (no prose, no Markdown), matching this JSON Schema: "
        + json.dumps(schema, separators=(",", ":"))
    )


#: what :func:`repair_json_text` did, by name (the counters of the ingest answer report use them)
REPAIR_PROSE, REPAIR_TRUNCATED, REPAIR_TRAILING_COMMA = "json_prose", "json_truncated", "json_trailing_comma"


def repair_json_text(content: str) -> tuple[Any, list[str]]:
    """The JSON value in a model's text answer that :func:`extract_json_text` refused, and the repairs it
    took: the first object or array found in prose (``json_prose``), trailing commas dropped
    (``json_trailing_comma``), and an answer cut off in the middle closed after its last complete
    element (``json_truncated``; what was cut is lost, what came before is kept).

    Raises ``ValueError`` when no JSON object or array can be recovered. Never invents a value: a
    repair only removes text or closes brackets that were opened.
    """
    text = content.strip()
    match = _FENCED.search(text)
    if match:
        text = match.group(1).strip()
    elif text.startswith("```"):  # a fence the cut-off answer never closed
        text = text.split("\n", 1)[1] if "\n" in text else ""
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        raise ValueError(f"no JSON object in the answer: {content[:200]!r}")
    start = min(starts)
    repairs = [REPAIR_PROSE] if text[:start].strip() else []
    scan = _scan(text, start)
    if scan.end is not None:
        body = text[start : scan.end]
        if text[scan.end :].strip():
            repairs = [REPAIR_PROSE]
        value = _loads_lenient(body, repairs)
        if value is not _NOTHING:
            return value, repairs
    # unclosed: the answer was cut off; close it after its last complete element
    for cut, stack in reversed(scan.cuts[-200:]):
        body = text[start:cut].rstrip().rstrip(",") + "".join("}" if c == "{" else "]" for c in reversed(stack))
        value = _loads_lenient(body, repairs)
        if value is not _NOTHING:
            return value, [*repairs, REPAIR_TRUNCATED]
    raise ValueError(f"no complete JSON value in the answer: {content[:200]!r}")


_NOTHING = object()


def _loads_lenient(body: str, repairs: list[str]) -> Any:
    try:
        return json.loads(body)
    except json.JSONDecodeError:
        pass
    fixed = _without_trailing_commas(body)
    if fixed != body:
        try:
            value = json.loads(fixed)
        except json.JSONDecodeError:
            return _NOTHING
        repairs.append(REPAIR_TRAILING_COMMA)
        return value
    return _NOTHING


class _Scan:
    __slots__ = ("cuts", "end")

    def __init__(self) -> None:
        self.end: int | None = None  # index after the bracket closing the first value
        self.cuts: list[tuple[int, tuple[str, ...]]] = []  # (index after a complete element, open brackets)


def _scan(text: str, start: int) -> _Scan:
    """Bracket depth outside strings from ``start``: where the first value closes, and the points after
    each complete element inside it (with the brackets still open there)."""
    out, in_string, escaped = _Scan(), False, False
    stack: list[str] = []
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
                if stack and stack[-1] == "[":
                    out.cuts.append((i + 1, tuple(stack)))
            continue
        if ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append(ch)
        elif ch in "}]":
            if not stack or (stack[-1] == "{") != (ch == "}"):
                return out  # a stray bracket: nothing after it is trusted
            stack.pop()
            if not stack:
                out.end = i + 1
                return out
            out.cuts.append((i + 1, tuple(stack)))
        elif ch == ",":
            out.cuts.append((i, tuple(stack)))
    return out


def _without_trailing_commas(body: str) -> str:
    out: list[str] = []
    in_string = escaped = False
    for ch in body:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "}]":
            while out and out[-1].isspace():
                out.pop()
            if out and out[-1] == ",":
                out.pop()
        out.append(ch)
    return "".join(out)
