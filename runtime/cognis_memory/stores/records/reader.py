"""Rows and documents read into the domain records (Memory, Message, Job): one function per record and
backend, written out from the record's columns (:mod:`.schema`) and compiled on first use."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ...domain import Job, Memory, Message
from .schema import JOB_RECORD, MEMORY_RECORD, MESSAGE_RECORD, Column
from .stored_values import Row, StoredValues, row_field

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
    the SQL stores fill such rows when they add the column (:mod:`..migrations.record_columns`)."""
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
        "make": make, "field": row_field, "time": values.time, "required_time": values.required_time,
        "structured": values.structured, "vector": values.vector,
    }  # fmt: skip
    defaults = _scalar_defaults(record, make)
    arguments = []
    for i, c in enumerate(record):
        key = repr(c.key(id_field))
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


_read_memory = _RecordReader(MEMORY_RECORD, Memory, memory_ids=True)
_read_message = _RecordReader(MESSAGE_RECORD, Message)
_read_job = _RecordReader(JOB_RECORD, Job)


def memory_from_row(row: Row, values: StoredValues) -> Memory:
    """A Memory from a row or document; vectors are None when they were not selected."""
    return _read_memory(row, values)


def message_from_row(row: Row, values: StoredValues) -> Message:
    return _read_message(row, values)


def job_from_row(row: Row, values: StoredValues) -> Job:
    return _read_job(row, values)
