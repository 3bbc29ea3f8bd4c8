"""The search-result cache in a real Redis, through the service: an unchanged search is answered by
Redis, and after each kind of write (a message added, a memory edited, a memory deleted) the same
search is computed afresh and shows the write, never the answer cached before it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio

from cognis_memory.config import Settings
from cognis_memory.message_body import MessageBody
from cognis_memory.service import MemoryService
from cognis_memory.stores.embedded import EmbeddedStore
from tests.conftest import CapturedTelemetry

TENANT, USER = "acme", "robin"


@pytest_asyncio.fixture
async def cached(tmp_path, embedder, redis_server) -> AsyncIterator[tuple[MemoryService, CapturedTelemetry]]:
    from cognis_memory.caching.redis_cache import RedisCache

    captured = CapturedTelemetry()
    settings = Settings(data_dir=tmp_path, run_worker=False)
    store = EmbeddedStore(
        settings.embedded.resolved_sqlite_path, dim=embedder.dim, dim_short=settings.encoder.dim_short
    )
    cache = RedisCache(redis_server.url, ttl_s=300)
    await cache.forget_user(_owner())  # nothing of an earlier run of this test on the shared server
    svc = MemoryService(settings, store=store, embedder=embedder, cache=cache, telemetry=captured.telemetry)
    await svc.start()
    try:
        yield svc, captured
    finally:
        await svc.close()


def _owner() -> Any:
    from cognis_memory.domain import Owner

    return Owner(TENANT, USER)


async def _search(svc: MemoryService, captured: CapturedTelemetry, query: str) -> tuple[list[str], bool]:
    """(contents of the hits, whether Redis answered) of one search."""
    before = len(captured.log_lines())
    res = await svc.search(TENANT, USER, query)
    lines = [r for r in captured.log_lines()[before:] if r.get("event") == "memory_retrieval"]
    assert len(lines) == 1, lines
    return [h.memory.content for h in res.hits], lines[0].get("cache") == "hit"


async def test_a_write_is_never_hidden_by_a_cached_search(cached) -> None:
    svc, captured = cached
    added = await svc.add_messages(TENANT, USER, [MessageBody(content="I keep two bee hives", speaker="Robin")])
    query = "what do I keep in the garden"
    first, hit = await _search(svc, captured, query)
    assert not hit and first == ["I keep two bee hives"]
    again, hit = await _search(svc, captured, query)
    assert hit and again == first, "an unchanged search should be answered by Redis"

    # a message added
    await svc.add_messages(TENANT, USER, [MessageBody(content="I keep three goats in the garden", speaker="Robin")])
    after_add, hit = await _search(svc, captured, query)
    assert not hit and "I keep three goats in the garden" in after_add
    assert (await _search(svc, captured, query)) == (after_add, True)

    # a memory edited
    hives = added.raw_memories[0].id
    await svc.update_memory(TENANT, USER, hives, content="I keep five bee hives")
    after_edit, hit = await _search(svc, captured, query)
    assert not hit and "I keep five bee hives" in after_edit and "I keep two bee hives" not in after_edit
    assert (await _search(svc, captured, query)) == (after_edit, True)

    # a memory deleted
    await svc.delete_memory(TENANT, USER, hives)
    after_delete, hit = await _search(svc, captured, query)
    assert not hit and not any("bee hives" in c for c in after_delete)
    assert "I keep three goats in the garden" in after_delete


async def test_a_search_cached_before_the_keyword_side_caught_up_is_not_served_after_it(
    tmp_path, embedder, redis_server, postgres_server, opensearch_server
) -> None:
    """The dual store as the service runs it (drain loop, index refreshed by OpenSearch's clock): a search
    right after a write may miss the new message (its words reach OpenSearch within the outbox lag), and
    once the lag has passed the same search shows it, although the answer without it was cached."""
    import asyncio

    from cognis_dev.databases import create_database

    from cognis_memory.caching.redis_cache import RedisCache
    from tests.store_kinds import build_dual

    settings = Settings(data_dir=tmp_path, run_worker=False)
    handle = build_dual(
        create_database(postgres_server.dsn), opensearch_server.url, embedder.dim, settings.encoder.dim_short,
        refresh="wait_for", background_drain_interval_s=1.0,
    )  # fmt: skip
    captured = CapturedTelemetry()
    cache = RedisCache(redis_server.url, ttl_s=300)
    await cache.forget_user(_owner())
    svc = MemoryService(settings, store=handle.store, embedder=embedder, cache=cache, telemetry=captured.telemetry)
    await svc.start()
    try:
        topics = ["sailing", "chess", "pottery", "tango", "kayak", "violin", "bread", "hiking", "poetry", "tea"]
        others = [f"I talked about {a} and {b} with my sister" for a in topics for b in topics[:2] if a != b]
        await svc.add_messages(TENANT, USER, [MessageBody(content=c, speaker="Robin") for c in others])
        await asyncio.sleep(2.5)  # the seeded messages are in OpenSearch
        query = "did I mention zqmedlar"
        await _search(svc, captured, query)
        await svc.add_messages(TENANT, USER, [MessageBody(content="zqmedlar is what I named the cat", speaker="Robin")])
        await _search(svc, captured, query)  # within the lag: may be computed without the new message, and cached
        await asyncio.sleep(2.5)  # the outbox lag: the drain pushes it and OpenSearch refreshes
        later, _ = await _search(svc, captured, query)
        assert "zqmedlar is what I named the cat" in later, later
    finally:
        await svc.close()
