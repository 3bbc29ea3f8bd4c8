"""Checks of caller input shared by every entry point (HTTP API, CLI, Python, MCP).

Each check raises :class:`~cognis_memory.errors.InvalidInputError` naming the field, so every
entry point answers a bad value the same way (422 over HTTP). The field rules (ids, names, text,
times, enums) come first; then the checks of whole requests that
:class:`~cognis_memory.service.MemoryService` runs before it touches anything: the owner
(:func:`check_owner`), submitted messages (:func:`check_messages`), a search's filter
(:func:`check_filter`) and recipe (:func:`check_recipe`), and a memory update (:func:`check_update`).

A message has one shape on the way in: :class:`~cognis_memory.message_body.MessageBody`, the HTTP
API's request model, which every entry point submits (the API, the CLI, the HTTP clients, Python
callers of the service), and :func:`check_message` maps it to the
:class:`~cognis_memory.domain.Message` the stores keep.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
import warnings
from collections.abc import Sequence
from datetime import UTC, datetime
from enum import Enum
from typing import Any, ClassVar

from .domain import RESERVED_METADATA_KEYS, Category, Message, Owner, Scope, as_utc
from .errors import InvalidInputError
from .message_body import MessageBody
from .retrieval.recipes import RetrievalConfig, get_recipe
from .search_filter import FILTER_NAMES, ColumnFilter, Match, MemoryFilter, SearchFilter
from .stores.records import MEMORY_FILTERS, Column

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
MAX_METADATA_JSON_CHARS = 8192


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


def context_query(query: Any, message: Any) -> str:
    """The text of a context request: ``query``, or ``message``, its deprecated name (both may be given when
    they are equal). Checked as :func:`check_query` checks a search's, under the name that was given."""
    if query is None and message is None:
        raise InvalidInputError("query", "is required")
    if query is not None and message is not None and query != message:
        raise InvalidInputError("message", "differs from query; send query only (message is its deprecated name)")
    return check_query("query", query) if query is not None else check_query("message", message)


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
    or string, a NaN or an infinity, which Python's JSON parser accepts but JSON, PostgreSQL's jsonb and
    OpenSearch do not), or None. Iterative, so any depth is safe."""
    stack = [value]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            stack.extend(x.keys())
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
        elif isinstance(x, float) and not math.isfinite(x):
            return "must not hold NaN or Infinity (JSON has no such number)"
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


def enum_value(field_name: str, enum: type[Enum], value: Any) -> Any:
    try:
        return enum(value)
    except ValueError:
        allowed = ", ".join(e.value for e in enum)
        raise InvalidInputError(field_name, f"unknown value {str(value)[:64]!r}; allowed: {allowed}") from None


def enum_set(field_name: str, enum: type[Enum], values: Sequence[Any] | None) -> frozenset[Any] | None:
    if values is None:
        return None
    return frozenset(enum_value(field_name, enum, v) for v in values)


# -- whole requests ------------------------------------------------------------------------------


def check_owner(tenant_id: str, user_id: str) -> Owner:
    check_id("tenant_id", tenant_id)
    check_id("user_id", user_id)
    return Owner(tenant_id, user_id)


def check_metadata(field_name: str, metadata: Any) -> dict[str, Any]:
    """A message's metadata: an object, no reserved key, at most MAX_METADATA_DEPTH deep, storable
    by every store, at most 8 KB as JSON. Returns a copy."""
    if not isinstance(metadata, dict):
        raise InvalidInputError(field_name, "must be an object")
    for k in metadata:  # in the caller's order, so the error names the first one
        if k in RESERVED_METADATA_KEYS:
            raise InvalidInputError(f"{field_name}.{k}", "is reserved for the service; use another key")
    if metadata_depth(metadata) > MAX_METADATA_DEPTH:
        raise InvalidInputError(field_name, f"is nested deeper than {MAX_METADATA_DEPTH} levels")
    if (why := unstorable_text(metadata)) is not None:  # PostgreSQL jsonb refuses both (a 500 if let through)
        raise InvalidInputError(field_name, why)
    if len(json.dumps(metadata, default=str)) > MAX_METADATA_JSON_CHARS:
        raise InvalidInputError(field_name, "is larger than 8 KB")
    return dict(metadata)


def check_message(owner: Owner, i: int, m: MessageBody, now: datetime, *, max_bytes: int) -> Message:
    """The ``i``-th submitted message as the :class:`~cognis_memory.domain.Message` to store. Every field is
    checked here too, so a body built without pydantic's checks (``model_construct``, as the CLI's import
    does) is refused naming the field like any other."""
    f = f"messages[{i}]"
    content = check_text(f"{f}.content", m.content, max_bytes)
    check_id(f"{f}.client_message_id", m.client_message_id, required=False)
    check_id(f"{f}.session_id", m.session_id, required=False)
    check_id(f"{f}.agent_id", m.agent_id, required=False)
    if m.speaker is not None:
        check_name(f"{f}.speaker", m.speaker)
        check_text(f"{f}.speaker", m.speaker, 4 * MAX_SPEAKER_CHARS)
    scope = enum_value(f"{f}.scope", Scope, m.scope)
    if scope is Scope.CONTEXT and not m.session_id:
        raise InvalidInputError(f"{f}.session_id", "is required for CONTEXT scope")
    metadata = check_metadata(f"{f}.metadata", m.metadata)
    return Message(
        tenant_id=owner.tenant_id,
        user_id=owner.user_id,
        content=content,
        timestamp=check_time(f"{f}.timestamp", m.timestamp) or now,
        speaker=m.speaker,
        role=m.role,
        session_id=m.session_id,
        agent_id=m.agent_id,
        client_message_id=m.client_message_id,
        metadata=metadata,
        scope=scope,
    )


def check_messages(
    owner: Owner, messages: Sequence[MessageBody], now: datetime, *, max_count: int, max_bytes: int
) -> list[Message]:
    """A request's messages (1 to ``max_count``), each checked, as the messages to store."""
    if not messages:
        raise InvalidInputError("messages", "must contain at least one message")
    if len(messages) > max_count:
        raise InvalidInputError("messages", f"at most {max_count} per request")
    return [check_message(owner, i, m, now, max_bytes=max_bytes) for i, m in enumerate(messages)]


class FilterRequest:
    """Deprecated: give a :class:`~cognis_memory.search_filter.MemoryFilter` instead. A search's filter
    by name (any field of ``MemoryFilter``), with the caller's values (a list for a set, enum members or
    their values); a field left out or None does not filter. :func:`check_filter` takes either."""

    __slots__ = ("values",)

    #: every filter a search takes (the fields of ``MemoryFilter``)
    NAMES: ClassVar[tuple[str, ...]] = FILTER_NAMES

    def __init__(self, **values: Any) -> None:
        warnings.warn(
            "FilterRequest is deprecated; pass filter=MemoryFilter(...) (cognis_memory.search_filter)",
            DeprecationWarning,
            stacklevel=2,
        )
        self.values: dict[str, Any] = {name: v for name, v in values.items() if v is not None}

    def __repr__(self) -> str:
        return f"FilterRequest({', '.join(f'{k}={v!r}' for k, v in self.values.items())})"


def _check_column_filter(c: Column, f: ColumnFilter, value: Any) -> Any:
    """The checked filter ``f`` on the column ``c``: a set of its enum's members (ANY_OF), or one id (EQUALS)."""
    if f.match is Match.ANY_OF:
        assert c.enum is not None  # Column refuses an ANY_OF filter on any other kind
        return enum_set(f.name, c.enum, value)
    check_id(f.name, value)
    return value


def check_filter(owner: Owner, request: MemoryFilter | FilterRequest | None = None) -> SearchFilter:
    """What a search may see, from the caller's filter: the session and time rules, and each column
    filter of the record (:data:`~cognis_memory.stores.records.MEMORY_FILTERS`) by its rule. Enum values
    may be given as their strings and a set as any collection; the result holds members and frozensets."""
    if isinstance(request, FilterRequest):
        given = request.values
        unknown = sorted(set(given) - set(FILTER_NAMES))
        if unknown:
            raise InvalidInputError(unknown[0], f"unknown filter; the filters are {', '.join(FILTER_NAMES)}")
    else:
        given = {n: v for n in FILTER_NAMES if (v := getattr(request, n, None)) is not None}
    session_id = given.get("session_id")
    check_id("session_id", session_id, required=False)
    columns = {f.name: _check_column_filter(c, f, given[f.name]) for c, f in MEMORY_FILTERS if f.name in given}
    t_from, t_to = check_time("time_from", given.get("time_from")), check_time("time_to", given.get("time_to"))
    if t_from and t_to and t_from > t_to:
        raise InvalidInputError("time_from", "must not be after time_to")
    return SearchFilter(owner=owner, session_id=session_id, time_from=t_from, time_to=t_to, **columns)


def check_recipe(recipe: str | None) -> RetrievalConfig | None:
    """The configuration of a named recipe, or None for none."""
    if not recipe:
        return None
    return get_recipe(recipe)


def check_update(
    *, content: str | None, category: Category | str | None, event_time: datetime | None, max_bytes: int
) -> dict[str, Any]:
    """The fields a memory update changes (content, category, event_time); at least one."""
    changes: dict[str, Any] = {}
    if content is not None:
        changes["content"] = check_text("content", content, max_bytes)
    if category is not None:
        changes["category"] = enum_value("category", Category, category)
    if event_time is not None:
        changes["event_time"] = check_time("event_time", event_time)
    if not changes:
        raise InvalidInputError("body", "nothing to update: give content, category or event_time")
    return changes
