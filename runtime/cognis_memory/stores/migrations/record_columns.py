"""Columns a record gained after its table was created: found by comparing :mod:`..records` with the table,
added by the SQL backends right after their numbered migrations (``ALTER TABLE ... ADD COLUMN``).

A new stored field is then one ``Column`` line in ``records/schema.py`` and its domain field: no numbered
migration, in either SQL backend. Rows that exist already get the domain field's default (the
dataclass default, or its factory's value), which is what a record written before the field existed
means. What cannot be added that way is refused with the column named (:class:`NeedsMigrationError`):
a field without a default, a required column whose default is None, a vector (its size is the
store's), a time with a default, a non-empty list of ids. Those, and every change that is not a
plain addition (a rename, a type change, an index, moving data), stay numbered migrations.

Which columns are missing, what their default is and how each dialect writes them is decided here once
(:data:`SQLITE_DIALECT`, :data:`POSTGRES_DIALECT`); the backends only list their tables' columns and run the
statements.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ...domain import Job, Memory, Message
from ...errors import CognisError
from ..records import JOB_RECORD, MEMORY_RECORD, MESSAGE_RECORD, Column

#: The tables kept from a record, with the domain class whose defaults fill existing rows.
RECORD_TABLES: dict[str, tuple[tuple[Column, ...], type]] = {
    "memories": (MEMORY_RECORD, Memory),
    "messages": (MESSAGE_RECORD, Message),
    "jobs": (JOB_RECORD, Job),
}


@dataclass(frozen=True, slots=True)
class SqlDialect:
    """How one SQL backend declares an added column: the type of each column kind that can be added (vectors
    cannot: their size is the store's) and how a default of each kind is written."""

    types: Mapping[str, str]
    true: str
    false: str
    empty_ids: str  #: the empty list of ids (the only list of ids that can be a default)
    json_cast: str = ""  #: appended to a JSON text default


SQLITE_DIALECT = SqlDialect(
    types={
        "text": "TEXT", "enum": "TEXT", "int": "INTEGER", "flag": "INTEGER", "time": "REAL",
        "required_time": "REAL", "ids": "TEXT", "json_list": "TEXT", "json": "TEXT",
    },
    true="1", false="0", empty_ids="'[]'",
)  # fmt: skip
#: (PostgreSQL's own type names, which psycopg's binary COPY also takes: ``bulk_load`` uses them too)
POSTGRES_DIALECT = SqlDialect(
    types={
        "text": "text", "enum": "text", "int": "int4", "flag": "bool", "time": "timestamptz",
        "required_time": "timestamptz", "ids": "text[]", "json_list": "jsonb", "json": "jsonb",
    },
    true="true", false="false", empty_ids="'{}'", json_cast="::jsonb",
)  # fmt: skip


class NeedsMigrationError(CognisError, ValueError):
    """A record column is missing from its table and cannot be added from the record alone."""


@dataclass(frozen=True, slots=True)
class AddedColumn:
    """A record column its table lacks, with the value existing rows get (None: they stay NULL)."""

    table: str
    column: Column
    default: str | int | bool | None  #: text, a number, a flag, or JSON text for lists and objects

    @property
    def not_null(self) -> bool:
        return self.default is not None


def _field_default(make: type, column: Column) -> Any:
    fields = {f.name: f for f in dataclasses.fields(make)}
    f = fields.get(column.field)
    if f is None:
        raise NeedsMigrationError(f"{column.name}: {make.__name__} has no field {column.field!r}")
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    raise NeedsMigrationError(
        f"{column.name}: {make.__name__}.{column.field} has no default, so rows stored before it existed have no "
        "value for it; add the column with a numbered migration that fills it"
    )


def _stored_default(table: str, column: Column, value: Any) -> str | int | bool | None:
    """The default as the SQL backends keep it, or :class:`NeedsMigrationError` naming the column."""
    where = f"{table}.{column.name}"
    if column.kind == "vector":
        raise NeedsMigrationError(f"{where}: a vector column's size is the store's; add it with a numbered migration")
    if value is None:
        if column.required:
            raise NeedsMigrationError(f"{where}: a required column needs a default for the rows stored before it")
        return None
    if column.kind in ("time", "required_time"):
        raise NeedsMigrationError(f"{where}: a time with a default needs a numbered migration")
    if column.kind == "flag" and isinstance(value, bool):
        return value
    if column.kind == "int" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if column.kind == "enum" and isinstance(value, Enum):
        return str(value.value)
    if column.kind == "text" and isinstance(value, str):
        return value
    if column.kind == "ids" and value == []:
        return "[]"
    if column.kind in ("json_list", "json") and isinstance(value, (list, dict)):
        return json.dumps(value)
    raise NeedsMigrationError(f"{where}: a {column.kind} column with the default {value!r} needs a numbered migration")


def missing_columns(
    present: Mapping[str, Collection[str]],
    tables: Mapping[str, tuple[tuple[Column, ...], type]] = RECORD_TABLES,
) -> list[AddedColumn]:
    """The record columns each table of ``present`` (table -> its column names) lacks, in record order."""
    added = []
    for table, (record, make) in tables.items():
        have = present.get(table)
        if have is None:
            continue
        for column in record:
            if column.name not in have:
                added.append(AddedColumn(table, column, _stored_default(table, column, _field_default(make, column))))
    return added


def _sql_text(value: str) -> str:
    """A quoted SQL string literal (the standard form both SQLite and PostgreSQL read)."""
    return "'" + value.replace("'", "''") + "'"


def _literal(added: AddedColumn, dialect: SqlDialect) -> str:
    value = added.default
    if isinstance(value, bool):
        return dialect.true if value else dialect.false
    if isinstance(value, int):
        return str(value)
    text = str(value)
    if added.column.kind == "ids":
        return dialect.empty_ids
    if added.column.kind in ("json", "json_list"):
        return _sql_text(text) + dialect.json_cast
    return _sql_text(text)


def add_column_statement(added: AddedColumn, dialect: SqlDialect) -> str:
    """``ALTER TABLE table ADD COLUMN name TYPE [NOT NULL DEFAULT literal]`` in ``dialect``."""
    definition = f'"{added.column.name}" {dialect.types[added.column.kind]}'
    if added.not_null:
        definition += f" NOT NULL DEFAULT {_literal(added, dialect)}"
    return f'ALTER TABLE "{added.table}" ADD COLUMN {definition}'
