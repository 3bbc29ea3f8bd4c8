"""The domain records (Memory, Message, Job) written as rows and documents: the fields of a record's
columns (:mod:`.schema`), in column order, each converted as the backend keeps it (:mod:`.stored_values`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ...domain import Job, Memory, Message
from .schema import JOB_RECORD, MEMORY_RECORD, MESSAGE_RECORD, Column
from .stored_values import StoredValues, as_is

Writer = Callable[[Any, dict[str, Any]], None]


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
    }.get(c.kind, as_is)
    if c.kind == "vector":
        return lambda obj, out: out.update(values.vector_out(key, getattr(obj, attr)))
    if convert is None:
        return lambda obj, out: out.__setitem__(key, getattr(obj, attr))
    fn = convert
    return lambda obj, out: out.__setitem__(key, fn(getattr(obj, attr)))


@functools.cache
def _writers(record: tuple[Column, ...], values: StoredValues, id_field: str) -> tuple[Writer, ...]:
    return tuple(_writer(c, c.key(id_field), values) for c in record)


def row_from_fields(
    record: tuple[Column, ...], obj: Any, values: StoredValues, *, id_field: str = "id"
) -> dict[str, Any]:
    """The row or document fields of ``obj`` (a Memory, Message or Job), in the record's column order."""
    out: dict[str, Any] = {}
    for write in _writers(record, values, id_field):
        write(obj, out)
    return out


def memory_to_row(m: Memory, values: StoredValues, record: tuple[Column, ...] = MEMORY_RECORD) -> dict[str, Any]:
    """The fields of ``record`` (default: every column) of one memory as ``values``' backend keeps them.
    A backend that keeps vectors refuses a memory without them."""
    vectors = values.keeps_vectors and any(c.kind == "vector" for c in record)
    if vectors and (m.embedding is None or m.embedding_short is None):
        raise ValueError("embedding: memories must be embedded before they are stored")
    return row_from_fields(record, m, values, id_field=values.memory_id_field)


def message_to_row(m: Message, values: StoredValues) -> dict[str, Any]:
    return row_from_fields(MESSAGE_RECORD, m, values)


def job_to_row(job: Job, values: StoredValues) -> dict[str, Any]:
    return row_from_fields(JOB_RECORD, job, values)
