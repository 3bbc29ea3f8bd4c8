"""The conversation file ``cognis-memory import`` and ``add`` read: JSON lines or a JSON list of
messages (``content``, ``speaker``, ``role``, ``timestamp``, ...), each turned into a
:class:`~cognis_memory.message_body.MessageBody` (checked by the service's ``check_message``, as a
message of the HTTP API is); a bad line is an error naming the line and the field."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from ..domain import Scope
from ..errors import InvalidInputError
from ..message_body import MessageBody


def parse_time(field: str, value: Any) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)):
        raise InvalidInputError(field, "use an ISO 8601 string, e.g. 2024-05-01T10:00:00Z")
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInputError(field, f"not an ISO 8601 time: {str(value)[:40]!r}") from None


_MESSAGE_FIELDS = {
    "content", "text", "speaker", "role", "timestamp", "session_id", "agent_id", "client_message_id", "scope",
    "metadata", "user_id",
}  # fmt: skip


def read_conversation(path: Path, default_user: str | None) -> Iterator[tuple[str, dict[str, Any]]]:
    """(user_id, message dict) pairs from a JSON or JSONL file.

    Accepted shapes: JSONL with one message object per line; a JSON list of messages; or a
    JSON object ``{"user_id": ..., "messages": [...]}``. A message has ``content`` (or
    ``text``) and optionally speaker, role, timestamp (ISO 8601), session_id, agent_id,
    client_message_id, scope, metadata, user_id (else ``--user``).
    """
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if path.suffix == ".jsonl" or (stripped and stripped[0] == "{" and "\n{" in stripped):
        items: list[Any] = []
        for n, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    items.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise InvalidInputError(f"line {n}", f"not valid JSON ({exc.msg}, column {exc.colno})") from None
        user = default_user
    else:
        doc = json.loads(text)
        if isinstance(doc, dict):
            user = doc.get("user_id", default_user)
            items = doc.get("messages", [])
        else:
            user, items = default_user, doc
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise InvalidInputError(f"messages[{i}]", "must be an object")
        unknown = set(item) - _MESSAGE_FIELDS
        if unknown:
            raise InvalidInputError(f"messages[{i}].{sorted(unknown)[0]}", "unknown field")
        uid = item.get("user_id", user)
        if not uid:
            raise InvalidInputError(f"messages[{i}].user_id", "missing: give user_id in the file or --user")
        yield uid, item


_ROLES = ("user", "assistant", "system", "tool")


def message_body_of(i: int, item: dict[str, Any]) -> MessageBody:
    """The ``i``-th message of a file. Built without pydantic's type checks (``model_construct``): the
    service's :func:`~cognis_memory.validation.check_message` checks every field of it, so a wrong value in
    a file is refused naming the field in the service's words (``messages[3].speaker: must be 1-200
    characters``), as the import always did."""
    if item.get("role", "user") not in _ROLES:
        raise InvalidInputError(f"messages[{i}].role", f"must be one of {', '.join(_ROLES)}")
    if item.get("scope", "USER") not in tuple(Scope):
        raise InvalidInputError(f"messages[{i}].scope", f"must be one of {', '.join(Scope)}")
    return MessageBody.model_construct(
        content=item.get("content", item.get("text", "")),
        speaker=item.get("speaker"),
        role=item.get("role", "user"),
        timestamp=parse_time(f"messages[{i}].timestamp", item.get("timestamp")),
        session_id=item.get("session_id"),
        agent_id=item.get("agent_id"),
        client_message_id=item.get("client_message_id"),
        scope=Scope(item.get("scope", "USER")),
        metadata=item.get("metadata") or {},
    )
