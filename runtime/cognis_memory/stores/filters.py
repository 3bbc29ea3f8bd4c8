"""The translation of a :class:`~cognis_memory.search_filter.SearchFilter` for every backend, side by side: SQLite and
PostgreSQL SQL, OpenSearch's query DSL and the numpy mask of the embedded store's in-memory vector
index (the search-result cache key reads it in :mod:`cognis_memory.retrieval.cached`).

The rules are the ``MemoryFilter`` docstring's (and docs/stores.md, "Filter semantics"); the
contract suite checks every backend against a reference written from it. Two kinds of rule:

* the column filters, one per memory column the record marks filterable
  (:data:`~.records.MEMORY_FILTERS`: scopes, categories, kinds, agent_id): each translation
  walks those columns, so a new one is translated everywhere by its ``Column(..., filter=...)`` alone;
* the rules of their own, written out in each translation: the owner (tenant *and* user) and
  ``is_current``, applied by the caller's query in SQL (``WHERE m.tenant_id = ... AND m.user_id =
  ...``; in SQLite's FTS also by the owner token) and by :func:`opensearch_filter` itself; the
  session's CONTEXT visibility; the effective time range.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import numpy as np

from ..domain import Owner, Scope
from ..search_filter import SearchFilter
from .records import MEMORY_FILTERS, MEMORY_RECORD, Column, Match, epoch_us


# -- SQLite (embedded store) -----------------------------------------------------------------------
def owner_token(owner: Owner) -> str:
    """An opaque single FTS token standing for (tenant, user)."""
    digest = hashlib.sha256(f"{owner.tenant_id}\x00{owner.user_id}".encode()).hexdigest()[:32]
    return f"own{digest}x"


@dataclass(frozen=True, slots=True)
class _SqlDialect:
    """What differs between the two SQL translations: how a set and a time are passed."""

    param: str  #: the parameter placeholder
    time: Callable[[datetime], Any]  #: a time as the backend stores it
    any_of_array: bool  #: ``= ANY(array)`` (PostgreSQL) rather than ``IN (?, ?, ...)`` (SQLite)

    def one_of(self, column: str, values: list[str]) -> tuple[str, list[Any]]:
        if self.any_of_array:
            return f"{column} = ANY({self.param})", [values]
        return f"{column} IN ({','.join([self.param] * len(values))})", list(values)


_SQLITE = _SqlDialect("?", lambda t: t.timestamp(), any_of_array=False)
_POSTGRES = _SqlDialect("%s", lambda t: t, any_of_array=True)


def _sql_filter(flt: SearchFilter, d: _SqlDialect, a: str) -> tuple[str, list[Any]]:
    """``AND ...`` clauses over ``memories <a>`` (owner and is_current excluded), with their parameters:
    each column filter (``col IN (...)`` for a set, ``col = ...`` for one value: memories without one are
    excluded); ``session_id`` hides CONTEXT memories of other sessions (USER memories stay); the time range
    applies to ``COALESCE(event_time, message_time)`` and excludes memories with neither."""
    clauses: list[str] = []
    params: list[Any] = []
    for c, f in MEMORY_FILTERS:
        wanted = getattr(flt, f.name)  # a set of enum members (ANY_OF), one id (EQUALS), or None
        if wanted is None:
            continue
        if f.match is Match.ANY_OF:
            clause, values = d.one_of(f"{a}.{c.name}", [v.value for v in wanted])
        else:
            clause, values = f"{a}.{c.name} = {d.param}", [wanted]
        clauses.append(clause)
        params += values
    if flt.session_id is not None:
        clauses.append(f"({a}.scope <> 'CONTEXT' OR {a}.session_id = {d.param})")
        params.append(flt.session_id)
    if flt.time_from is not None:
        clauses.append(f"COALESCE({a}.event_time, {a}.message_time) >= {d.param}")
        params.append(d.time(flt.time_from))
    if flt.time_to is not None:
        clauses.append(f"COALESCE({a}.event_time, {a}.message_time) <= {d.param}")
        params.append(d.time(flt.time_to))
    return "".join(f" AND {c}" for c in clauses), params


def sqlite_filter(flt: SearchFilter) -> tuple[str, list[Any]]:
    """SQLite: ``?`` parameters, ``IN`` lists, times as epoch seconds (the columns are REAL)."""
    return _sql_filter(flt, _SQLITE, "m")


# -- PostgreSQL (dual store) -----------------------------------------------------------------------
def postgres_filter(flt: SearchFilter, alias: str = "m") -> tuple[str, list[Any]]:
    """PostgreSQL: ``%s`` parameters, ``= ANY(array)``, times as ``timestamptz``."""
    return _sql_filter(flt, _POSTGRES, alias)


# -- OpenSearch (keyword index, OpenSearch-only store) ----------------------------------------------
def opensearch_filter(flt: SearchFilter) -> list[dict[str, Any]]:
    """The ``bool.filter`` clauses of a search: owner, current, and the filter's narrowing.

    Same semantics as the SQL stores: each column filter (``terms`` for a set, ``term`` for one value);
    ``session_id`` hides CONTEXT memories of other sessions (USER ones stay); the time range applies to
    the effective time (event time, else message time) and excludes documents without one (a range
    query never matches a missing field).
    """
    clauses: list[dict[str, Any]] = [
        {"term": {"tenant_id": flt.owner.tenant_id}},
        {"term": {"user_id": flt.owner.user_id}},
        {"term": {"is_current": True}},
    ]
    for c, f in MEMORY_FILTERS:
        wanted = getattr(flt, f.name)  # a set of enum members (ANY_OF), one id (EQUALS), or None
        if wanted is None:
            continue
        if f.match is Match.ANY_OF:
            clauses.append({"terms": {c.name: sorted(v.value for v in wanted)}})
        else:
            clauses.append({"term": {c.name: wanted}})
    if flt.session_id is not None:
        clauses.append(
            {
                "bool": {
                    "should": [
                        {"bool": {"must_not": [{"term": {"scope": Scope.CONTEXT.value}}]}},
                        {"term": {"session_id": flt.session_id}},
                    ],
                    "minimum_should_match": 1,
                }
            }
        )
    if flt.time_from is not None or flt.time_to is not None:
        rng: dict[str, int] = {}
        if flt.time_from is not None:
            rng["gte"] = epoch_us(flt.time_from)
        if flt.time_to is not None:
            rng["lte"] = epoch_us(flt.time_to)
        clauses.append({"range": {"effective_us": rng}})
    return clauses


# -- numpy (the embedded store's in-memory vector index, stores/numpy_index.py) -----------------------
#: The memory columns the vector index keeps for :func:`numpy_mask`: every filtered column, and the
#: session (CONTEXT visibility; the scope it needs is a filtered column). The effective time is kept apart.
MASKED_RECORD: tuple[Column, ...] = tuple(c for c in MEMORY_RECORD if c.filter is not None or c.name == "session_id")
#: The int8 code of each member of the masked enum columns (the enum's order), by column and value (as
#: the store returns it); the member finds its code too (a ``StrEnum`` member is equal to its value and
#: hashes the same).
ENUM_CODES: dict[str, dict[str, int]] = {
    c.name: {m.value: i for i, m in enumerate(c.enum)} for c in MASKED_RECORD if c.enum is not None
}


class FilterColumns(Protocol):
    """The filterable columns of the vector index; its first ``n`` rows are the live ones."""

    n: int
    time: np.ndarray  #: float64 epoch seconds of the effective time, NaN when unknown

    @property
    def columns(self) -> Mapping[str, np.ndarray]:
        """Each column of :data:`MASKED_RECORD` by name: int8 :data:`ENUM_CODES` for an enum, objects (the
        text, None when absent) otherwise."""


def numpy_mask(flt: SearchFilter, cols: FilterColumns) -> np.ndarray | None:
    """Boolean mask of the rows the filter admits, or None when it admits all (the owner is the index's
    own: one index per owner; ``is_current`` too: the index holds current memories only)."""
    n = cols.n
    mask: np.ndarray | None = None

    def both(cond: np.ndarray) -> None:
        nonlocal mask
        mask = cond if mask is None else (mask & cond)

    for c, f in MEMORY_FILTERS:
        wanted = getattr(flt, f.name)
        if wanted is None:
            continue
        column = cols.columns[c.name][:n]
        if f.match is Match.ANY_OF:
            both(np.isin(column, [ENUM_CODES[c.name][v] for v in wanted]))
        else:
            both(column == wanted)
    if flt.session_id is not None:
        context = cols.columns["scope"][:n] == ENUM_CODES["scope"][Scope.CONTEXT]
        both(~context | (cols.columns["session_id"][:n] == flt.session_id))
    if flt.time_from is not None or flt.time_to is not None:
        t = cols.time[:n]
        cond = ~np.isnan(t)
        if flt.time_from is not None:
            cond &= t >= flt.time_from.timestamp()
        if flt.time_to is not None:
            cond &= t <= flt.time_to.timestamp()
        both(cond)
    return mask
