"""Every backend's translation of a SearchFilter sits in stores/filters.py (issue 24, item 2), and every one
of them translates every filter field: a field added to SearchFilter and forgotten by one backend fails here
(which rows each translation admits is the contract suite's part, tests/stores/test_contract.py)."""

from __future__ import annotations

from dataclasses import fields, replace

import numpy as np
import pytest

from cognis_memory.stores import filters
from cognis_memory.stores.numpy_index import UserVectorIndex
from cognis_memory.stores.values import SearchFilter
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
    assert {f.name for f in fields(SearchFilter)} - {"owner"} == set(OTHER)


@pytest.mark.parametrize("backend", sorted(TRANSLATIONS))
@pytest.mark.parametrize("name", sorted(OTHER))
def test_every_backend_translates_every_filter_field(backend: str, name: str) -> None:
    translate = TRANSLATIONS[backend]
    base, narrowed = translate(BASE), translate(replace(BASE, **{name: OTHER[name]}))
    if backend == "numpy":
        assert base is None and isinstance(narrowed, np.ndarray)  # None: every row admitted
    else:
        assert narrowed != base, f"{backend} ignores {name}"
