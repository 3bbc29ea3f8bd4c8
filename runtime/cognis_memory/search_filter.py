"""What a search may see: the one filter shape, from the request to the store.

:class:`MemoryFilter` is the filter as a caller asks for it (the search and context bodies' filter fields,
the CLI's ``--session``, a Python caller's ``filter=``); :func:`~cognis_memory.validation.check_filter`
checks it and adds the owner, giving the :class:`SearchFilter` that the retrieval pipeline carries in its
query and every store role receives. Both are this one dataclass: the fields are declared once, here.

The filters on one memory column each (``scopes``, ``categories``, ``kinds``, ``agent_id``) are marked on
their column in :data:`~cognis_memory.stores.records.MEMORY_RECORD` with :func:`any_of` or :func:`equals`,
and every backend's translation walks those marks (:mod:`cognis_memory.stores.filters`). The module sits
below both retrieval and the stores (it imports only :mod:`cognis_memory.domain`) so that the stores can
receive the filter without importing the pipeline that builds it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from enum import StrEnum

from .domain import Category, MemoryKind, Owner, Scope


class Match(StrEnum):
    """How a search filter on one memory column (:class:`ColumnFilter`) admits a memory."""

    #: the filter is a set of members of the (enum) column's enum: a memory is admitted when its value is one
    #: of them (an empty set admits none)
    ANY_OF = "any_of"
    #: the filter is one id: a memory is admitted when the (text) column holds it (a memory without one never is)
    EQUALS = "equals"


@dataclass(frozen=True, slots=True)
class ColumnFilter:
    """A search filter on one memory column: ``name`` is its field in :class:`MemoryFilter` and in the
    search request (``scopes`` filters the column ``scope``). Every backend's translation, the embedded
    store's vector index and the request check follow from it (:mod:`cognis_memory.stores.filters`,
    :mod:`cognis_memory.stores.numpy_index`, :func:`~cognis_memory.validation.check_filter`)."""

    name: str
    match: Match


def any_of(name: str) -> ColumnFilter:
    return ColumnFilter(name, Match.ANY_OF)


def equals(name: str) -> ColumnFilter:
    return ColumnFilter(name, Match.EQUALS)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryFilter:
    """What a search may see beyond its owner; every field narrows it, and one left None does not.

    ``scopes``, ``categories``, ``kinds`` and ``agent_id`` are column filters: each is declared on its
    column in :data:`~cognis_memory.stores.records.MEMORY_RECORD` (``filter=any_of(...)``: the memory's
    value is one of the set, an empty set admits nothing; ``filter=equals(...)``: the memory holds that
    value, one without a value is excluded), and every translation follows from there.
    ``session_id``: CONTEXT-scope memories are visible only when they belong to this session
    (USER-scope memories are unaffected); ``None`` means CONTEXT memories of every session.
    ``time_from``/``time_to`` apply to the effective time (event time, else message time), both ends
    included; memories without any time are excluded when a range is given.

    ``MemoryFilter(session_id="s-42", kinds=frozenset({MemoryKind.FACT}))``: the session's CONTEXT
    memories and every USER memory, extracted facts only. A caller's filter is checked (ids, times,
    enum values, which may also be given as their strings) by the service before a search runs.
    """

    scopes: frozenset[Scope] | None = None
    session_id: str | None = None
    categories: frozenset[Category] | None = None
    kinds: frozenset[MemoryKind] | None = None
    agent_id: str | None = None
    time_from: datetime | None = None
    time_to: datetime | None = None


@dataclass(frozen=True, slots=True)
class SearchFilter(MemoryFilter):
    """A checked :class:`MemoryFilter` with its owner (tenant and user), mandatory: what a store's search
    receives. ``SearchFilter(owner, kinds=frozenset({MemoryKind.FACT}))``."""

    owner: Owner


#: the names of every filter a search takes (the fields of :class:`MemoryFilter`), in their order
FILTER_NAMES: tuple[str, ...] = tuple(f.name for f in fields(MemoryFilter))
