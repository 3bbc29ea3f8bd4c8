"""Plain-JSON forms of memories and search responses (CLI output, export, result cache)."""

from __future__ import annotations

from typing import Any

from .domain import Memory
from .stores.records import PLAIN_JSON, memory_from_row, memory_to_row


def memory_to_dict(m: Memory) -> dict[str, Any]:
    """Every field but the embeddings, JSON-ready, through the one record mapping
    (:mod:`cognis_memory.stores.records`)."""
    return memory_to_row(m, PLAIN_JSON)


def memory_from_dict(d: dict[str, Any]) -> Memory:
    """The inverse of :func:`memory_to_dict` (without embeddings), through the one record mapping
    (:mod:`cognis_memory.stores.records`): times come back aware (UTC when the text has no offset);
    a record without ``created_at`` is refused (ValueError), not dated now."""
    return memory_from_row(d, PLAIN_JSON)
