"""The dual store when OpenSearch fails or drifts: degraded reads, durable writes through the
outbox, recovery, and reconcile finding and repairing planted drift."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import numpy as np
import pytest
import pytest_asyncio
from cognis_dev.databases import create_database
from cognis_dev.fixtures import start_or_skip

from cognis_memory.domain import Owner
from cognis_memory.errors import DependencyUnavailableError
from cognis_memory.search_filter import SearchFilter
from cognis_memory.stores.dual import DualStore
from cognis_memory.stores.opensearch import IndexOp, OpenSearchKeywordIndex, doc_version_current, memory_fields
from cognis_memory.stores.postgres import PostgresStore
from cognis_memory.stores.reconcile import reconcile
from tests.stores.helpers import (
    DIM,
    DIM_SHORT,
    make_memory,
    new_owner,
    new_prefix,
    os_client,
    short_of,
)

pytestmark = pytest.mark.integration


def _dual(pg_dsn: str, os_url: str) -> DualStore:
    keyword = OpenSearchKeywordIndex(
        os_client(os_url, timeout=5), index_prefix=new_prefix(), replicas=0, refresh=True, search_timeout_s=1.0
    )
    return DualStore(PostgresStore(create_database(pg_dsn), dim=DIM, dim_short=DIM_SHORT), keyword, down_skip_s=5.0)


async def _ids(store: DualStore, owner: Owner, text: str) -> list[str]:
    return [h.memory.id for h in await store.roles().keywords.keyword_search(SearchFilter(owner), text, limit=10)]


async def test_opensearch_outage_degrades_reads_and_keeps_writes(postgres_server, rng: np.random.Generator) -> None:
    from cognis_dev.local_servers import OpenSearchServer

    server = start_or_skip(OpenSearchServer(die_with_parent=True))
    store = _dual(postgres_server.dsn, server.url)
    await store.open()
    try:
        o = new_owner()
        other = Owner(o.tenant_id, "other")
        violin = make_memory(o, "I play the violin", rng)
        river = make_memory(o, "I live near the river", rng)
        theirs = make_memory(other, "the other user loves the violin", rng)
        await store.roles().memories.insert_memories([violin, river, theirs])
        assert await _ids(store, o, "violin") == [violin.id]
        assert await store.outbox_size() == 0

        server.kill()  # OpenSearch crashes

        t0 = time.monotonic()
        with pytest.raises(DependencyUnavailableError) as info:
            await store.roles().keywords.keyword_search(SearchFilter(o), "violin", limit=5)
        assert info.value.dependency == "opensearch" and time.monotonic() - t0 < 2.0
        vec = await store.roles().vectors.vector_search(
            SearchFilter(o), river.embedding, short_of(river.embedding), limit=5, shortlist=50
        )  # type: ignore[arg-type]
        assert vec.hits[0].memory.id == river.id

        t0 = time.monotonic()
        cello = make_memory(o, "I started learning the cello", rng)
        await store.roles().memories.insert_memories([cello])
        violin2 = await store.roles().memories.write_version(
            o, violin.id, violin.next_version(content="I used to play the violin")
        )
        counts = await store.roles().memories.forget_user(other)
        assert time.monotonic() - t0 < 3.0, "writes must not wait for OpenSearch"
        assert counts["memories"] == 1 and counts["index_pending"] == 1
        assert await store.outbox_size() == 4  # cello, violin (delete), violin2, forget(other)
        assert await store.health() == {"postgres": True, "opensearch": False}
        with pytest.raises(DependencyUnavailableError):
            await store.drain_outbox()

        store.start_background_drain(interval_s=0.2, max_backoff_s=1.0)
        await asyncio.sleep(1.0)  # the loop keeps failing and backing off without dying
        assert await store.outbox_size() == 4

        server.start()  # OpenSearch returns (same port, same data)
        deadline = time.monotonic() + 60
        while await store.outbox_size():
            assert time.monotonic() < deadline, "the background drain did not empty the outbox"
            await asyncio.sleep(0.2)
        await store.stop_background_drain()
        assert await store.drain_outbox(100) == 0
        assert await store.health() == {"postgres": True, "opensearch": True}

        assert await _ids(store, o, "violin") == [violin2.id]  # the old version is gone from the index
        assert await _ids(store, o, "cello") == [cello.id]
        assert await store.keyword.count(tenant_id=o.tenant_id, user_id="other") == 0  # the forget completed
        report = await reconcile(store, repair=False, tenant_id=o.tenant_id)
        assert report.drift == 0 and report.pending == 0, report.to_dict()
        assert report.postgres_current == report.opensearch_documents == 3
    finally:
        await store.close()
        server.stop()


@pytest_asyncio.fixture
async def dual(postgres_server, opensearch_server) -> AsyncIterator[DualStore]:
    store = _dual(postgres_server.dsn, opensearch_server.url)
    await store.open()
    yield store
    await store.close()


async def test_reconcile_detects_and_repairs_planted_drift(dual: DualStore, rng: np.random.Generator) -> None:
    store, o = dual, new_owner()
    ms = [make_memory(o, f"note {w}", rng) for w in ("apple", "banana", "cherry", "date", "elder")]
    await store.roles().memories.insert_memories(ms)
    v2 = await store.roles().memories.write_version(o, ms[0].id, ms[0].next_version(content="note apricot"))
    client, alias = store.keyword.client, store.keyword.alias

    # Drift made behind the store's back:
    client.delete(index=alias, id=ms[1].id, refresh=True)  # a current memory's document vanished
    client.index(index=alias, id=ms[0].id, body=memory_fields(ms[0]), refresh=True)  # a superseded version is back
    ghost = make_memory(o, "note ghost apple", rng)
    client.index(index=alias, id=ghost.id, body=memory_fields(ghost), refresh=True)  # never existed in Postgres
    wrong = memory_fields(ms[2]) | {"version": 7}
    client.index(index=alias, id=ms[2].id, body=wrong, refresh=True)  # wrong version

    # Hydration from Postgres already hides the stale and the ghost documents from searches.
    assert await _ids(store, o, "apple") == []
    assert await _ids(store, o, "banana") == []  # missing: invisible to BM25 until repaired

    for _ in range(2):  # a check-only run changes nothing
        report = await reconcile(store, repair=False, tenant_id=o.tenant_id)
        assert (report.missing, report.extra, report.mismatched, report.indexed, report.deleted) == (1, 2, 1, 0, 0)
        assert report.postgres_current == 5 and report.opensearch_documents == 6
        assert report.samples["missing"] == [ms[1].id] and sorted(report.samples["extra"]) == sorted(
            [ms[0].id, ghost.id]
        )
        assert report.to_dict()["drift"] == 4

    fixed = await reconcile(store, repair=True, tenant_id=o.tenant_id)
    assert (fixed.indexed, fixed.deleted, fixed.repair_failures) == (2, 2, 0), fixed.to_dict()
    clean = await reconcile(store, repair=True, tenant_id=o.tenant_id)
    assert clean.drift == 0 and clean.indexed == clean.deleted == 0
    assert await _ids(store, o, "banana") == [ms[1].id]
    assert (await store.keyword.get_document(ms[2].id))["version"] == 1  # type: ignore[index]
    assert await store.keyword.get_document(ghost.id) is None

    # Normal operation continues on top of the repaired documents.
    b2 = await store.roles().memories.write_version(o, ms[1].id, ms[1].next_version(content="note blueberry"))
    assert await _ids(store, o, "banana blueberry") == [b2.id]
    assert await _ids(store, o, "apricot") == [v2.id]
    assert (await reconcile(store, repair=False, tenant_id=o.tenant_id)).drift == 0


async def test_a_stale_retry_cannot_resurrect_an_old_version(dual: DualStore, rng: np.random.Generator) -> None:
    store, o = dual, new_owner()
    m = make_memory(o, "note quince", rng)
    await store.roles().memories.insert_memories([m])
    await store.roles().memories.write_version(o, m.id, m.next_version(content="note plum"))
    assert await store.keyword.get_document(m.id) is None
    # A delayed retry of the first upsert arrives after the delete: rejected by the external version.
    (res,) = await store.keyword.apply([IndexOp("index", m.id, doc_version_current(m.version), memory_fields(m))])
    assert res.ok and res.status == 409
    assert await store.keyword.get_document(m.id) is None
    assert (await reconcile(store, repair=False, tenant_id=o.tenant_id)).drift == 0
