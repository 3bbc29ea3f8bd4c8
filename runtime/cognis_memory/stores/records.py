"""The one mapping between the domain records (Memory, Message, Job) and the rows and documents the
backends keep, with one value converter per backend side by side.

The field names are the same everywhere (the SQL column names), except the memory id, which the
OpenSearch documents call ``memory_id``. What differs per backend is how a few value types are
kept; a :class:`StoredValues` says how one backend reads them back:

=============  ===================  ==================  ======================================
backend        times                lists and objects   vectors
=============  ===================  ==================  ======================================
SQLite         epoch seconds (REAL)  JSON text           float32 bytes (BLOB)
PostgreSQL     ``timestamptz``       ``text[]``/``jsonb``  pgvector (numpy via our loader)
OpenSearch     ISO 8601 text         JSON                float32 bytes in base64 (``*_b64``)
plain JSON     ISO 8601 text         JSON                none (:mod:`cognis_memory.serialization`)
=============  ===================  ==================  ======================================

Every time comes back timezone-aware (UTC when the stored text has no offset). A required time
that is missing is refused (ValueError naming the field), never replaced by "now".
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import numpy as np

from ..domain import Category, Job, JobStatus, Memory, MemoryKind, Message, Scope

#: The memory fields in the order of the SQL backends' ``memories`` columns.
MEMORY_COLUMNS = (
    "id", "tenant_id", "user_id", "agent_id", "session_id", "scope", "category", "kind", "content", "speaker",
    "event_time", "message_time", "created_at", "version", "is_current", "deleted", "replaces_id",
    "source_message_ids", "metadata", "embedding", "embedding_short",
)  # fmt: skip


class Row(Protocol):
    """A row or document: a dict, a ``sqlite3.Row``, an OpenSearch ``_source``."""

    def __getitem__(self, key: str, /) -> Any: ...


def _field(row: Row, name: str) -> Any:
    """``row[name]``, or None when the row (a dict, a ``sqlite3.Row``, a document) lacks the field."""
    try:
        return row[name]
    except (KeyError, IndexError):
        return None


def aware(value: datetime | None) -> datetime | None:
    """A datetime with its offset; one without is UTC."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def epoch_us(value: datetime) -> int:
    """Exact epoch microseconds (timezone-aware; naive values are UTC), also before 1970."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - _EPOCH) // timedelta(microseconds=1)


def iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat()


def _from_epoch(value: float | None) -> datetime | None:
    return datetime.fromtimestamp(value, tz=UTC) if value is not None else None


def _from_iso(value: str | None) -> datetime | None:
    return aware(datetime.fromisoformat(value)) if value else None


_EMPTY_JSON: dict[str, Any] = {"[]": list, "{}": dict}


def _from_json_text(value: str | None) -> Any:
    if value is None:
        return None
    empty = _EMPTY_JSON.get(value)  # most rows: no sources or metadata (a search reads 100 rows)
    return empty() if empty is not None else json.loads(value)


def _as_is(value: Any) -> Any:
    return value


def _blob_vector(row: Row, name: str) -> np.ndarray | None:
    blob = _field(row, name)
    return np.frombuffer(blob, dtype=np.float32).copy() if blob is not None else None


def _native_vector(row: Row, name: str) -> np.ndarray | None:
    return _field(row, name)


def _document_vector(row: Row, name: str) -> np.ndarray | None:
    raw = _field(row, f"{name}_b64")
    if raw is not None:
        return np.frombuffer(base64.b64decode(raw), dtype=np.float32).copy()
    values = _field(row, name)
    return np.asarray(values, dtype=np.float32) if values is not None else None


def _no_vector(row: Row, name: str) -> np.ndarray | None:
    return None


@dataclass(frozen=True, slots=True)
class StoredValues:
    """How one backend keeps the values that are not text, numbers or booleans."""

    time: Callable[[Any], datetime | None]
    structured: Callable[[Any], Any]  #: lists and objects (source ids, metadata, job results)
    vector: Callable[[Row, str], np.ndarray | None]
    memory_id_field: str = "id"

    def required_time(self, row: Row, name: str) -> datetime:
        value = self.time(_field(row, name))
        if value is None:
            raise ValueError(f"{name}: a stored record always has this time")
        return value


SQLITE = StoredValues(time=_from_epoch, structured=_from_json_text, vector=_blob_vector)
#: SQLite rows selected without their vector columns (the caller has the vectors): no lookup of the absent columns
SQLITE_WITHOUT_VECTORS = StoredValues(time=_from_epoch, structured=_from_json_text, vector=_no_vector)
POSTGRES = StoredValues(time=aware, structured=_as_is, vector=_native_vector)
OPENSEARCH = StoredValues(time=_from_iso, structured=_as_is, vector=_document_vector, memory_id_field="memory_id")
PLAIN_JSON = StoredValues(time=_from_iso, structured=_as_is, vector=_no_vector)


_SCOPES = {m.value: m for m in Scope}
_CATEGORIES = {m.value: m for m in Category}
_KINDS = {m.value: m for m in MemoryKind}


def memory_from_row(row: Row, values: StoredValues) -> Memory:
    """A Memory from a row or document; vectors are None when they were not selected."""
    return Memory(
        id=row[values.memory_id_field],
        tenant_id=row["tenant_id"],
        user_id=row["user_id"],
        agent_id=_field(row, "agent_id"),
        session_id=_field(row, "session_id"),
        scope=_SCOPES.get(row["scope"]) or Scope(row["scope"]),  # a dict lookup is a tenth of the enum call;
        category=_CATEGORIES.get(row["category"]) or Category(row["category"]),  # an unknown value still raises
        kind=_KINDS.get(row["kind"]) or MemoryKind(row["kind"]),
        content=row["content"],
        speaker=_field(row, "speaker"),
        event_time=values.time(_field(row, "event_time")),
        message_time=values.time(_field(row, "message_time")),
        created_at=values.required_time(row, "created_at"),
        version=int(row["version"]),
        is_current=bool(row["is_current"]),
        deleted=bool(_field(row, "deleted")),
        replaces_id=_field(row, "replaces_id"),
        source_message_ids=list(values.structured(_field(row, "source_message_ids")) or []),
        metadata=dict(values.structured(_field(row, "metadata")) or {}),
        embedding=values.vector(row, "embedding"),
        embedding_short=values.vector(row, "embedding_short"),
    )


def message_from_row(row: Row, values: StoredValues) -> Message:
    return Message(
        id=row["id"],
        tenant_id=row["tenant_id"],
        user_id=row["user_id"],
        session_id=_field(row, "session_id"),
        agent_id=_field(row, "agent_id"),
        speaker=_field(row, "speaker"),
        role=row["role"],
        content=row["content"],
        timestamp=values.required_time(row, "ts"),
        client_message_id=_field(row, "client_message_id"),
        metadata=dict(values.structured(_field(row, "metadata")) or {}),
        created_at=values.required_time(row, "created_at"),
    )


def job_from_row(row: Row, values: StoredValues) -> Job:
    return Job(
        id=row["id"],
        tenant_id=row["tenant_id"],
        user_id=row["user_id"],
        message_ids=list(values.structured(row["message_ids"])),
        status=JobStatus(row["status"]),
        attempts=int(row["attempts"]),
        max_attempts=int(row["max_attempts"]),
        last_error=_field(row, "last_error"),
        next_attempt_at=values.required_time(row, "next_attempt_at"),
        created_at=values.required_time(row, "created_at"),
        updated_at=values.required_time(row, "updated_at"),
        result=dict(values.structured(_field(row, "result")) or {}),
    )
