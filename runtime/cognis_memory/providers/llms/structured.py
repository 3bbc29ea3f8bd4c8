"""What the LLM providers share: the schema-name rule, the configuration-problem prefix, and the
checks of an answer (:func:`validate_json_schema`, a small validator for the subset of JSON Schema
the pipelines' schemas use, so the runtime does not depend on ``jsonschema``; :func:`extract_json_text`
for text answers).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from cognis_memory.providers.base import LLMOutputError

_SCHEMA_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: The start of a DependencyUnavailableError message that retrying will not fix until the settings change.
CONFIG_PREFIX = "configuration problem:"


_TYPE_CHECKS: dict[str, Any] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
    "integer": lambda v: (
        (isinstance(v, int) and not isinstance(v, bool))
        or (isinstance(v, float) and math.isfinite(v) and v.is_integer())
    ),
}


def _json_equal(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but true != 1 and "1" != 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _resolve_ref(ref: str, root: Mapping[str, Any]) -> Mapping[str, Any]:
    if not ref.startswith("#"):
        raise ValueError(f"only local $ref are supported, got {ref!r}")
    node: Any = root
    for part in [p for p in ref[1:].split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            raise ValueError(f"unresolvable $ref {ref!r}")
        node = node[part]
    if not isinstance(node, Mapping):
        raise ValueError(f"$ref {ref!r} does not point to a schema")
    return node


def _validate(
    value: Any,
    schema: Mapping[str, Any] | bool,
    path: str,
    root: Mapping[str, Any],
    out: list[str],
) -> None:
    if schema is True:
        return
    if schema is False:
        out.append(f"{path}: no value is allowed here")
        return
    if "$ref" in schema:
        _validate(value, _resolve_ref(schema["$ref"], root), path, root, out)

    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else list(types)
        unknown = [t for t in names if t not in _TYPE_CHECKS]
        if unknown:
            raise ValueError(f"unsupported type {unknown[0]!r} in schema at {path}")
        if not any(_TYPE_CHECKS[t](value) for t in names):
            out.append(f"{path}: expected {' or '.join(names)}, got {_json_type(value)}")
            return  # the other keywords would only repeat the type error

    if "enum" in schema and not any(_json_equal(value, option) for option in schema["enum"]):
        out.append(f"{path}: {value!r} is not one of {list(schema['enum'])!r}")
    if "const" in schema and not _json_equal(value, schema["const"]):
        out.append(f"{path}: expected {schema['const']!r}, got {value!r}")

    for keyword in ("anyOf", "oneOf"):
        if keyword in schema:
            matches = 0
            for option in schema[keyword]:
                errors: list[str] = []
                _validate(value, option, path, root, errors)
                matches += not errors
            if matches == 0 or (keyword == "oneOf" and matches > 1):
                want = "any" if keyword == "anyOf" else "exactly one"
                out.append(f"{path}: matches {matches} of the {keyword} alternatives, expected {want}")
    for option in schema.get("allOf", ()):
        _validate(value, option, path, root, out)

    if isinstance(value, dict):
        properties: Mapping[str, Any] = schema.get("properties", {})
        for key in schema.get("required", ()):
            if key not in value:
                out.append(f"{path}: missing required property {key!r}")
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in properties:
                _validate(item, properties[key], f"{path}.{key}", root, out)
            elif extra is False:
                out.append(f"{path}: unexpected property {key!r}")
            elif isinstance(extra, Mapping):
                _validate(item, extra, f"{path}.{key}", root, out)
    elif isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            out.append(f"{path}: expected at least {schema['minItems']} items, got {len(value)}")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            out.append(f"{path}: expected at most {schema['maxItems']} items, got {len(value)}")
        items = schema.get("items")
        if isinstance(items, (Mapping, bool)):
            for i, item in enumerate(value):
                _validate(item, items, f"{path}[{i}]", root, out)
    elif isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            out.append(f"{path}: shorter than {schema['minLength']} characters")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            out.append(f"{path}: longer than {schema['maxLength']} characters")
        if "pattern" in schema and re.search(schema["pattern"], value) is None:
            out.append(f"{path}: does not match pattern {schema['pattern']!r}")
    elif _TYPE_CHECKS["number"](value):
        if "minimum" in schema and value < schema["minimum"]:
            out.append(f"{path}: {value} is below the minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            out.append(f"{path}: {value} is above the maximum {schema['maximum']}")


def _json_type(value: Any) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _TYPE_CHECKS[name](value):
            return name
    return type(value).__name__


def validate_json_schema(instance: Any, schema: Mapping[str, Any]) -> list[str]:
    """Errors of ``instance`` against ``schema`` (empty when valid), each prefixed by a ``$.path``.

    Supported keywords: ``type`` (one name or a list, e.g. ``["string", "null"]``; JSON types
    object/array/string/number/integer/boolean/null), ``enum``, ``const``, ``properties``,
    ``required``, ``additionalProperties`` (boolean or schema), ``items`` (one schema),
    ``minItems``/``maxItems``, ``minLength``/``maxLength``, ``pattern``, ``minimum``/``maximum``,
    ``anyOf``/``oneOf``/``allOf`` and local ``$ref`` (``#/$defs/...``). Annotations such as
    ``description``, ``title``, ``default`` or ``format`` are ignored. A schema using an unknown
    ``type`` or a non-local ``$ref`` raises ``ValueError`` (a programming error, not a bad answer).
    """
    errors: list[str] = []
    _validate(instance, schema, "$", schema, errors)
    return errors


def check_schema_name(schema_name: str) -> None:
    if not _SCHEMA_NAME.match(schema_name):
        raise ValueError(f"schema_name must match {_SCHEMA_NAME.pattern}, got {schema_name!r}")


def validated(result: Any, schema: Mapping[str, Any], schema_name: str, source: str) -> dict[str, Any]:
    if not isinstance(result, dict):
        raise LLMOutputError(f"{source}: expected a JSON object for {schema_name}, got {_json_type(result)}")
    errors = validate_json_schema(result, schema)
    if errors:
        shown = "; ".join(errors[:5]) + (f"; and {len(errors) - 5} more" if len(errors) > 5 else "")
        raise LLMOutputError(f"{source}: answer does not match schema {schema_name}: {shown}")
    return result


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
