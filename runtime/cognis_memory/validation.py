"""Checks of caller input shared by every entry point (HTTP API, CLI, Python, MCP).

Each check raises :class:`~cognis_memory.errors.InvalidInputError` naming the field, so every
entry point answers a bad value the same way (422 over HTTP).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from .domain import as_utc
from .errors import InvalidInputError

MIN_TIME = datetime(1900, 1, 1, tzinfo=UTC)
MAX_TIME = datetime(2200, 1, 1, tzinfo=UTC)
MAX_METADATA_DEPTH = 16
MAX_QUERY_CHARS = 4096

#: Identifiers (tenant, user, session, agent, client message, memory and job ids): 1-128 ASCII
#: characters, letters, digits and ``. _ - : @ + | =``, starting with a letter, digit or ``_``.
#: Case-sensitive and opaque, like the caller's own keys. ASCII only, so that no id can look like
#: another (``аlice`` with a Cyrillic а, or ``àlice``, are refused rather than being users of
#: their own), and no id can be a path segment of its own (``/``, ``.``, ``..``).
ID_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._:@+|=-]{0,127}")
ID_RULE = "must be 1-128 characters: ASCII letters, digits and . _ - : @ + | = (starting with a letter, digit or _)"
MAX_SPEAKER_CHARS = 200


def check_id(field_name: str, value: str | None, *, required: bool = True) -> None:
    if value is None:
        if required:
            raise InvalidInputError(field_name, "is required")
        return
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value):
        raise InvalidInputError(field_name, ID_RULE)


def check_name(field_name: str, value: str, max_chars: int = MAX_SPEAKER_CHARS) -> str:
    """A display name (a speaker): 1-``max_chars`` characters of any script, but no control, format
    (bidi overrides, zero-width) or separator characters other than the plain space, and no
    surrounding whitespace, so a name reads as what it is wherever it is shown."""
    if not isinstance(value, str) or not 0 < len(value) <= max_chars:
        raise InvalidInputError(field_name, f"must be 1-{max_chars} characters")
    if any(unicodedata.category(ch)[0] in "CZ" and ch != " " for ch in value) or value != value.strip():
        raise InvalidInputError(
            field_name, "must not contain control, format or bidi characters, or surrounding whitespace"
        )
    return value


def check_int(field_name: str, value: Any, low: int, high: int) -> int:
    """An integer (not a bool, not a float, not a numeric string) in ``[low, high]``."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInputError(field_name, f"must be an integer between {low} and {high}")
    return value


def check_query(field_name: str, value: Any) -> str:
    """Search text: not empty, at most MAX_QUERY_CHARS characters, storable Unicode."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(field_name, "must not be empty")
    if len(value) > MAX_QUERY_CHARS:
        raise InvalidInputError(field_name, f"must be at most {MAX_QUERY_CHARS} characters")
    return check_text(field_name, value, 4 * MAX_QUERY_CHARS)


def check_time(field_name: str, value: datetime | None) -> datetime | None:
    if value is None:
        return None
    v = as_utc(value)
    if not MIN_TIME <= v <= MAX_TIME:
        raise InvalidInputError(field_name, f"must be between {MIN_TIME.date()} and {MAX_TIME.date()}")
    return v


def metadata_depth(value: Any, limit: int = MAX_METADATA_DEPTH + 1) -> int:
    """Levels of nested objects/arrays in a JSON-like value, counted up to ``limit`` (no recursion)."""
    depth, level = 0, [value]
    while depth < limit:
        level = [x for x in level if isinstance(x, (dict, list))]
        if not level:
            break
        depth += 1
        level = [v for x in level for v in (x.values() if isinstance(x, dict) else x)]
    return depth


def unstorable_text(value: Any) -> str | None:
    """Why a JSON-like value cannot be stored by every store (a NUL or an unpaired surrogate in a key
    or string), or None. Iterative, so any depth is safe."""
    stack = [value]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            stack.extend(x.keys())
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
        elif isinstance(x, str):
            if "\x00" in x:
                return "must not contain NUL characters"
            try:
                x.encode("utf-8")
            except UnicodeEncodeError:
                return "is not valid Unicode (unpaired surrogate)"
    return None


def check_text(field_name: str, value: str, max_bytes: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(field_name, "must not be empty")
    if "\x00" in value:
        raise InvalidInputError(field_name, "must not contain NUL characters")
    try:
        size = len(value.encode("utf-8", errors="strict"))
    except UnicodeEncodeError:
        raise InvalidInputError(field_name, "is not valid Unicode (unpaired surrogate)") from None
    if size > max_bytes:
        raise InvalidInputError(field_name, f"is {size} bytes; the limit is {max_bytes} bytes")
    return value


def enum_value(field_name: str, enum: type, value: Any) -> Any:
    try:
        return enum(value)
    except ValueError:
        allowed = ", ".join(e.value for e in enum)
        raise InvalidInputError(field_name, f"unknown value {str(value)[:64]!r}; allowed: {allowed}") from None


def enum_set(field_name: str, enum: type, values: Sequence[Any] | None) -> frozenset[Any] | None:
    if values is None:
        return None
    return frozenset(enum_value(field_name, enum, v) for v in values)
