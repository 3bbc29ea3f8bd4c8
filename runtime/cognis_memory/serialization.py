"""Plain-JSON forms of memories and search responses (CLI output, export, result cache)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .domain import Memory
from .stores.records import PLAIN_JSON, memory_from_row


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def memory_to_dict(m: Memory) -> dict[str, Any]:
    """Every field but the embeddings, JSON-ready."""
    return {
        "id": m.id,
        "tenant_id": m.tenant_id,
        "user_id": m.user_id,
        "content": m.content,
        "category": m.category.value,
        "scope": m.scope.value,
        "kind": m.kind.value,
        "speaker": m.speaker,
        "session_id": m.session_id,
        "agent_id": m.agent_id,
        "event_time": _iso(m.event_time),
        "message_time": _iso(m.message_time),
        "created_at": m.created_at.isoformat(),
        "version": m.version,
        "is_current": m.is_current,
        "deleted": m.deleted,
        "replaces_id": m.replaces_id,
        "source_message_ids": list(m.source_message_ids),
        "metadata": m.metadata,
    }


def memory_from_dict(d: dict[str, Any]) -> Memory:
    """The inverse of :func:`memory_to_dict` (without embeddings), through the one record mapping
    (:mod:`cognis_memory.stores.records`): times come back aware (UTC when the text has no offset);
    a record without ``created_at`` is refused (ValueError), not dated now."""
    return memory_from_row(d, PLAIN_JSON)
