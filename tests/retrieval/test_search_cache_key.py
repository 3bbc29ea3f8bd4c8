"""The search-result cache key is derived from the whole filter: two searches that may see
different memories never share a cached answer, including through a filter field added later."""

from __future__ import annotations

from dataclasses import fields, replace
from datetime import UTC, datetime
from typing import Any

import pytest

from cognis_memory.domain import Category, Memory, Owner
from cognis_memory.retrieval import cached
from cognis_memory.retrieval.cached import search_cache_key
from cognis_memory.retrieval.recipes import RECIPES
from cognis_memory.retrieval.search_types import SearchHit, SearchQuery, SearchResponse
from cognis_memory.search_filter import ColumnFilter, Match, SearchFilter
from cognis_memory.stores.records import MEMORY_FILTERS, Column

NOW = datetime(2024, 5, 1, 12, tzinfo=UTC)
BASE = SearchFilter(owner=Owner("t", "u"))


def _sample(c: Column, f: ColumnFilter) -> Any:
    """A value of the column filter ``f`` on ``c``: a set of one enum member, or one id."""
    return frozenset({next(iter(c.enum))}) if c.enum is not None and f.match is Match.ANY_OF else "a1"


#: a value for each field other than the owner: the rules of their own written here, the column filters'
#: from the record; a field added to SearchFilter that is neither fails below
OTHER: dict[str, Any] = {
    "session_id": "s1",
    "time_from": datetime(2024, 1, 1, tzinfo=UTC),
    "time_to": datetime(2024, 2, 1, tzinfo=UTC),
} | {f.name: _sample(c, f) for c, f in MEMORY_FILTERS}


def key(flt: SearchFilter) -> str:
    return search_cache_key(SearchQuery(filter=flt, text="where do I live", now=NOW), RECIPES["default"])


def test_every_filter_field_has_a_case_here() -> None:
    assert {f.name for f in fields(SearchFilter)} - {"owner"} == set(OTHER)


@pytest.mark.parametrize("name", sorted(OTHER))
def test_each_filter_field_changes_the_key(name: str) -> None:
    assert key(replace(BASE, **{name: OTHER[name]})) != key(BASE)


def test_no_filter_and_an_empty_set_are_different_keys() -> None:
    assert key(replace(BASE, scopes=frozenset())) != key(BASE)


def test_the_key_does_not_depend_on_set_order_or_the_owner() -> None:
    both = frozenset({Category.HEALTH, Category.HOBBIES})
    assert key(replace(BASE, categories=both)) == key(replace(BASE, categories=frozenset(reversed(list(both)))))
    assert key(replace(BASE, owner=Owner("t", "v"))) == key(BASE)  # the cache keys owners apart itself


def test_a_cached_answer_keeps_each_memorys_chain_id_and_earlier_forms_are_not_read(monkeypatch) -> None:
    first = Memory("t", "u", "lives in Porto", Category.PERSONAL_DETAILS)
    head = first.next_version(content="lives in Lisbon")
    first.is_current = False
    stored = cached.response_to_cache(SearchResponse([SearchHit(head, 0.5, history=[first])], analysis=None))  # type: ignore[arg-type]
    back = cached.response_from_cache(stored, analysis=None)  # type: ignore[arg-type]
    (hit,) = back.hits
    assert (hit.memory.id, hit.memory.chain_id) == (head.id, first.id) != (head.id, head.id)
    assert [(m.id, m.chain_id) for m in hit.history] == [(first.id, first.id)]
    # answers cached in another form (an earlier release's memories had no chain id) have other keys
    before = key(BASE)
    monkeypatch.setattr(cached, "CACHED_FORM", cached.CACHED_FORM - 1)
    assert key(BASE) != before
