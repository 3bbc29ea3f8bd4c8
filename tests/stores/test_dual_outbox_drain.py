"""The dual store's outbox relay as the service runs it (background drain loop), against the real
PostgreSQL and an OpenSearch of its own: a write wakes the loop and does not wait for OpenSearch, so
an OpenSearch that stops answering (SIGSTOP: the process is there, its sockets accept, nothing
answers) costs writes nothing, and what they wrote is searchable soon after it answers again."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time

import numpy as np
import pytest
from cognis_dev.databases import create_database
from cognis_dev.fixtures import start_or_skip

from cognis_memory.config import Settings
from cognis_memory.domain import Owner
from cognis_memory.errors import DependencyUnavailableError
from cognis_memory.search_filter import SearchFilter
from cognis_memory.stores.dual import DualStore
from cognis_memory.stores.dual.store import DRAIN_ROUND_SPACING_S
from cognis_memory.stores.opensearch import OpenSearchKeywordIndex
from cognis_memory.stores.postgres import PostgresStore
from cognis_memory.wiring import build_store
from tests.stores.helpers import DIM, DIM_SHORT, make_memory, new_owner, new_prefix, os_client

pytestmark = pytest.mark.integration

#: The loop's own period: far longer than anything below waits, so only a write's wake-up explains a prompt drain.
INTERVAL_S = 60.0
#: OpenSearch request timeout of the store (what a write used to wait for when OpenSearch did not answer).
TIMEOUT_S = 5.0


async def _found(store: DualStore, owner: Owner, word: str, within_s: float) -> float | None:
    """Seconds until a keyword search of ``word`` finds a memory of ``owner``, or None after ``within_s``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < within_s:
        with contextlib.suppress(DependencyUnavailableError):  # a fresh node's first searches can be slow here
            if await store.roles().keywords.keyword_search(SearchFilter(owner), word, limit=5):
                return time.monotonic() - t0
        await asyncio.sleep(0.1)
    return None


async def test_writes_wake_the_drain_and_never_wait_for_a_stopped_opensearch(
    postgres_server, rng: np.random.Generator
) -> None:
    from cognis_dev.local_servers import OpenSearchServer

    server = start_or_skip(OpenSearchServer(die_with_parent=True))
    keyword = OpenSearchKeywordIndex(
        os_client(server.url, timeout=TIMEOUT_S), index_prefix=new_prefix(), replicas=0, refresh=True,
        search_timeout_s=2.0, write_timeout_s=TIMEOUT_S,
    )  # fmt: skip
    store = DualStore(
        PostgresStore(create_database(postgres_server.dsn), dim=DIM, dim_short=DIM_SHORT),
        keyword,
        down_skip_s=2.0,
        background_drain_interval_s=INTERVAL_S,
    )
    await store.open()
    stopped = False
    try:
        o = new_owner()
        await store.roles().memories.insert_memories([make_memory(o, "I planted a quince tree", rng)])
        took = await _found(store, o, "quince", within_s=10.0)
        assert took is not None, "the write did not wake the drain loop"

        os.killpg(server.pid, signal.SIGSTOP)  # type: ignore[arg-type]
        stopped = True
        await asyncio.sleep(0.2)
        slowest = 0.0
        for word in ("medlar", "rowan", "sloe"):
            t0 = time.monotonic()
            await store.roles().memories.insert_memories([make_memory(o, f"I found a {word} bush", rng)])
            slowest = max(slowest, time.monotonic() - t0)
            await asyncio.sleep(0.5)
        # a write's own cost here is milliseconds; one that waited for OpenSearch took TIMEOUT_S
        assert slowest < TIMEOUT_S / 2, f"a write waited {slowest:.1f} s for the stopped OpenSearch"
        assert await store.outbox_size() == 3

        os.killpg(server.pid, signal.SIGCONT)  # type: ignore[arg-type]
        stopped = False
        # the loop retries every down_skip_s (2 s) at most while OpenSearch is out, not every INTERVAL_S
        for word in ("medlar", "rowan", "sloe"):
            assert await _found(store, o, word, within_s=20.0) is not None, f"{word} never reached OpenSearch"
        assert await store.outbox_size() == 0
    finally:
        if stopped:
            os.killpg(server.pid, signal.SIGCONT)  # type: ignore[arg-type]
        await store.close()
        server.stop()


async def test_a_drain_round_tells_its_listeners_of_many_owners_concurrently(
    postgres_server, opensearch_server, rng: np.random.Generator
) -> None:
    """The cache invalidations of a round run while its outbox rows are locked: one slow Redis round trip per
    owner, awaited one after another, would hold up to 500 rows for 500 round trips. Each listener call here
    waits until a second one is under way, which only calls made concurrently can satisfy."""
    keyword = OpenSearchKeywordIndex(
        os_client(opensearch_server.url), index_prefix=new_prefix(), replicas=0, refresh=True
    )
    store = DualStore(
        PostgresStore(create_database(postgres_server.dsn), dim=DIM, dim_short=DIM_SHORT), keyword, inline_drain=False
    )  # the rows wait for the one drain below
    await store.open()
    told: list[Owner] = []
    in_flight, peak = 0, 0
    two_at_once = asyncio.Event()

    async def listener(owner: Owner) -> None:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        if in_flight >= 2:
            two_at_once.set()
        try:
            await asyncio.wait_for(two_at_once.wait(), timeout=2.0)
        finally:
            in_flight -= 1
        told.append(owner)

    store.on_indexed(listener)
    try:
        owners = [new_owner() for _ in range(40)]
        for o in owners:
            await store.roles().memories.insert_memories([make_memory(o, "I keep bees on the roof", rng)])
        assert await store.drain_outbox() == len(owners)
        assert sorted(told, key=str) == sorted(owners, key=str)  # each owner once
        assert 2 <= peak <= 16
        assert await store.outbox_size() == 0
    finally:
        await store.close()


async def _refreshes(keyword: OpenSearchKeywordIndex) -> int:
    stats = await keyword.runner(keyword.client.indices.stats, index=keyword.alias, metric="refresh")
    return int(stats["_all"]["primaries"]["refresh"]["total"])


async def test_the_service_drain_makes_each_round_searchable_and_spaces_its_refreshes(
    postgres_server, opensearch_server, rng: np.random.Generator
) -> None:
    """The dual store as the settings build it: with the index's periodic refresh off, what a drain round
    pushed is searchable as soon as the round is done (its bulk refreshed the shards it wrote; one that waited
    for a periodic refresh would wait forever here), and a stream of writes does not turn into a refresh per
    write: rounds start at most every DRAIN_ROUND_SPACING_S."""
    settings = Settings(
        store="dual",
        postgres_dsn=create_database(postgres_server.dsn),
        opensearch_url=opensearch_server.url,
        opensearch_index_prefix=new_prefix(),
    )
    store = build_store(settings, dim=DIM, dim_short=DIM_SHORT).backend
    assert isinstance(store, DualStore)
    await store.open()  # starts the background drain, as the service does
    try:
        keyword = store.keyword
        await keyword.runner(
            keyword.client.indices.put_settings, index=keyword.alias, body={"index": {"refresh_interval": "-1"}}
        )
        o = new_owner()
        await store.roles().memories.insert_memories([make_memory(o, "I planted a quince tree", rng)])
        for _ in range(200):
            if await store.outbox_size() == 0:
                break
            await asyncio.sleep(0.05)
        assert await store.outbox_size() == 0, "the drain round did not finish"
        found = await store.roles().keywords.keyword_search(SearchFilter(o), "quince", limit=5)
        assert len(found) == 1, "a drained write was not searchable: its round did not refresh"

        before = await _refreshes(keyword)
        t0 = time.monotonic()
        for i in range(40):  # a write every 25 ms for about a second, each waking the drain
            await store.roles().memories.insert_memories([make_memory(o, f"note {i} about the orchard", rng)])
            await asyncio.sleep(0.025)
        for _ in range(200):
            if await store.outbox_size() == 0:
                break
            await asyncio.sleep(0.05)
        took = time.monotonic() - t0
        refreshes = await _refreshes(keyword) - before
        # a round per DRAIN_ROUND_SPACING_S over the time it took, and one more at each end
        assert 1 <= refreshes <= took / DRAIN_ROUND_SPACING_S + 2, (refreshes, took)
        assert len(await store.roles().keywords.keyword_search(SearchFilter(o), "orchard", limit=50)) == 40
    finally:
        await store.close()
