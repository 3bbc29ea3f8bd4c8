"""The SQL INSERT of a record's columns and the parameters for it, as both SQL backends run them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def insert_statement(table: str, columns: Sequence[str], placeholder: str) -> str:
    """``INSERT INTO table (columns) VALUES (placeholders)``, one positional placeholder per column."""
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join([placeholder] * len(columns))})"


def row_values(row: dict[str, Any], columns: Sequence[str]) -> tuple[Any, ...]:
    """A row's values in the order of ``columns`` (the parameters of :func:`insert_statement`)."""
    return tuple(row[c] for c in columns)
