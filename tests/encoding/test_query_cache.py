"""The in-process query-vector cache: bounded per tenant and in total, keyed by what the model sees."""

from __future__ import annotations

import numpy as np

from cognis_memory.encoding.query_cache import QueryVectorCache


def v(x: float) -> np.ndarray:
    return np.full(4, x, dtype=np.float32)


def test_entries_are_per_tenant_and_user() -> None:
    cache = QueryVectorCache(per_tenant=10, total=100)
    cache.put("t1", "u", "q", v(1))
    assert cache.get("t2", "u", "q") is None and cache.get("t1", "other", "q") is None
    np.testing.assert_array_equal(cache.get("t1", "u", "q"), v(1))
    stored = cache.get("t1", "u", "q")
    assert not stored.flags.writeable  # callers cannot change what others will read


def test_a_tenant_filling_its_share_evicts_only_its_own_oldest_entries() -> None:
    cache = QueryVectorCache(per_tenant=3, total=100)
    cache.put("quiet", "u", "kept", v(0))
    for i in range(10):
        cache.put("busy", "u", f"q{i}", v(i))
    cache.get("busy", "u", "q7")  # used again: now the newest
    cache.put("busy", "u", "q10", v(10))
    assert cache.get("quiet", "u", "kept") is not None
    assert [k for k in ("q7", "q8", "q9", "q10") if cache.get("busy", "u", k) is not None] == ["q7", "q9", "q10"]
    assert len(cache) == 4


def test_the_total_bound_takes_from_the_least_recently_used_tenant() -> None:
    cache = QueryVectorCache(per_tenant=10, total=4)
    for t in ("a", "b"):
        cache.put(t, "u", "1", v(1))
        cache.put(t, "u", "2", v(2))
    cache.get("a", "u", "1")  # tenant a is now the more recent
    cache.put("c", "u", "1", v(1))
    assert len(cache) == 4
    assert cache.get("b", "u", "1") is None and cache.get("b", "u", "2") is not None
    assert cache.get("a", "u", "1") is not None and cache.get("a", "u", "2") is not None


def test_forget_user_and_a_disabled_cache() -> None:
    cache = QueryVectorCache(per_tenant=10, total=10)
    cache.put("t", "alice", "q", v(1))
    cache.put("t", "bob", "q", v(2))
    assert cache.forget_user("t", "alice") == 1
    assert cache.get("t", "alice", "q") is None and cache.get("t", "bob", "q") is not None
    off = QueryVectorCache(per_tenant=0)
    off.put("t", "u", "q", v(1))
    assert off.get("t", "u", "q") is None and len(off) == 0


async def test_repeated_and_respelled_queries_are_embedded_once_per_tenant(make_service) -> None:
    svc = await make_service()
    await svc.add_messages("t1", "ana", [_msg("My dog is called Rex")])
    await svc.add_messages("t2", "ana", [_msg("My dog is called Rex")])
    calls = svc.encoder.batcher.calls
    first = await svc.search("t1", "ana", "What is my dog called?")
    assert svc.encoder.batcher.calls == calls + 1
    again = await svc.search("t1", "ana", "what is  my DOG called ?")  # the same tokens for the model
    assert svc.encoder.batcher.calls == calls + 1
    assert [h.memory.id for h in again.hits] == [h.memory.id for h in first.hits]
    await svc.search("t2", "ana", "What is my dog called?")  # another tenant: its own entry
    assert svc.encoder.batcher.calls == calls + 2
    await svc.forget_user("t1", "ana")
    await svc.search("t1", "ana", "What is my dog called?")
    assert svc.encoder.batcher.calls == calls + 3


def _msg(content: str):
    from cognis_memory.service import MessageBody

    return MessageBody(content=content, speaker="Ana")
