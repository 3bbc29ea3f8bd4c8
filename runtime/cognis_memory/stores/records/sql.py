"""The SQL INSERT of a record's columns and the parameters for it, as both SQL backends run them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: PostgreSQL's most parameters in one statement (the wire protocol counts them in 16 bits)
POSTGRES_MAX_PARAMETERS = 65535


def insert_statement(table: str, columns: Sequence[str], placeholder: str) -> str:
    """``INSERT INTO table (columns) VALUES (placeholders)``, one positional placeholder per column."""
    return insert_rows_statement(table, columns, 1, placeholder)


def insert_rows_statement(table: str, columns: Sequence[str], rows: int, placeholder: str) -> str:
    """``INSERT INTO table (columns) VALUES (...), (...)`` of ``rows`` rows: one statement, one round trip, and
    atomic without a transaction around it. Its parameters are the rows' :func:`row_values` one after another."""
    row = f"({', '.join([placeholder] * len(columns))})"
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES {', '.join([row] * rows)}"


def row_values(row: dict[str, Any], columns: Sequence[str]) -> tuple[Any, ...]:
    """A row's values in the order of ``columns`` (the parameters of :func:`insert_statement`)."""
    return tuple(row[c] for c in columns)
