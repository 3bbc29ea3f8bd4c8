"""The time-ordered listings (a user's memories by when said, a session's messages by timestamp) walk an
index from the cursor on, without a sort, in SQLite and PostgreSQL; OpenSearch documents written before the
exact-time fields existed get them when the store opens, so they list in the same order.

The order itself, on every store kind, is the store contract's (tests/stores/test_contract.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from cognis_memory.domain import Message
from cognis_memory.search_filter import SearchFilter
from cognis_memory.stores.embedded import EmbeddedStore
from cognis_memory.stores.embedded.memories import list_memories_sql as sqlite_memories_sql
from cognis_memory.stores.embedded.messages import session_messages_sql as sqlite_messages_sql
from cognis_memory.stores.opensearch import OpenSearchStore
from cognis_memory.stores.opensearch.indices import SAID_US, TS_US, memory_document
from cognis_memory.stores.postgres.memories import list_memories_sql as pg_memories_sql
from cognis_memory.stores.postgres.messages import session_messages_sql as pg_messages_sql
from tests.stores.helpers import DIM, DIM_SHORT, make_memory, new_owner, new_prefix, os_client

pytestmark = pytest.mark.integration

VARIANTS = [(h, p) for h in (False, True) for p in (False, True)]


async def test_sqlite_listings_seek_in_their_indexes(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path / "m.db", dim=DIM, dim_short=DIM_SHORT)
    await store.open()
    try:
        for include_history, paged in VARIANTS:
            sql = sqlite_memories_sql(include_history=include_history, paged=paged)
            plan = " ".join(str(tuple(r)) for r in store._read("EXPLAIN QUERY PLAN " + sql, ["x"] * sql.count("?")))
            assert "USING INDEX memories_owner_said" in plan and "TEMP B-TREE" not in plan, plan
            if paged:
                assert "<expr>>?" in plan, plan  # seeks to the cursor, not a scan from the user's first memory
        for paged in (False, True):
            sql = sqlite_messages_sql(paged=paged)
            plan = " ".join(str(tuple(r)) for r in store._read("EXPLAIN QUERY PLAN " + sql, ["x"] * sql.count("?")))
            assert "USING INDEX messages_owner_session_ts" in plan and "TEMP B-TREE" not in plan, plan
            if paged:
                assert "(ts,id)>(?,?)" in plan, plan
    finally:
        await store.close()


async def test_postgres_listings_walk_their_indexes(postgres_server) -> None:
    import psycopg

    from cognis_memory.stores.postgres import PostgresStore

    dsn = postgres_server.create_database(f"order_{new_prefix()}")
    store = PostgresStore(dsn, dim=DIM, dim_short=DIM_SHORT)
    await store.open()  # applies the migrations
    await store.close()
    t = datetime(2025, 1, 1, tzinfo=UTC)
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute("SET enable_seqscan = off")  # an empty table: ask whether the index can serve it at all
        for include_history, paged in VARIANTS:
            params = ["t", "u", *([t, "id"] if paged else []), 10]
            sql = pg_memories_sql(include_history=include_history, paged=paged)
            plan = "\n".join(r[0] for r in await (await conn.execute("EXPLAIN " + sql, params)).fetchall())
            assert "memories_owner_said" in plan and "Sort" not in plan, plan
        for paged in (False, True):
            params = ["t", "u", "s", *([t, "id"] if paged else []), 10]
            plan = "\n".join(
                r[0] for r in await (await conn.execute("EXPLAIN " + pg_messages_sql(paged=paged), params)).fetchall()
            )
            assert "messages_owner_session_ts" in plan and "Sort" not in plan, plan


async def test_opensearch_documents_of_an_earlier_release_get_their_exact_times_on_open(opensearch_server) -> None:
    def build(prefix: str) -> OpenSearchStore:
        client = os_client(opensearch_server.url)
        return OpenSearchStore(client, index_prefix=prefix, dim=DIM, dim_short=DIM_SHORT, replicas=0, refresh=True)

    rng, o, prefix = np.random.default_rng(3), new_owner(), new_prefix()
    t0 = datetime(2025, 2, 1, 8, tzinfo=UTC)
    us = timedelta(microseconds=1)
    memories = [
        make_memory(o, f"m{i}", rng, message_time=m, created_at=t0)
        for i, m in enumerate([t0 + 2 * us, None, t0 + us, t0 - timedelta(days=1)])
    ]
    messages = [Message(o.tenant_id, o.user_id, f"said {i}", t0 + i * us, session_id="s") for i in (2, 0, 1)]
    store = build(prefix)
    await store.open()
    roles = store.roles()
    await roles.memories.insert_memories(memories)
    await roles.messages.save_messages(messages)
    want_memories = [m.id for m in sorted(memories, key=lambda m: (m.said_at, m.id))]
    want_messages = [m.id for m in sorted(messages, key=lambda m: (m.timestamp, m.id))]
    await store.close()

    # What an earlier release wrote: the same documents without the exact-time fields (memory documents whole,
    # with their vectors, as an earlier release indexed them; a scripted update would drop the knn fields).
    raw = os_client(opensearch_server.url)
    for index, field in ((f"{prefix}-memories", SAID_US), (f"{prefix}-messages", TS_US)):
        script = {"source": f"ctx._source.remove('{field}')"}
        hits = raw.search(index=index, body={"size": 100, "query": {"match_all": {}}})["hits"]["hits"]
        for h in hits:
            if field == SAID_US:
                doc = memory_document(h["_source"])
                del doc[SAID_US]
                raw.index(index=index, id=h["_id"], body=doc, refresh=True)
            else:
                raw.update(index=index, id=h["_id"], body={"script": script}, refresh=True)
        query = {"query": {"exists": {"field": field}}}
        assert raw.count(index=index, body=query)["count"] == 0
    raw.close()

    reopened = build(prefix)
    await reopened.open()
    try:
        roles = reopened.roles()
        assert [m.id for m in await roles.memories.list_memories(o)] == want_memories
        assert [m.id for m in await roles.messages.list_session_messages(o, "s")] == want_messages
        # The fill-in kept every memory's vectors: each is still its own nearest neighbour.
        for m in memories:
            assert m.embedding is not None
            found = await roles.vectors.vector_search(
                SearchFilter(o), m.embedding, m.embedding_short, limit=1, shortlist=10
            )
            assert [h.memory.id for h in found.hits] == [m.id], m.content
    finally:
        await reopened.close()
