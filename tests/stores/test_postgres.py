"""PostgreSQL-specific behaviour: filtered HNSW needs ``hnsw.iterative_scan``, migrations are
idempotent and serialised, job claims never collide, an unreachable server is a DependencyUnavailableError."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import psycopg
import pytest
from cognis_dev.databases import create_database
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from cognis_memory.domain import Category, Job, Memory, MemoryKind, Message, Owner, utcnow
from cognis_memory.errors import DependencyUnavailableError
from cognis_memory.search_filter import SearchFilter
from cognis_memory.stores.migrations.postgres import MIGRATIONS, SchemaMismatchError
from cognis_memory.stores.postgres import PostgresStore
from cognis_memory.stores.postgres.memories import _MEMORIES_PER_STATEMENT
from cognis_memory.stores.postgres.messages import _MESSAGES_PER_STATEMENT
from cognis_memory.stores.roles import (
    ApiKeyStore,
    JobQueue,
    KeywordSearch,
    MemoryVersions,
    MessageLog,
    StoreLifecycle,
    VectorSearch,
)
from tests.stores.helpers import brute_force, unit

pytestmark = pytest.mark.integration

ITER_DIM, ITER_SHORT = 64, 32


def _with_options(dsn: str, options: str) -> str:
    return make_conninfo(**{**conninfo_to_dict(dsn), "options": options})


async def test_filtered_hnsw_returns_enough_rows_only_with_iterative_scan(postgres_server) -> None:
    """3,000 rows over 100 users; one user has 50. Asking that user's 40 nearest through the HNSW
    index must give 40. The control runs the same search with ``hnsw.iterative_scan = off``.

    The planner prefers the exact (tenant, user) index path for a user this small, which hides
    the problem; a large tenant or user makes it choose HNSW. To put both runs on the HNSW path
    here, the sessions run with ``enable_sort = off`` (the btree path needs an explicit sort),
    and the plan is checked to be the HNSW index scan.
    """
    dsn = create_database(postgres_server.dsn)
    rng = np.random.default_rng(7)
    tenant = "t-iter"
    rows: list[Memory] = []
    for u in range(100):
        vecs = unit(rng.normal(size=(50 if u == 0 else 30, ITER_DIM)))
        for v in vecs:
            short = unit(v[:ITER_SHORT])
            rows.append(Memory(tenant, f"u{u}", "x", Category.HOBBIES, embedding=v, embedding_short=short))
    assert len(rows) == 3020

    hnsw_dsn = _with_options(dsn, "-c enable_sort=off")
    default = PostgresStore(dsn, dim=ITER_DIM, dim_short=ITER_SHORT)
    relaxed = PostgresStore(hnsw_dsn, dim=ITER_DIM, dim_short=ITER_SHORT, iterative_scan="relaxed_order")
    control = PostgresStore(hnsw_dsn, dim=ITER_DIM, dim_short=ITER_SHORT, iterative_scan="off")
    for s in (default, relaxed, control):
        await s.open()
    try:
        await default.memories.bulk_load(rows)  # COPY, then build the HNSW index
        owner = Owner(tenant, "u0")
        mine = [m for m in rows if m.user_id == "u0"]
        q = unit(rng.normal(size=ITER_DIM))
        qs = unit(q[:ITER_SHORT])

        async with relaxed.connection() as conn, conn.transaction():
            await conn.execute("SELECT set_config('hnsw.ef_search', '40', true)")
            cur = await conn.execute(
                "EXPLAIN SELECT id FROM memories m WHERE m.tenant_id = %s AND m.user_id = %s AND m.is_current"
                " ORDER BY m.embedding_short <=> %s LIMIT 40",
                (tenant, "u0", qs),
            )
            plan = "\n".join(r[0] for r in await cur.fetchall())
        assert "memories_short_hnsw" in plan, plan

        good = await relaxed.vectors.vector_search(SearchFilter(owner), q, qs, limit=40, shortlist=40)
        assert len(good.hits) == 40 and good.candidates_short == 40
        assert all(h.memory.user_id == "u0" for h in good.hits)
        bad = await control.vectors.vector_search(SearchFilter(owner), q, qs, limit=40, shortlist=40)
        assert len(bad.hits) < 20, f"without iterative scan the filtered HNSW scan found {len(bad.hits)} rows"
        # The store's default configuration (planner's choice) is right too, and exact here.
        dflt = await default.vectors.vector_search(SearchFilter(owner), q, qs, limit=40, shortlist=50)
        assert [h.memory.id for h in dflt.hits] == [i for i, _ in brute_force(mine, q, limit=40)]
    finally:
        for s in (default, relaxed, control):
            await s.close()


async def test_a_users_facts_are_read_without_reading_their_raw_memories(postgres_server) -> None:
    """The fact channel (every search) asks one user's current facts only. A user of 3,000 raw memories and 5
    facts: PostgreSQL reads the facts through the (owner, kind) index, not every row of the user (the owner's
    index alone: 44 ms a search for a user of 100,000 raw memories), and the answer is the exact one."""
    dsn = create_database(postgres_server.dsn)
    rng = np.random.default_rng(11)
    owner = Owner("t-kind", "u0")
    rows = [
        Memory(owner.tenant_id, owner.user_id, "x", Category.HOBBIES, kind=MemoryKind.FACT if i < 5 else MemoryKind.RAW,
               embedding=(v := unit(rng.normal(size=ITER_DIM))), embedding_short=unit(v[:ITER_SHORT]))
        for i in range(3005)
    ]  # fmt: skip
    store = PostgresStore(dsn, dim=ITER_DIM, dim_short=ITER_SHORT)
    await store.open()
    try:
        await store.memories.bulk_load(rows)
        q = unit(rng.normal(size=ITER_DIM))
        async with store.connection() as conn:
            await conn.execute("ANALYZE memories")
            cur = await conn.execute(
                "EXPLAIN SELECT id FROM memories m WHERE m.tenant_id = %s AND m.user_id = %s AND m.is_current"
                " AND m.kind = ANY(%s) ORDER BY m.embedding <=> %s, m.id LIMIT 20",
                (owner.tenant_id, owner.user_id, ["fact"], q),
            )
            plan = "\n".join(r[0] for r in await cur.fetchall())
        assert "memories_owner_kind_current" in plan, plan
        facts = [m for m in rows if m.kind is MemoryKind.FACT]
        found = await store.vectors.vector_search(
            SearchFilter(owner, kinds=frozenset({MemoryKind.FACT})), q, None, limit=20, shortlist=20
        )
        assert [h.memory.id for h in found.hits] == [i for i, _ in brute_force(facts, q, limit=20)]
    finally:
        await store.close()


async def test_writes_of_more_rows_than_one_statement_holds_are_all_or_none(postgres_server) -> None:
    """An add is one INSERT statement per table (one round trip, atomic without a transaction). A write of more
    rows than one statement's parameters hold is several statements in one transaction: every row with its
    outbox row, or, when one row is refused, nothing; a client id repeated across two statements of one
    call is answered with the message stored by the first."""
    dsn = create_database(postgres_server.dsn)
    rng = np.random.default_rng(5)
    owner = Owner("t-big", "u0")

    def memory(text: str) -> Memory:
        v = unit(rng.normal(size=ITER_DIM))
        return Memory(
            owner.tenant_id, owner.user_id, text, Category.HOBBIES, embedding=v, embedding_short=unit(v[:ITER_SHORT])
        )

    def message(text: str, client_id: str | None = None) -> Message:
        return Message(owner.tenant_id, owner.user_id, text, utcnow(), client_message_id=client_id)

    store = PostgresStore(dsn, dim=ITER_DIM, dim_short=ITER_SHORT)
    await store.open()
    try:

        async def count(table: str) -> int:
            async with store.connection() as conn:
                row = await (await conn.execute(f"SELECT count(*) FROM {table}")).fetchone()
                return int(row[0])

        first = [memory(f"m{i}") for i in range(_MEMORIES_PER_STATEMENT + 5)]
        await store.memories.insert_memories(first, outbox=True)
        assert (await count("memories"), await count("outbox")) == (len(first), len(first))
        stored = await store.memories.fetch_memories(owner, [first[0].id, first[-1].id])
        assert [m.content for m in stored] == ["m0", f"m{len(first) - 1}"]

        # the last row of the second statement repeats a stored id: the whole call is refused
        refused = [memory(f"n{i}") for i in range(_MEMORIES_PER_STATEMENT + 5)]
        refused[-1].id = first[0].id
        with pytest.raises(psycopg.errors.UniqueViolation):
            await store.memories.insert_memories(refused, outbox=True)
        assert (await count("memories"), await count("outbox")) == (len(first), len(first))

        messages = [message(f"t{i}", f"c{i}") for i in range(_MESSAGES_PER_STATEMENT + 3)]
        messages.append(message("a retry inside the call", "c0"))  # in the second statement, repeating the first's
        out = await store.messages.save_messages(messages)
        assert [created for _, created in out] == [True] * (len(messages) - 1) + [False]
        assert out[-1][0].id == messages[0].id and out[-1][0].content == "t0"
        assert await count("messages") == len(messages) - 1

        again = [message(f"u{i}", f"d{i}") for i in range(_MESSAGES_PER_STATEMENT + 3)]
        again[-1].id = messages[0].id  # a server id already stored: refused, and so is the rest of the call
        with pytest.raises(psycopg.errors.UniqueViolation):
            await store.messages.save_messages(again)
        assert await count("messages") == len(messages) - 1
    finally:
        await store.close()


async def test_migrations_are_idempotent_and_serialised(postgres_server) -> None:
    dsn = create_database(postgres_server.dsn)
    stores = [PostgresStore(dsn, dim=16, dim_short=4) for _ in range(4)]
    await asyncio.gather(*(s.open() for s in stores))  # concurrent first start of four processes
    try:
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            cur = await conn.execute("SELECT version FROM schema_migrations ORDER BY version")
            assert [r[0] for r in await cur.fetchall()] == [m.version for m in MIGRATIONS]
            cur = await conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'memories' ORDER BY 1")
            names = {r[0] for r in await cur.fetchall()}
            assert {"memories_short_hnsw", "memories_owner_current", "memories_replaces"} <= names
            cur = await conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'memories_short_hnsw'")
            (indexdef,) = await cur.fetchone()  # type: ignore[misc]
            assert "hnsw" in indexdef and "vector_cosine_ops" in indexdef and "is_current" in indexdef
        again = PostgresStore(dsn, dim=16, dim_short=4)
        await again.open()  # a restart applies nothing and succeeds
        await again.close()
        with pytest.raises(SchemaMismatchError):
            await PostgresStore(dsn, dim=32, dim_short=4).open()
    finally:
        for s in stores:
            await s.close()


async def test_concurrent_job_claims_never_collide(postgres_server) -> None:
    dsn = create_database(postgres_server.dsn)
    store = PostgresStore(dsn, dim=16, dim_short=4, pool_max=8)
    await store.open()
    try:
        jobs = [Job("t", "u", [f"m{i}"]) for i in range(6)]
        for j in jobs:
            await store.jobs.enqueue_job(j)
        now = max(j.next_attempt_at for j in jobs)
        claimed = await asyncio.gather(*(store.jobs.claim_job(now, 60) for _ in range(12)))
        ids = [j.id for j in claimed if j is not None]
        assert sorted(ids) == sorted(j.id for j in jobs)  # each job exactly once, the rest got None
    finally:
        await store.close()


async def test_unreachable_server_is_a_dependency_error() -> None:
    store = PostgresStore("postgresql://nobody@127.0.0.1:1/none", dim=8, dim_short=4, connect_timeout_s=1)
    t0 = time.monotonic()
    with pytest.raises(DependencyUnavailableError) as info:
        await store.open()
    assert info.value.dependency == "postgres" and time.monotonic() - t0 < 5


async def test_postgres_supplies_every_role_but_keyword_search(postgres_server) -> None:
    store = PostgresStore(create_database(postgres_server.dsn), dim=16, dim_short=4)
    supplied = {
        MessageLog: store.messages, MemoryVersions: store.memories, VectorSearch: store.vectors,
        JobQueue: store.jobs, ApiKeyStore: store.api_keys, StoreLifecycle: store,
    }  # fmt: skip
    for role, obj in supplied.items():
        assert isinstance(obj, role), role
    # BM25 comes from OpenSearch in the dual store
    assert not any(isinstance(obj, KeywordSearch) for obj in (store, *supplied.values()))
    await store.open()
    try:
        q = unit(np.ones(16))
        assert (
            await store.vectors.vector_search(SearchFilter(Owner("t", "u")), q, unit(q[:4]), limit=5, shortlist=10)
        ).hits == []
    finally:
        await store.close()
