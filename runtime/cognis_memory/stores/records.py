"""The one mapping between the domain records (Memory, Message, Job) and the rows and documents the
backends keep, with one value converter per backend side by side.

The field names are the same everywhere (the SQL column names), except the memory id, which the
OpenSearch documents call ``memory_id``. Each record is one column list (:data:`MEMORY_RECORD`,
:data:`MESSAGE_RECORD`, :data:`JOB_RECORD`) whose columns say their kind; one function per direction
(:func:`row_from_fields`, and a reader written out from the columns) maps a record both ways for any backend. What differs
per backend is how a few value types are kept, written and read back; a :class:`StoredValues` says it:

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
import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

import numpy as np

from ..domain import Category, Job, JobStatus, Memory, MemoryKind, Message, Scope
from ..search_filter import ColumnFilter, Match, any_of, equals


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
        value = self.time(_field(row, name))
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
    time=_from_iso, structured=_as_is, vector=_document_vector,
    time_out=iso, json_out=_json_value, vector_out=_document_fields, memory_id_field="memory_id",
)  # fmt: skip
PLAIN_JSON = StoredValues(
    time=_from_iso, structured=_as_is, vector=_no_vector, time_out=_plain_iso, json_out=_as_is, vector_out=_no_columns
)


def _jsonb(value: Any) -> Any:
    from psycopg.types.json import Jsonb  # psycopg is an optional dependency (the prod extra)

    return Jsonb(value, dumps=_json_text)


def _numpy_column(name: str, vector: np.ndarray) -> dict[str, Any]:
    return {name: np.asarray(vector, dtype=np.float32)}


POSTGRES = StoredValues(
    time=aware, structured=_as_is, vector=_native_vector,
    time_out=_as_is, json_out=_jsonb, vector_out=_numpy_column,
)  # fmt: skip


# -- the records: one column list each, read and written by kind -----------------------------------------
#: the column kind each match is made for (what every translation and the request check are written for)
MATCH_KINDS = {Match.ANY_OF: "enum", Match.EQUALS: "text"}


@dataclass(frozen=True, slots=True)
class Column:
    """One stored field. ``kind`` says how it is kept: ``text``, ``int``, ``flag``, ``enum`` (its value),
    ``time``, ``required_time``, ``ids`` (a list of ids), ``json_list``, ``json`` (an object) or ``vector``.

    ``attr`` is the domain attribute when it is named otherwise (a message's ``timestamp`` is kept as
    ``ts``); ``required`` columns are read with ``row[name]`` (a missing one is an error), the others
    read as None when absent; ``searched`` marks the memory fields a keyword search filters or scores
    on, the fields of the dual store's keyword index; ``filter`` makes the column a search filter of
    its own (a searched column, so that the keyword index filters on it too, of its match's kind)."""

    name: str
    kind: str = "text"
    enum: type[StrEnum] | None = None
    required: bool = False
    searched: bool = False
    attr: str = ""
    filter: ColumnFilter | None = None

    def __post_init__(self) -> None:
        if self.filter is not None and (self.kind != MATCH_KINDS[self.filter.match] or not self.searched):
            raise ValueError(
                f"{self.name}: a column filtered by {self.filter.match} is a searched column of kind "
                f"{MATCH_KINDS[self.filter.match]}"
            )

    @property
    def field(self) -> str:
        return self.attr or self.name


#: The memory fields in the order of the SQL backends' ``memories`` columns.
MEMORY_RECORD: tuple[Column, ...] = (
    Column("id", required=True, searched=True),
    Column("tenant_id", required=True, searched=True),
    Column("user_id", required=True, searched=True),
    Column("agent_id", searched=True, filter=equals("agent_id")),
    Column("session_id", searched=True),
    Column("scope", "enum", Scope, required=True, searched=True, filter=any_of("scopes")),
    Column("category", "enum", Category, required=True, searched=True, filter=any_of("categories")),
    Column("kind", "enum", MemoryKind, required=True, searched=True, filter=any_of("kinds")),
    Column("content", required=True, searched=True),
    Column("speaker"),
    Column("event_time", "time", searched=True),
    Column("message_time", "time", searched=True),
    Column("created_at", "required_time", searched=True),
    Column("version", "int", required=True, searched=True),
    Column("is_current", "flag", required=True, searched=True),
    Column("deleted", "flag"),
    Column("replaces_id"),
    Column("source_message_ids", "ids"),
    Column("metadata", "json"),
    Column("chain_id"),  # the id of the chain's first version: the memory's id in the API
    Column("time_expressions", "json_list"),
    Column("embedding", "vector"),
    Column("embedding_short", "vector"),
)
MESSAGE_RECORD: tuple[Column, ...] = (
    Column("id", required=True),
    Column("tenant_id", required=True),
    Column("user_id", required=True),
    Column("session_id"),
    Column("agent_id"),
    Column("speaker"),
    Column("role", required=True),
    Column("content", required=True),
    Column("ts", "required_time", attr="timestamp"),
    Column("client_message_id"),
    Column("metadata", "json"),
    Column("created_at", "required_time"),
    Column("scope", "enum", Scope),  # absent from documents of an older release: the default, USER
    Column("raw_memory_id"),
)
JOB_RECORD: tuple[Column, ...] = (
    Column("id", required=True),
    Column("tenant_id", required=True),
    Column("user_id", required=True),
    Column("message_ids", "json_list", required=True),
    Column("status", "enum", JobStatus, required=True),
    Column("attempts", "int", required=True),
    Column("max_attempts", "int", required=True),
    Column("last_error"),
    Column("next_attempt_at", "required_time"),
    Column("created_at", "required_time"),
    Column("updated_at", "required_time"),
    Column("result", "json"),
)

MEMORY_COLUMNS = tuple(c.name for c in MEMORY_RECORD)
#: the memory columns but the vectors (reads that need no vectors skip their bytes)
MEMORY_COLUMNS_WITHOUT_VECTORS = tuple(c.name for c in MEMORY_RECORD if c.kind != "vector")
MESSAGE_COLUMNS = tuple(c.name for c in MESSAGE_RECORD)
JOB_COLUMNS = tuple(c.name for c in JOB_RECORD)
#: the memory fields of the dual store's keyword index (before the derived effective time)
SEARCHED_MEMORY_RECORD = tuple(c for c in MEMORY_RECORD if c.searched)
#: the memory columns a search filters on by themselves, each with its
#: :class:`~cognis_memory.search_filter.ColumnFilter` (the owner,
#: ``is_current``, the session's CONTEXT visibility and the effective time range are rules of their own)
MEMORY_FILTERS: tuple[tuple[Column, ColumnFilter], ...] = tuple(
    (c, c.filter) for c in MEMORY_RECORD if c.filter is not None
)

Writer = Callable[[Any, dict[str, Any]], None]

#: how a column of each kind is read, as an expression of ``value`` (the stored value, None when absent)
#: or of ``row`` and ``key`` (kinds that read the row themselves); the names are those of :func:`_compile_reader`'s scope
_READS = {
    "text": "{value}",
    "int": "int({value})",
    "flag": "bool({value})",
    "enum": "{members}.get({value}) or {enum}({value})",  # a dict lookup is a tenth of the enum call; an unknown value still raises
    "time": "time({value})",
    "required_time": "required_time(row, {key})",
    "ids": "list(structured({value}) or [])",
    "json_list": "list(structured({value}) or [])",
    "json": "dict(structured({value}) or {{}})",
    "vector": "vector(row, {key})",
}


def _scalar_defaults(record: tuple[Column, ...], make: type) -> dict[str, Any]:
    """The domain default of each optional enum, number or text column whose field has one (the other kinds
    read an absent value as None, False, [] or {}): what a row stored before the column existed holds, as
    the SQL stores fill such rows when they add the column (:mod:`.migrations.record_columns`)."""
    defaults = {f.name: f.default for f in dataclasses.fields(make) if f.default is not dataclasses.MISSING}
    return {
        c.name: defaults[c.field]
        for c in record
        if not c.required and c.kind in ("int", "enum", "text") and defaults.get(c.field) is not None
    }


def _compile_reader(
    record: tuple[Column, ...], make: type, values: StoredValues, id_field: str
) -> Callable[[Row], Any]:
    """One function reading a row of ``record`` into ``make`` (Memory, Message, Job), written out column by
    column from the record (as ``dataclasses`` writes ``__init__``), so that reading the rows of a search
    costs what a hand-written constructor call does."""
    scope: dict[str, Any] = {
        "make": make, "field": _field, "time": values.time, "required_time": values.required_time,
        "structured": values.structured, "vector": values.vector,
    }  # fmt: skip
    defaults = _scalar_defaults(record, make)
    arguments = []
    for i, c in enumerate(record):
        key = repr(_key(c, id_field))
        value = f"row[{key}]" if c.required else f"field(row, {key})"
        if c.enum is not None:
            scope[f"enum{i}"], scope[f"members{i}"] = c.enum, {m.value: m for m in c.enum}
        read = _READS[c.kind].format(value=value, key=key, enum=f"enum{i}", members=f"members{i}")
        if c.name in defaults:  # absent from a row stored before the column existed: the domain default
            scope[f"default{i}"] = defaults[c.name]
            read = f"default{i} if {value} is None else {read}"
        arguments.append(f"{c.field}={read}")
    exec(f"def read(row):\n    return make({', '.join(arguments)})", scope)
    return scope["read"]


class _RecordReader:
    """Reads rows of one record into its domain class, through one compiled reader per backend's values."""

    def __init__(self, record: tuple[Column, ...], make: type, *, memory_ids: bool = False) -> None:
        self.record, self.make, self.memory_ids = record, make, memory_ids
        self._compiled: dict[StoredValues, Callable[[Row], Any]] = {}

    def __call__(self, row: Row, values: StoredValues) -> Any:
        read = self._compiled.get(values)
        if read is None:
            id_field = values.memory_id_field if self.memory_ids else "id"
            read = self._compiled[values] = _compile_reader(self.record, self.make, values, id_field)
        return read(row)


def _writer(c: Column, key: str, values: StoredValues) -> Writer:
    attr = c.field
    convert: Callable[[Any], Any] | None = {
        "text": None,
        "int": None,
        "flag": values.flag_out,
        "enum": lambda v: v.value,
        "time": values.time_out,
        "required_time": values.time_out,
        "ids": lambda v: values.ids_out(list(v)),
        "json_list": values.json_out,
        "json": values.json_out,
    }.get(c.kind, _as_is)
    if c.kind == "vector":
        return lambda obj, out: out.update(values.vector_out(key, getattr(obj, attr)))
    if convert is None:
        return lambda obj, out: out.__setitem__(key, getattr(obj, attr))
    fn = convert
    return lambda obj, out: out.__setitem__(key, fn(getattr(obj, attr)))


def _key(c: Column, id_field: str) -> str:
    return id_field if c.name == "id" else c.name


@functools.cache
def _writers(record: tuple[Column, ...], values: StoredValues, id_field: str) -> tuple[Writer, ...]:
    return tuple(_writer(c, _key(c, id_field), values) for c in record)


def row_from_fields(
    record: tuple[Column, ...], obj: Any, values: StoredValues, *, id_field: str = "id"
) -> dict[str, Any]:
    """The row or document fields of ``obj`` (a Memory, Message or Job), in the record's column order."""
    out: dict[str, Any] = {}
    for write in _writers(record, values, id_field):
        write(obj, out)
    return out


_read_memory = _RecordReader(MEMORY_RECORD, Memory, memory_ids=True)
_read_message = _RecordReader(MESSAGE_RECORD, Message)
_read_job = _RecordReader(JOB_RECORD, Job)


def memory_from_row(row: Row, values: StoredValues) -> Memory:
    """A Memory from a row or document; vectors are None when they were not selected."""
    return _read_memory(row, values)


def memory_to_row(m: Memory, values: StoredValues, record: tuple[Column, ...] = MEMORY_RECORD) -> dict[str, Any]:
    """The fields of ``record`` (default: every column) of one memory as ``values``' backend keeps them.
    A backend that keeps vectors refuses a memory without them."""
    vectors = values.keeps_vectors and any(c.kind == "vector" for c in record)
    if vectors and (m.embedding is None or m.embedding_short is None):
        raise ValueError("embedding: memories must be embedded before they are stored")
    return row_from_fields(record, m, values, id_field=values.memory_id_field)


def message_from_row(row: Row, values: StoredValues) -> Message:
    return _read_message(row, values)


def message_to_row(m: Message, values: StoredValues) -> dict[str, Any]:
    return row_from_fields(MESSAGE_RECORD, m, values)


def job_from_row(row: Row, values: StoredValues) -> Job:
    return _read_job(row, values)


def job_to_row(job: Job, values: StoredValues) -> dict[str, Any]:
    return row_from_fields(JOB_RECORD, job, values)


def insert_statement(table: str, columns: Sequence[str], placeholder: str) -> str:
    """``INSERT INTO table (columns) VALUES (placeholders)``, one positional placeholder per column."""
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join([placeholder] * len(columns))})"


def row_values(row: dict[str, Any], columns: Sequence[str]) -> tuple[Any, ...]:
    """A row's values in the order of ``columns`` (the parameters of :func:`insert_statement`)."""
    return tuple(row[c] for c in columns)
