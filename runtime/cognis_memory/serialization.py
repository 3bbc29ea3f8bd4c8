"""Plain-JSON forms of memories and search responses (CLI output, export, result cache)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from .domain import Category, Memory, MemoryKind, Scope


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _dt(value: str | None) -> datetime | None:
    """An ISO time as an aware datetime; a time without offset is UTC (every store keeps UTC)."""
    if not value:
        return None
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


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
    """The inverse of :func:`memory_to_dict` (without embeddings). Times come back aware (UTC when
    the text has no offset); a record without ``created_at`` is refused (ValueError), not dated now."""
    created_at = _dt(d.get("created_at"))
    if created_at is None:
        raise ValueError("created_at: a stored memory always has its creation time")
    return Memory(
        id=d["id"],
        tenant_id=d["tenant_id"],
        user_id=d["user_id"],
        content=d["content"],
        category=Category(d["category"]),
        scope=Scope(d["scope"]),
        kind=MemoryKind(d["kind"]),
        speaker=d.get("speaker"),
        session_id=d.get("session_id"),
        agent_id=d.get("agent_id"),
        event_time=_dt(d.get("event_time")),
        message_time=_dt(d.get("message_time")),
        created_at=created_at,
        version=d["version"],
        is_current=d["is_current"],
        deleted=d["deleted"],
        replaces_id=d.get("replaces_id"),
        source_message_ids=list(d.get("source_message_ids", [])),
        metadata=dict(d.get("metadata") or {}),
    )
