"""Every backend's translation of a SearchFilter sits in stores/filters.py, and every one of them translates
every filter field: a field added to MemoryFilter and forgotten by one backend fails here (which rows each
translation admits is the contract suite's part, tests/stores/test_contract.py, which also requires a case per
filter). The column filters come from the record (``Column(..., filter=...)``), so the record, MemoryFilter,
the request check, the request bodies and the route's filter are checked against each other here too."""

from __future__ import annotations

from dataclasses import fields, replace
from datetime import datetime
from typing import Any

import numpy as np
import pytest

from cognis_memory.api.routes.search import search_filter
from cognis_memory.api.schemas import ContextBody, SearchBody
from cognis_memory.domain import Scope
from cognis_memory.errors import InvalidInputError
from cognis_memory.search_filter import FILTER_NAMES, ColumnFilter, MemoryFilter, SearchFilter, any_of, equals
from cognis_memory.stores import filters
from cognis_memory.stores.numpy_index import UserVectorIndex
from cognis_memory.stores.records import MEMORY_FILTERS, Column
from cognis_memory.validation import FilterRequest, check_filter
from tests.retrieval.test_search_cache_key import BASE, OTHER


def _index() -> UserVectorIndex:
    rng = np.random.default_rng(1)
    full = rng.standard_normal((4, 8)).astype(np.float32)
    short = full[:, :4] / np.linalg.norm(full[:, :4], axis=1, keepdims=True)
    return UserVectorIndex.of_vectors(["a", "b", "c", "d"], full, short)


TRANSLATIONS = {
    "sqlite": filters.sqlite_filter,
    "postgres": filters.postgres_filter,
    "opensearch": filters.opensearch_filter,
    "numpy": lambda flt: filters.numpy_mask(flt, _index()),
}


def test_the_fields_checked_are_all_of_the_filters() -> None:
    assert {f.name for f in fields(SearchFilter)} - {"owner"} == set(OTHER) == set(FILTER_NAMES)


@pytest.mark.parametrize("backend", sorted(TRANSLATIONS))
@pytest.mark.parametrize("name", sorted(OTHER))
def test_every_backend_translates_every_filter_field(backend: str, name: str) -> None:
    translate = TRANSLATIONS[backend]
    base, narrowed = translate(BASE), translate(replace(BASE, **{name: OTHER[name]}))
    if backend == "numpy":
        assert base is None and isinstance(narrowed, np.ndarray)  # None: every row admitted
    else:
        assert narrowed != base, f"{backend} ignores {name}"


#: the SearchFilter fields that are rules of their own (written out in each translation), not column filters
OWN_RULES = {"owner", "session_id", "time_from", "time_to"}


def test_every_column_filter_of_the_record_is_a_search_filter_field_and_no_other() -> None:
    """The record's column filters and SearchFilter's fields name the same filters: a column flagged
    filterable without its SearchFilter field (or the other way round) fails here, not in a search."""
    assert {f.name for f in fields(SearchFilter)} - OWN_RULES == {f.name for _, f in MEMORY_FILTERS}


def test_the_search_and_context_bodies_take_every_filter() -> None:
    """The routes build the filter from the body's fields of these names: a filter the body lacks could
    never be asked for over HTTP."""
    for body in (SearchBody, ContextBody):
        assert set(FILTER_NAMES) <= set(body.model_fields), body.__name__


def _as_requested(value: Any) -> Any:
    """A filter value as a Python caller may give it: a set as a list of the enum values, the rest as it is."""
    return sorted(v.value for v in value) if isinstance(value, frozenset) else value


def _as_json(value: Any) -> Any:
    """A filter value as a request body gives it: a set as a list of the enum values, a time in ISO 8601."""
    return value.isoformat() if isinstance(value, datetime) else _as_requested(value)


@pytest.mark.parametrize("body", [SearchBody, ContextBody])
@pytest.mark.parametrize("name", sorted(OTHER))
def test_the_route_builds_the_filter_from_every_filter_field_of_the_body(body: Any, name: str) -> None:
    """A filter field the route's :func:`search_filter` forgets would be accepted over HTTP and ignored."""
    request = body.model_validate({"query": "q", name: _as_json(OTHER[name])})
    assert search_filter(request) == MemoryFilter(**{name: OTHER[name]})
    assert search_filter(body.model_validate({"query": "q"})) == MemoryFilter()


@pytest.mark.parametrize("name", sorted(OTHER))
def test_the_request_check_passes_every_filter_through(name: str) -> None:
    checked = check_filter(BASE.owner, MemoryFilter(**{name: _as_requested(OTHER[name])}))
    assert checked == replace(BASE, **{name: OTHER[name]})


def test_an_empty_set_stays_a_filter_that_admits_nothing() -> None:
    assert check_filter(BASE.owner, MemoryFilter(scopes=frozenset())) == replace(BASE, scopes=frozenset())
    assert search_filter(SearchBody.model_validate({"query": "q", "scopes": []})) == MemoryFilter(scopes=frozenset())


@pytest.mark.parametrize("name", sorted(OTHER))
def test_the_deprecated_filter_request_still_passes_every_filter_through(name: str) -> None:
    with pytest.warns(DeprecationWarning, match="FilterRequest"):
        request = FilterRequest(**{name: _as_requested(OTHER[name])})
    assert check_filter(BASE.owner, request) == replace(BASE, **{name: OTHER[name]})


def test_an_unknown_filter_of_the_deprecated_request_is_refused_naming_it() -> None:
    with pytest.warns(DeprecationWarning):
        request = FilterRequest(colour="red")
    with pytest.raises(InvalidInputError) as exc:
        check_filter(BASE.owner, request)
    assert exc.value.field == "colour"


@pytest.mark.parametrize(
    ("kind", "flt", "searched"),
    [
        ("text", any_of("xs"), True),
        ("enum", equals("x"), True),
        ("time", equals("x"), True),
        ("text", equals("x"), False),
    ],
)
def test_a_column_filter_the_translations_are_not_written_for_is_refused(
    kind: str, flt: ColumnFilter, searched: bool
) -> None:
    """Set membership is written for enum columns, equality for text columns, and the keyword index must hold
    the column to filter on it: any other combination fails where the record is defined."""
    with pytest.raises(ValueError, match="column filtered by"):
        Column("x", kind, Scope if kind == "enum" else None, searched=searched, filter=flt)
