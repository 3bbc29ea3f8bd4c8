"""``list_users`` on every store (embedded, dual, OpenSearch-only), on real backends: a tenant's users
in user-id order, paged by a cursor, confined to the tenant inside the query, with the number of
current memories and the time of the newest version."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import numpy as np

from cognis_memory.domain import Owner
from cognis_memory.stores.values import UserSummary
from tests.stores.helpers import Harness, make_memory

T0 = datetime(2025, 3, 1, 12, tzinfo=UTC)


def _tenant() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


async def _all_users(store, tenant: str, *, limit: int) -> list[UserSummary]:
    out: list[UserSummary] = []
    after = None
    while True:
        page = await store.memories.list_users(tenant, limit=limit, after_user_id=after)
        assert len(page) <= limit
        out += page
        if len(page) < limit:
            return out
        after = page[-1].user_id


async def test_users_of_a_tenant_in_order_paged_and_counted(harness: Harness, rng: np.random.Generator) -> None:
    store, tenant = harness.store, _tenant()
    users = ["zoe", "ana", "Bruno", "ana.maria", "0042", "émile", "bob"]
    for i, user in enumerate(users):
        owner = Owner(tenant, user)
        await store.memories.insert_memories(
            [
                make_memory(owner, f"{user} fact {k}", rng, created_at=T0 + timedelta(days=i, hours=k))
                for k in range(i % 3 + 1)
            ]
        )
    expected = sorted(users)  # byte/code point order, the order every backend sorts ids in
    for limit in (1, 2, 3, 100):
        listed = await _all_users(store, tenant, limit=limit)
        assert [u.user_id for u in listed] == expected, limit
    by_id = {u.user_id: u for u in await store.memories.list_users(tenant)}
    for i, user in enumerate(users):
        assert by_id[user].current_memories == i % 3 + 1
        newest = T0 + timedelta(days=i, hours=i % 3)
        assert abs(by_id[user].last_memory_at - newest) < timedelta(milliseconds=1), user
    assert await store.memories.list_users(tenant, after_user_id=expected[-1]) == []


async def test_other_tenants_are_never_listed(harness: Harness, rng: np.random.Generator) -> None:
    store, mine, other = harness.store, _tenant(), _tenant()
    await store.memories.insert_memories([make_memory(Owner(mine, "ana"), "mine", rng)])
    await store.memories.insert_memories([make_memory(Owner(other, u), "theirs", rng) for u in ("ann", "zed", "ana")])
    await store.memories.insert_memories([make_memory(Owner(mine + "x", "ann2"), "prefix tenant", rng)])
    assert [u.user_id for u in await store.memories.list_users(mine)] == ["ana"]
    assert [u.current_memories for u in await store.memories.list_users(mine)] == [1]  # not counting the other ana
    for crafted in (f"{mine}' OR '1'='1", "%", "*", f"{mine}%", ""):
        assert await store.memories.list_users(crafted) == []


async def test_counts_follow_versions_tombstones_and_forgetting(harness: Harness, rng: np.random.Generator) -> None:
    store, tenant = harness.store, _tenant()
    ana, bob = Owner(tenant, "ana"), Owner(tenant, "bob")
    a1, a2 = make_memory(ana, "lives in Porto", rng), make_memory(ana, "likes tea", rng)
    await store.memories.insert_memories([a1, a2, make_memory(bob, "plays chess", rng)])
    v2 = await store.memories.write_version(ana, a1.id, a1.next_version(content="lives in Lisbon"))
    (row,) = [u for u in await store.memories.list_users(tenant) if u.user_id == "ana"]
    assert row.current_memories == 2  # the old version is history, not a current memory
    assert abs(row.last_memory_at - v2.created_at) < timedelta(milliseconds=1)
    await store.memories.write_version(ana, v2.id, v2.tombstone())
    await store.memories.write_version(ana, a2.id, a2.tombstone())
    listed = {u.user_id: u.current_memories for u in await store.memories.list_users(tenant)}
    assert listed == {"ana": 0, "bob": 1}  # a user whose memories are all deleted is still there (history)
    await store.memories.forget_user(ana)
    assert [u.user_id for u in await store.memories.list_users(tenant)] == ["bob"]
