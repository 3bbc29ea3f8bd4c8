"""OpenSearch-only store specifics: what a crash in the middle of a non-transactional write
leaves behind is tolerated and healed; mappings; concurrent job claims."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
import pytest_asyncio

from cognis_memory.domain import Job, Message
from cognis_memory.errors import ConflictError
from cognis_memory.search_filter import SearchFilter
from cognis_memory.stores.opensearch import OpenSearchStore, owner_key
from cognis_memory.stores.opensearch.memories import OpenSearchMemories
from tests.stores.helpers import DIM, DIM_SHORT, make_memory, new_owner, new_prefix, os_client, short_of

pytestmark = pytest.mark.integration


@pytest_asyncio.fixture
async def store(opensearch_server) -> AsyncIterator[OpenSearchStore]:
    s = OpenSearchStore(
        os_client(opensearch_server.url),
        index_prefix=new_prefix(),
        dim=DIM,
        dim_short=DIM_SHORT,
        replicas=0,
        refresh=True,
    )
    await s.open()
    yield s
    await s.close()


async def test_mappings_use_lucene_hnsw_cosine(store: OpenSearchStore) -> None:
    mapping = await store.runner(store.client.indices.get_mapping, index=store.memories)
    props = next(iter(mapping.values()))["mappings"]["properties"]
    for field, dim in (("embedding", DIM), ("embedding_short", DIM_SHORT)):
        f = props[field]
        assert f["type"] == "knn_vector" and f["dimension"] == dim
        assert (
            f["method"]["engine"] == "lucene"
            and f["method"]["space_type"] == "cosinesimil"
            and f["method"]["name"] == "hnsw"
        )
    assert props["content"]["type"] == "text" and props["tenant_id"]["type"] == "keyword"


async def test_a_crash_between_new_version_and_flip_is_tolerated_and_healed(
    store: OpenSearchStore, rng: np.random.Generator
) -> None:
    o = new_owner()
    v1 = make_memory(o, "works at the bakery", rng)
    await store.roles().memories.insert_memories([v1])
    # What a write_version that crashed (an hour ago) after "create new" and before "flip old" leaves behind:
    v2 = v1.next_version(content="works at the bakery as head baker")
    v2.created_at = datetime.now(UTC) - timedelta(hours=1)
    await store.runner(
        store.client.index, index=store.memories, id=owner_key(o.tenant_id, o.user_id, v2.id),
        body=OpenSearchMemories._memory_doc(v2, flip_pending=True), op_type="create", refresh=True,
    )  # fmt: skip
    assert (await store.roles().memories.get_memory(o, v1.id)).is_current  # type: ignore[union-attr]  # two current docs now

    flt = SearchFilter(o)
    assert [h.memory.id for h in await store.roles().keywords.keyword_search(flt, "bakery", limit=5)] == [v2.id]
    vec = await store.roles().vectors.vector_search(flt, v1.embedding, short_of(v1.embedding), limit=5, shortlist=50)  # type: ignore[arg-type]
    assert [h.memory.id for h in vec.hits] == [v2.id]
    assert [
        h.memory.id
        for h in (await store.roles().vectors.vector_search(flt, v1.embedding, None, limit=5, shortlist=0)).hits
    ] == [v2.id]  # type: ignore[arg-type]
    assert [m.id for m in await store.roles().memories.list_memories(o)] == [v2.id]
    assert [m.id for m in await store.roles().memories.get_chain(o, v1.id)] == [v1.id, v2.id]

    # Writing on top of the stale head is refused, and that finishes the crashed write (it is old
    # enough not to be a concurrent write still in progress).
    with pytest.raises(ConflictError):
        await store.roles().memories.write_version(o, v1.id, v1.next_version(content="fork"))
    assert (await store.roles().memories.get_memory(o, v1.id)).is_current is False  # type: ignore[union-attr]
    v3 = await store.roles().memories.write_version(o, v2.id, v2.next_version(content="owns the bakery"))
    assert [m.version for m in await store.roles().memories.get_chain(o, v1.id)] == [1, 2, 3]
    assert [h.memory.id for h in await store.roles().keywords.keyword_search(flt, "bakery", limit=5)] == [v3.id]


async def test_a_crash_between_client_id_claim_and_message_is_completed_by_the_retry(store: OpenSearchStore) -> None:
    o = new_owner()
    msg = Message(o.tenant_id, o.user_id, "hello", datetime.now(UTC), client_message_id="c-1")
    claim_id = owner_key(o.tenant_id, o.user_id, "client\x00c-1")
    await store.runner(
        store.client.index, index=store.message_keys, id=claim_id,
        body={"tenant_id": o.tenant_id, "user_id": o.user_id, "message_id": msg.id}, op_type="create", refresh=True,
    )  # fmt: skip
    assert await store.roles().messages.get_messages(o, [msg.id]) == []
    retry = Message(o.tenant_id, o.user_id, "hello", msg.timestamp, client_message_id="c-1")
    ((stored, created),) = await store.roles().messages.save_messages([retry])
    assert created and stored.id == msg.id
    ((again, created),) = await store.roles().messages.save_messages([retry])
    assert not created and again.id == msg.id
    assert [m.id for m in await store.roles().messages.get_messages(o, [msg.id])] == [msg.id]


async def test_concurrent_job_claims_never_collide(store: OpenSearchStore) -> None:
    jobs = [Job("t", "u", [f"m{i}"]) for i in range(6)]
    for j in jobs:
        await store.roles().jobs.enqueue_job(j)
    now = max(j.next_attempt_at for j in jobs)
    claimed = await asyncio.gather(*(store.roles().jobs.claim_job(now, 60) for _ in range(12)))
    ids = [j.id for j in claimed if j is not None]
    assert len(ids) == len(set(ids))  # never the same job twice
    while (j := await store.roles().jobs.claim_job(now, 60)) is not None:  # the rest can still be claimed
        ids.append(j.id)
    assert sorted(ids) == sorted(j.id for j in jobs)
