"""The Redis cache against a real Redis: hits and misses, generations, forgetting, and running
(as misses) while Redis is down."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import numpy as np
import pytest
import pytest_asyncio
from redis.asyncio import Redis

from cognis_memory.caching.redis_cache import RedisCache, owner_prefix
from cognis_memory.caching.result_cache import Cache
from cognis_memory.domain import Owner
from tests.servers import start_or_skip

pytestmark = pytest.mark.integration


def _owner(user: str = "u1") -> Owner:
    return Owner(f"t-{uuid.uuid4().hex[:8]}", user)


@pytest_asyncio.fixture
async def cache(redis_server) -> AsyncIterator[RedisCache]:
    c = RedisCache(redis_server.url, ttl_s=60)
    yield c
    await c.close()


@pytest_asyncio.fixture
async def raw(redis_server) -> AsyncIterator[Redis]:
    r = Redis.from_url(redis_server.url)
    yield r
    await r.aclose()


async def test_query_embeddings_round_trip_per_owner_and_model(cache: RedisCache) -> None:
    assert isinstance(cache, Cache)
    o = _owner()
    v = np.random.default_rng(1).normal(size=384).astype(np.float32)
    assert await cache.get_query_embedding(o, "minilm", "hello") is None
    await cache.set_query_embedding(o, "minilm", "hello", v)
    got = await cache.get_query_embedding(o, "minilm", "hello")
    assert got is not None and got.dtype == np.float32 and np.array_equal(got, v)
    assert await cache.get_query_embedding(o, "titan", "hello") is None
    assert await cache.get_query_embedding(o, "minilm", "hello!") is None
    assert await cache.get_query_embedding(Owner(o.tenant_id, "u2"), "minilm", "hello") is None


async def test_search_results_follow_the_generation(cache: RedisCache) -> None:
    o = _owner()
    assert await cache.get_search(o, "q1") is None
    await cache.set_search(o, "q1", {"hits": [1, 2]})
    assert await cache.get_search(o, "q1") == {"hits": [1, 2]}
    await cache.invalidate(o)
    assert await cache.get_search(o, "q1") is None
    await cache.set_search(o, "q1", {"hits": [3]})
    assert await cache.get_search(o, "q1") == {"hits": [3]}
    # Another user of the same tenant is unaffected by this user's invalidation.
    other = Owner(o.tenant_id, "u2")
    await cache.set_search(other, "q1", {"hits": ["x"]})
    await cache.invalidate(o)
    assert await cache.get_search(other, "q1") == {"hits": ["x"]}


async def test_a_result_computed_before_a_write_is_never_served_after_it(cache: RedisCache) -> None:
    o = _owner()
    assert await cache.get_search(o, "q") is None  # miss: the caller starts computing ...
    await cache.invalidate(o)  # ... a write lands meanwhile ...
    await cache.set_search(o, "q", {"stale": True})  # ... and the stale result is stored afterwards
    assert await cache.get_search(o, "q") is None


async def test_ids_with_separators_cannot_collide(cache: RedisCache) -> None:
    a, b = Owner("acme:eu", "bob"), Owner("acme", "eu:bob")
    tag = uuid.uuid4().hex
    await cache.set_search(a, tag, {"who": "a"})
    assert await cache.get_search(b, tag) is None
    assert owner_prefix(a) != owner_prefix(b)
    assert not owner_prefix(b).startswith(owner_prefix(a)) and not owner_prefix(a).startswith(owner_prefix(b))
    await cache.forget_user(a)
    await cache.forget_user(b)


async def test_forget_user_deletes_every_key_of_the_user_only(cache: RedisCache, raw: Redis) -> None:
    o, bystander = _owner("glob*[user]?"), _owner()
    for i in range(30):
        await cache.set_search(o, f"q{i}", {"i": i})
        await cache.set_query_embedding(o, "m", f"text {i}", np.ones(4, dtype=np.float32))
    await cache.invalidate(o)
    await cache.set_search(bystander, "q", {"keep": True})
    assert len([k async for k in raw.scan_iter(match=owner_prefix(o) + "*")]) == 61
    removed = await cache.forget_user(o)
    assert removed == 61
    assert [k async for k in raw.scan_iter(match=owner_prefix(o) + "*")] == []
    assert await cache.get_search(bystander, "q") == {"keep": True}
    assert await cache.get_query_embedding(o, "m", "text 1") is None


async def test_entries_expire_with_the_ttl(redis_server, raw: Redis) -> None:
    c = RedisCache(redis_server.url, ttl_s=7)
    try:
        o = _owner()
        await c.set_search(o, "q", {"a": 1})
        await c.set_query_embedding(o, "m", "t", np.ones(2, dtype=np.float32))
        ttls = [await raw.ttl(k) async for k in raw.scan_iter(match=owner_prefix(o) + "*")]
        assert len(ttls) == 2 and all(0 < t <= 7 for t in ttls)
    finally:
        await c.close()


async def test_cache_runs_as_misses_while_redis_is_down() -> None:
    from scripts.local_servers import RedisServer

    server = start_or_skip(RedisServer(die_with_parent=True))
    cache = RedisCache(server.url, ttl_s=60, retry_after_s=0.2, socket_timeout_s=0.25)
    try:
        o = _owner()
        await cache.set_search(o, "q", {"v": 1})
        assert await cache.get_search(o, "q") == {"v": 1} and await cache.health()

        server.kill()
        t0 = time.monotonic()
        for _ in range(50):  # no call raises, all are misses / no-ops, and quickly
            assert await cache.get_search(o, "q") is None
            await cache.set_search(o, "q", {"v": 2})
            await cache.invalidate(o)
            assert await cache.get_query_embedding(o, "m", "t") is None
            await cache.set_query_embedding(o, "m", "t", np.ones(3, dtype=np.float32))
            assert await cache.forget_user(o) == 0
        assert time.monotonic() - t0 < 3.0
        assert await cache.health() is False

        server.start()  # same port, same (non-persistent) server process again
        deadline = time.monotonic() + 5
        while not await cache.health():
            assert time.monotonic() < deadline, "the cache did not come back after Redis restarted"
            await asyncio.sleep(0.1)
        await cache.set_search(o, "q", {"v": 3})
        assert await cache.get_search(o, "q") == {"v": 3}
    finally:
        await cache.close()
        server.stop()
