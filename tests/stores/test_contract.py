"""One behavioural contract, run against every store: embedded (SQLite), dual (PostgreSQL +
OpenSearch) and OpenSearch-only, all on real backends.

Each test makes fresh tenant ids, so the session-scoped stores can be shared. Expected results
come from references written independently of the stores: the filter rules of the
``MemoryFilter`` docstring (:func:`tests.stores.helpers.admits`) and numpy brute force.
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from cognis_memory.domain import Category, Job, JobStatus, Memory, MemoryKind, Message, Owner, Scope
from cognis_memory.errors import ConflictError, NotFoundError
from cognis_memory.search_filter import FILTER_NAMES, SearchFilter
from cognis_memory.stores.records import MEMORY_FILTERS
from cognis_memory.stores.roles import (
    ApiKeyStore,
    JobQueue,
    KeywordSearch,
    MemoryVersions,
    MessageLog,
    StoreLifecycle,
    VectorSearch,
)
from cognis_memory.stores.values import ApiKeyRecord, PagePosition
from tests.stores.helpers import Harness, admits, brute_force, make_memory, new_owner, short_of, unit

#: Every field of Memory that must come back exactly; the rest are compared in their own way where they are read:
#: the id (the order of the fetched ids), created_at (to the millisecond) and the vectors (to float32 rounding).
EXACT_FIELDS = tuple(
    f.name for f in dataclasses.fields(Memory) if f.name not in ("id", "created_at", "embedding", "embedding_short")
)


def T(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


async def test_store_supplies_every_role(harness: Harness) -> None:
    roles = harness.store
    assert isinstance(roles.backend, StoreLifecycle) and isinstance(roles.messages, MessageLog)
    assert isinstance(roles.memories, MemoryVersions) and isinstance(roles.vectors, VectorSearch)
    assert isinstance(roles.keywords, KeywordSearch) and isinstance(roles.jobs, JobQueue)
    assert isinstance(roles.api_keys, ApiKeyStore)
    health = await harness.store.health()
    assert health and all(health.values()), health


# -- messages -----------------------------------------------------------------------------------------
async def test_save_messages_is_idempotent_on_client_id(harness: Harness) -> None:
    store, o = harness.store, new_owner()
    t0 = T(2024, 5, 1, 12)
    first = Message(o.tenant_id, o.user_id, "hello", t0, speaker="Al", session_id="s1", client_message_id="c-1",
                    metadata={"k": 1}, scope=Scope.CONTEXT, raw_memory_id="r-1")  # fmt: skip
    plain = Message(o.tenant_id, o.user_id, "no client id", t0 + timedelta(seconds=1))
    repeat_in_batch = Message(o.tenant_id, o.user_id, "same client id in one batch", t0, client_message_id="c-1")
    out = await store.messages.save_messages([first, plain, repeat_in_batch])
    assert [(m.id, created) for m, created in out] == [(first.id, True), (plain.id, True), (first.id, False)]
    assert out[2][0].content == "hello"

    retry = Message(o.tenant_id, o.user_id, "retried with new content", t0, client_message_id="c-1")
    ((stored, created),) = await store.messages.save_messages([retry])
    assert not created and stored.id == first.id and stored.content == "hello" and stored.speaker == "Al"
    assert stored.timestamp == t0 and stored.session_id == "s1" and stored.metadata == {"k": 1}
    assert (stored.scope, stored.raw_memory_id) == (Scope.CONTEXT, "r-1")  # fields of their own, not metadata

    # The same client id under another user (or tenant) is another message.
    other = Owner(o.tenant_id, "bob")
    ((theirs, created),) = await store.messages.save_messages(
        [Message(other.tenant_id, other.user_id, "x", t0, client_message_id="c-1")]
    )
    assert created and theirs.id != first.id

    got = await store.messages.get_messages(o, [plain.id, first.id, theirs.id, "unknown"])
    assert [m.id for m in got] == [first.id, plain.id]  # ordered by timestamp; foreign and unknown skipped
    assert [(m.scope, m.raw_memory_id) for m in got] == [(Scope.CONTEXT, "r-1"), (Scope.USER, None)]
    assert await store.messages.get_messages(other, [first.id]) == []


# -- memories: insert and fetch ---------------------------------------------------------------------
async def test_insert_and_fetch_round_trip(harness: Harness, rng: np.random.Generator) -> None:
    store, o = harness.store, new_owner()
    a = make_memory(o, "I was born in Lisbon", rng, category=Category.PERSONAL_DETAILS,
                    event_time=datetime(1965, 5, 1, 8, 30, 15, 123456, tzinfo=UTC), speaker="Ana",
                    source_message_ids=["m1", "m2"], metadata={"source": "test", "n": 2}, agent_id="agent-1")  # fmt: skip
    b = make_memory(o, "Prefers tea", rng, scope=Scope.CONTEXT, session_id="s9", kind=MemoryKind.RAW,
                    message_time=T(2024, 2, 29, 23, 59, 59))  # fmt: skip
    await store.memories.insert_memories([a, b])

    got = await store.memories.fetch_memories(o, [b.id, "nope", a.id])
    assert [m.id for m in got] == [b.id, a.id]
    ga, gb = got[1], got[0]
    for want, have in ((a, ga), (b, gb)):
        for f in EXACT_FIELDS:
            assert getattr(have, f) == getattr(want, f), f
        assert abs((have.created_at - want.created_at).total_seconds()) < 1e-3
        assert isinstance(have.embedding, np.ndarray) and have.embedding.shape == want.embedding.shape
        np.testing.assert_allclose(have.embedding, want.embedding, rtol=0, atol=1e-7)
        np.testing.assert_allclose(have.embedding_short, want.embedding_short, rtol=0, atol=1e-7)
    assert (await store.memories.get_memory(o, a.id)).content == a.content  # type: ignore[union-attr]
    intruder = Owner(o.tenant_id, "mallory")
    assert await store.memories.get_memory(intruder, a.id) is None
    assert await store.memories.fetch_memories(intruder, [a.id, b.id]) == []


# -- vector search ------------------------------------------------------------------------------------
async def _vector_fixture(
    store: object, rng: np.random.Generator, n: int = 60
) -> tuple[Owner, list[Memory], np.ndarray]:
    o = new_owner()
    memories = [make_memory(o, f"memory {i}", rng) for i in range(n)]
    q = unit(rng.normal(size=memories[0].embedding.shape[0]))  # type: ignore[union-attr]
    # Another user's memories, closer to the query than anything of ours: they must never show.
    neighbour = Owner(o.tenant_id, "neighbour")
    close = [make_memory(neighbour, f"near {i}", rng, vector=q + 0.01 * rng.normal(size=q.shape[0])) for i in range(10)]
    await store.memories.insert_memories(memories + close)  # type: ignore[attr-defined]
    return o, memories, q


async def test_vector_search_exact_matches_brute_force(harness: Harness, rng: np.random.Generator) -> None:
    o, memories, q = await _vector_fixture(harness.store, rng)
    res = await harness.store.vectors.vector_search(SearchFilter(o), q, None, limit=10, shortlist=200)
    want = brute_force(memories, q, limit=10)
    assert [h.memory.id for h in res.hits] == [i for i, _ in want]
    np.testing.assert_allclose([h.score for h in res.hits], [s for _, s in want], atol=1e-5)
    assert res.candidates_short == 0 and "vector_full" in res.timings_ms
    for h in res.hits:
        assert h.memory.user_id == o.user_id and h.memory.embedding is not None and h.memory.embedding.shape == q.shape


async def test_vector_search_two_stage_matches_brute_force(harness: Harness, rng: np.random.Generator) -> None:
    o, memories, q = await _vector_fixture(harness.store, rng)
    qs = short_of(q)
    # Shortlist larger than the user's rows: the result is the exact full-vector ranking.
    res = await harness.store.vectors.vector_search(SearchFilter(o), q, qs, limit=10, shortlist=200)
    want = brute_force(memories, q, limit=10)
    assert [h.memory.id for h in res.hits] == [i for i, _ in want]
    np.testing.assert_allclose([h.score for h in res.hits], [s for _, s in want], atol=1e-5)
    assert res.candidates_short == len(memories)
    assert {"vector_short", "vector_full"} <= set(res.timings_ms)
    # A real shortlist (20 of 60): prefix ranking first, then full-vector rescoring of those 20.
    res = await harness.store.vectors.vector_search(SearchFilter(o), q, qs, limit=8, shortlist=20)
    want = brute_force(memories, q, limit=8, shortlist=20)
    assert [h.memory.id for h in res.hits] == [i for i, _ in want]
    np.testing.assert_allclose([h.score for h in res.hits], [s for _, s in want], atol=1e-5)
    assert res.candidates_short == 20
    # The shortlist stage matters: the exact ranking differs from the two-stage one here.
    assert [i for i, _ in want] != [i for i, _ in brute_force(memories, q, limit=8)]


# -- filters ------------------------------------------------------------------------------------------
FILTER_CASES: dict[str, dict[str, object]] = {
    "none": {},
    "user_scope": {"scopes": frozenset({Scope.USER})},
    "context_scope": {"scopes": frozenset({Scope.CONTEXT})},
    "no_scope_at_all": {"scopes": frozenset()},
    "session_s1": {"session_id": "s1"},
    "session_s1_context_only": {"scopes": frozenset({Scope.CONTEXT}), "session_id": "s1"},
    "unknown_session": {"session_id": "nope"},
    "categories": {"categories": frozenset({Category.HOBBIES, Category.GOALS})},
    "kinds_raw": {"kinds": frozenset({MemoryKind.RAW})},
    "agent_a1": {"agent_id": "a1"},
    "time_from": {"time_from": T(2024, 1, 15)},
    "time_to_inclusive_boundary": {"time_to": datetime(2024, 1, 31, 23, 59, 59, 999999, tzinfo=UTC)},
    "time_to_one_microsecond_before": {"time_to": datetime(2024, 1, 31, 23, 59, 59, 999998, tzinfo=UTC)},
    "time_range": {"time_from": T(2024, 1, 1), "time_to": T(2024, 2, 28)},
    "before_1970": {"time_to": T(1970, 1, 1)},
    "combined": {
        "scopes": frozenset({Scope.USER, Scope.CONTEXT}),
        "session_id": "s2",
        "categories": frozenset({Category.GOALS, Category.HEALTH, Category.TRAVEL}),
        "kinds": frozenset({MemoryKind.FACT}),
        "time_from": T(2024, 1, 1),
    },
}


def _filter_corpus(o: Owner, rng: np.random.Generator) -> list[Memory]:
    def m(word: str, **kw: object) -> Memory:
        return make_memory(o, f"alpha {word}", rng, **kw)  # type: ignore[arg-type]

    return [
        m("user no time"),
        m("user event", category=Category.HEALTH, event_time=T(2024, 1, 10), agent_id="a1"),
        m(
            "user message time",
            category=Category.TRAVEL,
            kind=MemoryKind.RAW,
            message_time=T(2024, 2, 1),
            agent_id="a2",
        ),
        m(
            "context s1",
            scope=Scope.CONTEXT,
            session_id="s1",
            event_time=T(2024, 3, 1),
            kind=MemoryKind.RAW,
            agent_id="a1",
        ),
        m(
            "context s2 event wins",
            scope=Scope.CONTEXT,
            session_id="s2",
            category=Category.GOALS,
            event_time=T(2024, 1, 10),
            message_time=T(2025, 1, 1),
        ),  # fmt: skip
        m("context without session", scope=Scope.CONTEXT, category=Category.DIETARY),
        m("born", category=Category.PERSONAL_DETAILS, event_time=T(1965, 5, 1)),
        m("boundary", category=Category.GOALS, event_time=datetime(2024, 1, 31, 23, 59, 59, 999999, tzinfo=UTC)),
    ]


async def test_every_filter_matches_the_documented_semantics(harness: Harness, rng: np.random.Generator) -> None:
    store, o = harness.store, new_owner()
    corpus = _filter_corpus(o, rng)
    await store.memories.insert_memories(corpus)
    # One superseded version (must never show) and another user's memory (likewise).
    old = corpus[0]
    new = await store.memories.write_version(o, old.id, old.next_version(content="alpha user no time v2"))
    await store.memories.insert_memories([make_memory(Owner(o.tenant_id, "other"), "alpha stranger", rng)])
    current = [new] + corpus[1:]  # the superseded first version is not current: never admitted

    q = unit(rng.normal(size=old.embedding.shape[0]))  # type: ignore[union-attr]
    failures = []
    for name, kwargs in FILTER_CASES.items():
        flt = SearchFilter(o, **kwargs)  # type: ignore[arg-type]
        want = {m.id for m in current if admits(flt, m)}
        exact = {h.memory.id for h in (await store.vectors.vector_search(flt, q, None, limit=100, shortlist=200)).hits}
        two = {
            h.memory.id for h in (await store.vectors.vector_search(flt, q, short_of(q), limit=100, shortlist=200)).hits
        }
        kw = {h.memory.id for h in await store.keywords.keyword_search(flt, "alpha", limit=100)}
        for side, got in (("vector exact", exact), ("vector two-stage", two), ("keyword", kw)):
            if got != want:
                failures.append(f"{name} / {side}: missing {len(want - got)}, unexpected {len(got - want)}")
    assert not failures, "\n".join(failures)
    # The reference itself is not vacuous: the cases select different, non-trivial subsets.
    sizes = {name: sum(admits(SearchFilter(o, **kw), m) for m in current) for name, kw in FILTER_CASES.items()}  # type: ignore[arg-type]
    assert sizes["none"] == 8 and sizes["no_scope_at_all"] == 0 and 0 < sizes["combined"] < sizes["session_s1"] < 8
    assert sizes["time_to_inclusive_boundary"] == sizes["time_to_one_microsecond_before"] + 1


def test_every_filter_has_a_contract_case_of_its_own(rng: np.random.Generator) -> None:
    """Every filter a search takes (each column the record marks filterable, and the session and time rules)
    has a case above that sets it alone and admits some but not all of the corpus, so every backend is
    checked on it: a filterable column added to the record without its case here fails, naming it."""
    o = new_owner()
    corpus = _filter_corpus(o, rng)
    filters = sorted({f.name for _, f in MEMORY_FILTERS} | set(FILTER_NAMES))

    def discriminates(kw: dict[str, object]) -> bool:
        return 0 < sum(admits(SearchFilter(o, **kw), m) for m in corpus) < len(corpus)  # type: ignore[arg-type]

    uncovered = [n for n in filters if not any(set(kw) == {n} and discriminates(kw) for kw in FILTER_CASES.values())]
    assert not uncovered, (
        f"no case of FILTER_CASES filters on {uncovered} alone and admits some but not all of _filter_corpus: "
        "add one (and corpus memories that differ in that field)"
    )


# -- keyword search -----------------------------------------------------------------------------------
async def test_keyword_search_ranks_by_relevance_and_stems(harness: Harness, rng: np.random.Generator) -> None:
    store, o = harness.store, new_owner()
    a = make_memory(o, "I love hiking; hiking every weekend in the mountains", rng)
    b = make_memory(o, "I went hiking once with my brother", rng)
    c = make_memory(o, "I cook pasta on Sundays", rng)
    foreign = make_memory(Owner(o.tenant_id, "someone-else"), "hiking hiking hiking hiking", rng)
    await store.memories.insert_memories([a, b, c, foreign])
    hits = await store.keywords.keyword_search(SearchFilter(o), "hiking", limit=10)
    assert [h.memory.id for h in hits] == [a.id, b.id]
    assert hits[0].score > hits[1].score > 0
    assert hits[0].memory.embedding is not None
    stemmed = await store.keywords.keyword_search(SearchFilter(o), "hikes", limit=10)
    assert {h.memory.id for h in stemmed} == {a.id, b.id}
    assert [h.memory.id for h in await store.keywords.keyword_search(SearchFilter(o), "pasta cooking", limit=10)] == [
        c.id
    ]
    assert await store.keywords.keyword_search(SearchFilter(o), "submarine", limit=10) == []
    assert [h.memory.id for h in await store.keywords.keyword_search(SearchFilter(o), "hiking", limit=1)] == [a.id]


INJECTIONS = [
    '"foo" OR 1=1; DROP TABLE memories; --',
    "content:* AND tenant_id:other",
    'NEAR(a b) "x" *',
    "*",
    '"',
    "(",
    "\\",
    "' OR ''='",
    '{"match_all": {}}',
    "tenant_id:* user_id:*",
    "AND OR NOT",
    "foo -bar +baz ~2 ^3 [a TO z] /re.*/",
    "café naïve 東京 🙂",
    "",
    "   ",
    "foo " * 3000,
]


async def test_keyword_search_treats_text_as_plain_words(harness: Harness, rng: np.random.Generator) -> None:
    store, o = harness.store, new_owner()
    mine = [make_memory(o, "foo bar", rng), make_memory(o, "other stuff entirely", rng)]
    stranger = Owner(f"{o.tenant_id}-other", o.user_id)  # same user id, another tenant
    theirs = [make_memory(stranger, w, rng) for w in ("foo other tenant_id content match_all", "NEAR x a b café 東京")]
    await store.memories.insert_memories(mine + theirs)
    foreign_ids = {m.id for m in theirs}
    for text in INJECTIONS:
        hits = await store.keywords.keyword_search(SearchFilter(o), text, limit=20)
        got = {h.memory.id for h in hits}
        assert not got & foreign_ids, text
        assert all((h.memory.tenant_id, h.memory.user_id) == (o.tenant_id, o.user_id) for h in hits), text
    # Plain-word semantics: the words still match, the operators do nothing.
    hits = await store.keywords.keyword_search(SearchFilter(o), INJECTIONS[0], limit=20)
    assert mine[0].id in {h.memory.id for h in hits}
    assert len(await store.memories.list_memories(o)) == 2  # nothing was dropped
    assert {h.memory.id for h in await store.keywords.keyword_search(SearchFilter(stranger), "foo", limit=5)} == {
        theirs[0].id
    }


# -- versions ---------------------------------------------------------------------------------------
async def test_update_then_delete_builds_the_chain(harness: Harness, rng: np.random.Generator) -> None:
    store, o = harness.store, new_owner()
    v1 = make_memory(o, "lives in Porto", rng, category=Category.PERSONAL_DETAILS)
    await store.memories.insert_memories([v1])
    full2 = unit(rng.normal(size=v1.embedding.shape[0]))  # type: ignore[union-attr]
    v2 = await store.memories.write_version(o, v1.id, v1.next_version(content="moved to Lisbon", embedding=full2,
                                                              embedding_short=short_of(full2)))  # fmt: skip
    assert (v2.version, v2.replaces_id, v2.is_current) == (2, v1.id, True)
    assert (await store.memories.get_memory(o, v1.id)).is_current is False  # type: ignore[union-attr]
    for probe in (v1.id, v2.id):
        assert [(m.id, m.version, m.is_current) for m in await store.memories.get_chain(o, probe)] == [
            (v1.id, 1, False), (v2.id, 2, True)
        ]  # fmt: skip
    flt = SearchFilter(o)
    kw = await store.keywords.keyword_search(flt, "Porto Lisbon", limit=5)
    assert [(h.memory.id, h.memory.chain_id) for h in kw] == [(v2.id, v1.id)]  # every version keeps the chain id
    vec = await store.vectors.vector_search(flt, v1.embedding, short_of(v1.embedding), limit=5, shortlist=50)  # type: ignore[arg-type]
    assert [(h.memory.id, h.memory.chain_id) for h in vec.hits] == [(v2.id, v1.id)]
    assert [(m.id, m.chain_id) for m in await store.memories.list_memories(o)] == [(v2.id, v1.id)]
    assert [m.chain_id for m in await store.memories.fetch_memories(o, [v2.id, v1.id])] == [v1.id, v1.id]
    # the chain id is the first version's id, so it finds the chain like any member's
    assert [m.id for m in await store.memories.get_chain(o, v2.chain_id)] == [v1.id, v2.id]

    v3 = await store.memories.write_version(o, v2.id, v2.tombstone())
    assert v3.deleted and not v3.is_current and v3.version == 3
    chain = await store.memories.get_chain(o, v1.id)
    assert [(m.id, m.version, m.is_current, m.deleted) for m in chain] == [
        (v1.id, 1, False, False), (v2.id, 2, False, False), (v3.id, 3, False, True)
    ]  # fmt: skip
    assert {m.chain_id for m in chain} == {v1.id} and (await store.memories.get_memory(o, v3.id)).chain_id == v1.id  # type: ignore[union-attr]
    assert await store.keywords.keyword_search(flt, "Porto Lisbon", limit=5) == []
    assert (await store.vectors.vector_search(flt, full2, short_of(full2), limit=5, shortlist=50)).hits == []
    assert (await store.vectors.vector_search(flt, full2, None, limit=5, shortlist=50)).hits == []
    assert await store.memories.list_memories(o) == []
    # listed in the order said: none of them has a message time, so by creation (each version after the last)
    assert [m.id for m in await store.memories.list_memories(o, include_history=True)] == [v1.id, v2.id, v3.id]


async def test_write_version_rejects_stale_and_foreign_ids(harness: Harness, rng: np.random.Generator) -> None:
    store, o = harness.store, new_owner()
    v1 = make_memory(o, "likes jazz", rng)
    await store.memories.insert_memories([v1])
    v2 = await store.memories.write_version(o, v1.id, v1.next_version(content="likes blues"))
    with pytest.raises(ConflictError):
        await store.memories.write_version(o, v1.id, v1.next_version(content="likes rock"))
    with pytest.raises(ValueError, match="chain id"):  # a version of another chain cannot go on top of this one
        await store.memories.write_version(o, v2.id, make_memory(o, "likes folk", rng))
    intruder = Owner(o.tenant_id, "mallory")
    with pytest.raises(NotFoundError):
        await store.memories.write_version(intruder, v1.id, make_memory(intruder, "hijack", rng))
    with pytest.raises(NotFoundError):
        await store.memories.write_version(o, "no-such-id", make_memory(o, "x", rng))
    assert [m.content for m in await store.memories.list_memories(o)] == ["likes blues"]


async def test_write_version_refuses_a_new_version_of_another_owner(harness: Harness, rng: np.random.Generator) -> None:
    store, o = harness.store, new_owner()
    v1 = make_memory(o, "likes tea", rng)
    await store.memories.insert_memories([v1])
    strangers = [v1.next_version(user_id="mallory"), v1.next_version(tenant_id=new_owner().tenant_id)]
    for new in strangers:  # the owner named is the previous version's, the new version is someone else's
        with pytest.raises(ValueError, match="same owner"):
            await store.memories.write_version(o, v1.id, new)
    intruder = Owner(o.tenant_id, "mallory")  # the owner named is the new version's: refused before any read
    with pytest.raises(ValueError, match="same owner"):
        await store.memories.write_version(intruder, v1.id, v1.next_version(content="likes coffee"))
    for new in strangers:
        assert await store.memories.get_memory(Owner(new.tenant_id, new.user_id), new.id) is None
    assert [m.id for m in await store.memories.list_memories(o, include_history=True)] == [v1.id]
    assert (await store.memories.get_memory(o, v1.id)).is_current  # type: ignore[union-attr]


async def test_concurrent_versions_of_one_head_have_one_winner(harness: Harness, rng: np.random.Generator) -> None:
    store, o = harness.store, new_owner()
    v1 = make_memory(o, "drinks coffee", rng)
    await store.memories.insert_memories([v1])
    a, b = v1.next_version(content="drinks tea"), v1.next_version(content="drinks water")
    results = await asyncio.gather(
        store.memories.write_version(o, v1.id, a), store.memories.write_version(o, v1.id, b), return_exceptions=True
    )
    winners = [r for r in results if isinstance(r, Memory)]
    assert len(winners) == 1 and sum(isinstance(r, ConflictError) for r in results) == 1, results
    loser = b if winners[0].id == a.id else a
    assert [m.id for m in await store.memories.get_chain(o, v1.id)] == [v1.id, winners[0].id]
    assert await store.memories.get_memory(o, loser.id) is None
    assert [m.id for m in await store.memories.list_memories(o)] == [winners[0].id]


# -- isolation and forgetting -------------------------------------------------------------------------
async def test_tenants_are_isolated_even_with_the_same_user_id(harness: Harness, rng: np.random.Generator) -> None:
    store = harness.store
    a, b = new_owner("shared-user"), new_owner("shared-user")
    ma = make_memory(a, "secret of tenant a", rng)
    mb = make_memory(b, "secret of tenant b", rng, vector=ma.embedding)
    await store.memories.insert_memories([ma, mb])
    await store.messages.save_messages([Message(b.tenant_id, b.user_id, "hi", T(2024, 1, 1), client_message_id="x")])
    job_b = Job(b.tenant_id, b.user_id, ["x"])
    await store.jobs.enqueue_job(job_b)
    flt = SearchFilter(a)
    assert [h.memory.id for h in await store.keywords.keyword_search(flt, "secret tenant", limit=10)] == [ma.id]
    assert [
        h.memory.id for h in (await store.vectors.vector_search(flt, ma.embedding, None, limit=10, shortlist=10)).hits
    ] == [ma.id]  # type: ignore[arg-type]
    assert [
        h.memory.id
        for h in (
            await store.vectors.vector_search(flt, ma.embedding, short_of(ma.embedding), limit=10, shortlist=10)
        ).hits
    ] == [ma.id]  # type: ignore[arg-type]
    assert await store.memories.get_memory(a, mb.id) is None
    assert await store.memories.get_chain(a, mb.id) == []
    assert [m.id for m in await store.memories.list_memories(a, include_history=True)] == [ma.id]
    assert await store.jobs.get_job(a, job_b.id) is None
    with pytest.raises(NotFoundError):
        await store.memories.write_version(a, mb.id, mb.next_version(tenant_id=a.tenant_id))
    await store.memories.forget_user(a)
    assert [m.id for m in await store.memories.list_memories(b)] == [mb.id]
    assert (await store.jobs.get_job(b, job_b.id)) is not None


async def test_forget_user_removes_everything_from_the_backend(harness: Harness, rng: np.random.Generator) -> None:
    store, o = harness.store, new_owner()
    bystander = Owner(o.tenant_id, "bystander")
    ms = [make_memory(o, f"fact {i} about gardening", rng) for i in range(4)]
    await store.memories.insert_memories(ms + [make_memory(bystander, "gardening too", rng)])
    await store.memories.write_version(o, ms[0].id, ms[0].next_version(content="fact zero revised"))
    await store.memories.write_version(o, ms[1].id, ms[1].tombstone())
    await store.messages.save_messages(
        [Message(o.tenant_id, o.user_id, f"msg {i}", T(2024, 1, 1), client_message_id=f"c{i}") for i in range(3)]
    )
    await store.jobs.enqueue_job(Job(o.tenant_id, o.user_id, ["c0"]))
    before = await harness.raw_counts(o)
    assert all(v > 0 for k, v in before.items() if k != "outbox"), before

    counts = await store.memories.forget_user(o)
    assert counts["memories"] == 6 and counts["messages"] == 3 and counts["jobs"] == 1, counts
    after = await harness.raw_counts(o)
    assert all(v == 0 for v in after.values()), after
    assert (await harness.raw_counts(bystander))[next(iter(after))] >= 1
    assert await store.keywords.keyword_search(SearchFilter(o), "gardening", limit=10) == []
    assert await store.memories.list_memories(o, include_history=True) == []
    # The user can start over, and the bystander is untouched.
    assert [
        h.memory.content for h in await store.keywords.keyword_search(SearchFilter(bystander), "gardening", limit=10)
    ] == ["gardening too"]
    ((msg, created),) = await store.messages.save_messages(
        [Message(o.tenant_id, o.user_id, "new", T(2024, 2, 1), client_message_id="c0")]
    )
    assert created


# -- paging -------------------------------------------------------------------------------------------
async def _all_pages(list_page, position_of, limit: int) -> list[list]:  # type: ignore[no-untyped-def]
    pages, after = [], None
    while True:
        page = await list_page(limit=limit, after=after)
        pages.append(page)
        if len(page) < limit:
            return pages
        after = position_of(page[-1])


async def test_list_memories_in_the_order_said_paged_by_position(harness: Harness, rng: np.random.Generator) -> None:
    """Oldest first by when said (message time, else creation time), ties by id; every page after the previous
    page's last memory; other owners never listed; microseconds apart is apart (OpenSearch dates keep ms)."""
    store, o = harness.store, new_owner()
    t0 = T(2025, 3, 1, 9)
    us = timedelta(microseconds=1)
    said = [t0 + timedelta(days=2), t0, t0, t0 + us, None, t0 - timedelta(days=400), t0 + 2 * us, None, t0]
    created = [T(2026, 1, 1)] * 4 + [t0 + timedelta(hours=1)] + [T(2026, 1, 1)] * 2 + [t0 - timedelta(days=1), t0]
    ms = [
        make_memory(o, f"item {i}", rng, message_time=m, created_at=c)
        for i, (m, c) in enumerate(zip(said, created, strict=True))
    ]
    await store.memories.insert_memories(ms)
    # a later version of one memory keeps its message time: the current list has it in the same place
    v2 = await store.memories.write_version(o, ms[1].id, ms[1].next_version(content="item 1, edited"))
    stranger = Owner(o.tenant_id, "bob")
    await store.memories.insert_memories([make_memory(stranger, "bob's", rng, message_time=t0 + us)])

    def key(m: Memory) -> tuple[datetime, str]:
        return (m.message_time or m.created_at, m.id)

    current = [m for m in ms if m.id != ms[1].id] + [v2]
    everything = [*ms, v2]
    for include_history, expected in ((False, current), (True, everything)):
        want = [m.id for m in sorted(expected, key=key)]
        assert [m.id for m in await store.memories.list_memories(o, include_history=include_history)] == want
        pages = await _all_pages(
            lambda **kw: store.memories.list_memories(o, include_history=include_history, **kw),  # noqa: B023
            lambda m: PagePosition(m.said_at, m.id),
            limit=2,
        )
        assert len(pages) >= 4 and [m.id for page in pages for m in page] == want, include_history


async def test_a_sessions_messages_in_timestamp_order(harness: Harness) -> None:
    store, o = harness.store, new_owner()
    t0 = T(2025, 6, 1, 18)
    us = timedelta(microseconds=1)
    times = [t0 + timedelta(seconds=2), t0, t0, t0 + us, t0 + timedelta(seconds=1), t0 - timedelta(days=1), t0]
    mine = [Message(o.tenant_id, o.user_id, f"said {i}", t, speaker="Maya", session_id="s1",
                    role="assistant" if i % 2 else "user") for i, t in enumerate(times)]  # fmt: skip
    others = [
        Message(o.tenant_id, o.user_id, "another session", t0, session_id="s2"),
        Message(o.tenant_id, o.user_id, "no session", t0),
        Message(o.tenant_id, "bob", "another user, same session id", t0, session_id="s1"),
        Message(f"{o.tenant_id}-x", o.user_id, "another tenant, same user and session", t0, session_id="s1"),
    ]
    await store.messages.save_messages([*mine[:4], *others, *mine[4:]])
    want = sorted(mine, key=lambda m: (m.timestamp, m.id))
    got = await store.messages.list_session_messages(o, "s1")
    assert [(m.id, m.content, m.speaker, m.role, m.timestamp) for m in got] == [
        (m.id, m.content, m.speaker, m.role, m.timestamp) for m in want
    ]
    pages = await _all_pages(
        lambda **kw: store.messages.list_session_messages(o, "s1", **kw),
        lambda m: PagePosition(m.timestamp, m.id),
        limit=3,
    )
    assert [m.id for page in pages for m in page] == [m.id for m in want]
    assert await store.messages.list_session_messages(o, "unknown-session") == []
    assert [m.content for m in await store.messages.list_session_messages(Owner(o.tenant_id, "bob"), "s1")] == [
        "another user, same session id"
    ]


# -- jobs ---------------------------------------------------------------------------------------------
async def test_jobs_claim_lease_and_retry(fresh_harness: Harness) -> None:
    store, o = fresh_harness.store, new_owner()
    t0 = T(2030, 1, 1)
    early = Job(o.tenant_id, o.user_id, ["m1"], next_attempt_at=t0)
    late = Job(o.tenant_id, o.user_id, ["m2"], next_attempt_at=t0 + timedelta(minutes=10))
    await store.jobs.enqueue_job(late)
    await store.jobs.enqueue_job(early)
    assert await store.jobs.claim_job(t0 - timedelta(seconds=1), 30) is None  # nothing due yet

    got = await store.jobs.claim_job(t0, 30)
    assert got is not None and got.id == early.id and got.status is JobStatus.RUNNING and got.attempts == 1
    assert await store.jobs.claim_job(t0 + timedelta(seconds=10), 30) is None  # leased; the other is not due
    again = await store.jobs.claim_job(t0 + timedelta(seconds=31), 30)  # lease expired: a crashed worker's job
    assert again is not None and again.id == early.id and again.attempts == 2

    again.status, again.last_error = JobStatus.FAILED, "boom"
    again.next_attempt_at = t0 + timedelta(minutes=5)
    await store.jobs.save_job(again)
    stored = await store.jobs.get_job(o, early.id)
    assert (
        stored is not None
        and stored.status is JobStatus.FAILED
        and stored.last_error == "boom"
        and stored.attempts == 2
    )
    assert await store.jobs.claim_job(t0 + timedelta(minutes=4), 30) is None
    retry = await store.jobs.claim_job(t0 + timedelta(minutes=5), 30)
    assert retry is not None and retry.id == early.id and retry.attempts == 3

    retry.status, retry.result = JobStatus.DONE, {"memories": 2}
    await store.jobs.save_job(retry)
    nxt = await store.jobs.claim_job(t0 + timedelta(hours=1), 30)
    assert nxt is not None and nxt.id == late.id
    nxt.status = JobStatus.DEAD
    await store.jobs.save_job(nxt)
    assert await store.jobs.claim_job(t0 + timedelta(days=1), 30) is None  # done and dead jobs are never claimed
    assert (await store.jobs.get_job(o, early.id)).result == {"memories": 2}  # type: ignore[union-attr]
    assert await store.jobs.get_job(Owner(o.tenant_id, "mallory"), early.id) is None


async def test_list_jobs_is_one_tenants_jobs_by_status_paged_by_id(harness: Harness) -> None:
    """A tenant's jobs of every user, filtered by status inside the query, in id order, paged by id;
    another tenant's jobs (even of a user with the same id) never appear."""
    store, o = harness.store, new_owner()
    other = Owner(f"{o.tenant_id}-x", o.user_id)  # a tenant id that extends this one
    mine: list[Job] = []
    for i, status in enumerate([JobStatus.DEAD, JobStatus.DONE, JobStatus.DEAD, JobStatus.FAILED, JobStatus.DEAD]):
        job = Job(o.tenant_id, f"user-{i % 2}", [f"m{i}"], status=status, attempts=i + 1, last_error=f"boom {i}")
        mine.append(job)
        await store.jobs.enqueue_job(job)
    for status in (JobStatus.DEAD, JobStatus.QUEUED):
        await store.jobs.enqueue_job(Job(other.tenant_id, other.user_id, ["x"], status=status, last_error="theirs"))

    everything = await store.jobs.list_jobs(o.tenant_id, limit=100)
    assert [j.id for j in everything] == sorted(j.id for j in mine)
    dead = [j for j in mine if j.status is JobStatus.DEAD]
    got = await store.jobs.list_jobs(o.tenant_id, status=JobStatus.DEAD)
    assert [j.id for j in got] == sorted(j.id for j in dead)
    by_id = {j.id: j for j in mine}
    for j in got:
        want = by_id[j.id]
        assert (j.tenant_id, j.user_id, j.status, j.attempts, j.last_error, j.message_ids) == (
            want.tenant_id, want.user_id, JobStatus.DEAD, want.attempts, want.last_error, want.message_ids,
        )  # fmt: skip

    pages, after = [], None
    while page := await store.jobs.list_jobs(o.tenant_id, status=JobStatus.DEAD, limit=2, after_id=after):
        assert len(page) <= 2
        pages.append([j.id for j in page])
        after = page[-1].id
    assert [i for p in pages for i in p] == sorted(j.id for j in dead) and len(pages) == 2

    assert await store.jobs.list_jobs(o.tenant_id, status=JobStatus.RUNNING) == []
    assert {j.last_error for j in await store.jobs.list_jobs(other.tenant_id)} == {"theirs"}
    assert await store.jobs.list_jobs(o.tenant_id[:-1]) == []  # a prefix of the tenant id is another tenant


# -- API keys -----------------------------------------------------------------------------------------
async def test_api_keys(harness: Harness) -> None:
    store = harness.store
    key = f"sha256-{np.random.default_rng().integers(1 << 62)}"
    assert await store.api_keys.get_api_key(key) is None
    await store.api_keys.put_api_key(ApiKeyRecord(key, "tenant-1", read_only=False, name="ci"))
    assert await store.api_keys.get_api_key(key) == ApiKeyRecord(key, "tenant-1", False, "ci")
    await store.api_keys.put_api_key(ApiKeyRecord(key, "tenant-1", read_only=True, name="ci-ro"))
    assert await store.api_keys.get_api_key(key) == ApiKeyRecord(key, "tenant-1", True, "ci-ro")
    assert not await store.api_keys.api_key_revoked(key)
    assert await store.api_keys.revoke_api_key(key) is True
    assert await store.api_keys.get_api_key(key) is None and await store.api_keys.api_key_revoked(key)
    assert await store.api_keys.revoke_api_key(key) is False  # revoked already: nothing stored to remove


async def test_api_key_revocations_are_durable(harness: Harness) -> None:
    """A revocation outlives the key: a key written again under a revoked hash stays refused, and a
    hash that was never stored (a key of COGNIS_API_KEYS) can be revoked too."""
    store = harness.store
    stored, unstored = (f"sha256-{np.random.default_rng().integers(1 << 62)}" for _ in range(2))
    await store.api_keys.put_api_key(ApiKeyRecord(stored, "tenant-1"))
    assert await store.api_keys.revoke_api_key(stored) is True
    await store.api_keys.put_api_key(ApiKeyRecord(stored, "tenant-1"))  # e.g. an older version's start-up copy
    assert await store.api_keys.get_api_key(stored) is None and await store.api_keys.api_key_revoked(stored)

    assert await store.api_keys.revoke_api_key(unstored) is False
    assert await store.api_keys.api_key_revoked(unstored) and await store.api_keys.get_api_key(unstored) is None
