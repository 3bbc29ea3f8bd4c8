"""How each backend keeps the values that are not text or numbers, one :class:`StoredValues` per backend
side by side: reading them back and writing them.

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
import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import numpy as np


class Row(Protocol):
    """A row or document: a dict, a ``sqlite3.Row``, an OpenSearch ``_source``."""

    def __getitem__(self, key: str, /) -> Any: ...


def row_field(row: Row, name: str) -> Any:
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


def as_is(value: Any) -> Any:
    return value


def _blob_vector(row: Row, name: str) -> np.ndarray | None:
    blob = row_field(row, name)
    return np.frombuffer(blob, dtype=np.float32).copy() if blob is not None else None


def _native_vector(row: Row, name: str) -> np.ndarray | None:
    return row_field(row, name)


def _document_vector(row: Row, name: str) -> np.ndarray | None:
    raw = row_field(row, f"{name}_b64")
    if raw is not None:
        return np.frombuffer(base64.b64decode(raw), dtype=np.float32).copy()
    values = row_field(row, name)
    return np.asarray(values, dtype=np.float32) if values is not None else None


def _no_vector(row: Row, name: str) -> np.ndarray | None:
    return None


# -- write side: the same value types, as each backend keeps them ------------------------------------
def _epoch(value: datetime | None) -> float | None:
    return value.timestamp() if value is not None else None


def _plain_iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _json_text(value: Any) -> str:
    return json.dumps(value, default=str)


def _json_value(value: Any) -> Any:
    """What JSON keeps of ``value`` (values JSON lacks, such as datetimes, become their text)."""
    return json.loads(json.dumps(value, default=str))


def _blob_columns(name: str, vector: np.ndarray) -> dict[str, Any]:
    return {name: np.ascontiguousarray(vector, dtype=np.float32).tobytes()}


def _document_fields(name: str, vector: np.ndarray) -> dict[str, Any]:
    """The ``knn_vector`` field (not kept in ``_source``) and its compact float32 copy returned with hits."""
    v = np.ascontiguousarray(vector, dtype=np.float32)
    return {name: v.astype(float).tolist(), f"{name}_b64": base64.b64encode(v.tobytes()).decode()}


def _no_columns(name: str, vector: np.ndarray) -> dict[str, Any]:
    return {}


@dataclass(frozen=True, slots=True, eq=False)  # compared and hashed by identity: the compiled readers' key
class StoredValues:
    """How one backend keeps the values that are not text or numbers: reading them back (``time``,
    ``structured``, ``vector``) and writing them (the ``*_out`` converters)."""

    time: Callable[[Any], datetime | None]
    structured: Callable[[Any], Any]  #: lists and objects (source ids, metadata, job results)
    vector: Callable[[Row, str], np.ndarray | None]
    time_out: Callable[[datetime | None], Any]
    json_out: Callable[[Any], Any]  #: objects and the lists kept as JSON (metadata, job message ids, results)
    vector_out: Callable[[str, np.ndarray], dict[str, Any]]  #: the field(s) keeping one vector
    ids_out: Callable[[list[str]], Any] = list  #: a list of ids with a column type of its own (``text[]``)
    flag_out: Callable[[bool], Any] = bool
    memory_id_field: str = "id"

    def required_time(self, row: Row, name: str) -> datetime:
        value = self.time(row_field(row, name))
        if value is None:
            raise ValueError(f"{name}: a stored record always has this time")
        return value

    @property
    def keeps_vectors(self) -> bool:
        return self.vector_out is not _no_columns


SQLITE = StoredValues(
    time=_from_epoch, structured=_from_json_text, vector=_blob_vector,
    time_out=_epoch, json_out=_json_text, vector_out=_blob_columns, ids_out=_json_text, flag_out=int,
)  # fmt: skip
#: SQLite rows selected without their vector columns (the caller has the vectors): no lookup of the absent columns
SQLITE_WITHOUT_VECTORS = dataclasses.replace(SQLITE, vector=_no_vector)
OPENSEARCH = StoredValues(
    time=_from_iso, structured=as_is, vector=_document_vector,
    time_out=iso, json_out=_json_value, vector_out=_document_fields, memory_id_field="memory_id",
)  # fmt: skip
PLAIN_JSON = StoredValues(
    time=_from_iso, structured=as_is, vector=_no_vector, time_out=_plain_iso, json_out=as_is, vector_out=_no_columns
)


def _jsonb(value: Any) -> Any:
    from psycopg.types.json import Jsonb  # psycopg is an optional dependency (the prod extra)

    return Jsonb(value, dumps=_json_text)


def _numpy_column(name: str, vector: np.ndarray) -> dict[str, Any]:
    return {name: np.asarray(vector, dtype=np.float32)}


POSTGRES = StoredValues(
    time=aware, structured=as_is, vector=_native_vector,
    time_out=as_is, json_out=_jsonb, vector_out=_numpy_column,
)  # fmt: skip
