"""Fixtures of the store tests: every store kind on real backends, fresh namespaces, data helpers.

* ``harness`` (session scope, parametrized ``embedded`` / ``dual`` / ``opensearch``, the kinds that need
  a server marked ``integration``: ``-m "not integration"`` runs the embedded store's cases alone): one open
  store per kind, shared by the contract tests; each test uses fresh tenant ids (uuid), so the
  tests do not see each other's data.
* ``fresh_harness`` (function scope, same parameters): a store in a namespace of its own (new
  SQLite file, new PostgreSQL database, new OpenSearch index prefix) for tests of global
  operations such as job claiming.
* ``Harness.raw_counts(owner)`` counts the owner's records *directly in the backend* (SQL in
  SQLite/PostgreSQL, ``_count`` in OpenSearch), bypassing the store under test.

Each kind is built and read by its harness in :mod:`tests.store_kinds`, which the reliability suites share.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import pytest_asyncio

from tests.store_kinds import KINDS, kind_params
from tests.stores.helpers import DIM, DIM_SHORT, STORE_KINDS, Harness


async def build_harness(request: pytest.FixtureRequest, kind: str, tmp: Path) -> Harness:
    """An open store of ``kind`` built by its harness (:data:`tests.store_kinds.KINDS`)."""
    kind_harness = KINDS[kind]
    handle = kind_harness.new(request, tmp, DIM, DIM_SHORT)
    await handle.store.open()
    return Harness(kind, handle.store.roles(), partial(kind_harness.owner_counts, handle), [handle.store.close])


@pytest_asyncio.fixture(scope="session", params=kind_params(STORE_KINDS))
async def harness(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Harness]:
    h = await build_harness(request, request.param, tmp_path_factory.mktemp(f"store-{request.param}"))
    yield h
    await h.close()


@pytest_asyncio.fixture(params=kind_params(STORE_KINDS))
async def fresh_harness(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Harness]:
    h = await build_harness(request, request.param, tmp_path)
    yield h
    await h.close()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)
