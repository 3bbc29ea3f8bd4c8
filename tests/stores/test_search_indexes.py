"""The embedded store's per-user search indexes (issue 23): the in-memory keyword index answers exactly
what FTS5 answers, the approximate prefix index finds what the exact scan finds and follows writes,
and a search confined to kinds the user has none of answers without scanning."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import numpy as np
import pytest

from cognis_memory.domain import MemoryKind, Owner
from cognis_memory.search_filter import SearchFilter
from cognis_memory.stores import keyword_index
from cognis_memory.stores.embedded import EmbeddedStore
from cognis_memory.stores.keyword_index import FtsStatistics, FtsTokenizer, UserKeywordIndex
from tests.stores.helpers import DIM, DIM_SHORT, make_memory, short_of, unit

WORDS = (
    "cook cooking cooked cooks run running ran garden gardens bike biking museum trip Lisbon Porto café cafe "
    "naïve naive résumé straße dog dogs walked walking x_y 42 3.14 the a and sister concert guitar lessons"
).split()

QUERIES = [
    "cooking", "cook cooked", "running garden", "museum trip Lisbon", "cafe", "café naive", "straße", "dog walking",
    "the", "42", "guitar lessons sister", "bike", "x_y garden", "unknownword", "Porto dogs cooked gardens",
]  # fmt: skip


def _texts(rng: np.random.Generator, n: int) -> list[str]:
    # few words per text from a small vocabulary: many rows share a score (ties must keep FTS5's order)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 6)))) for _ in range(n)]


async def _store(path: Path, **kw: int) -> EmbeddedStore:
    store = EmbeddedStore(path, dim=DIM, dim_short=DIM_SHORT, **kw)
    await store.open()
    return store


def _pairs(hits: list) -> list[tuple[str, float]]:
    return [(h.memory.id, h.score) for h in hits]


async def test_the_keyword_index_answers_what_fts5_answers_through_writes(tmp_path: Path, monkeypatch) -> None:
    rng = np.random.default_rng(5)
    path = tmp_path / "m.db"
    indexed = await _store(path, keyword_index_min_rows=1)
    plain = await _store(path, keyword_index_min_rows=0)
    alice, bob = Owner("t", "alice"), Owner("t", "bob")
    await indexed.insert_memories([make_memory(alice, t, rng) for t in _texts(rng, 400)])
    await indexed.insert_memories([make_memory(bob, t, rng) for t in _texts(rng, 250)])
    used = 0
    real_search = UserKeywordIndex.search

    def counting(self, *a, **kw):  # type: ignore[no-untyped-def]
        nonlocal used
        used += 1
        return real_search(self, *a, **kw)

    monkeypatch.setattr(UserKeywordIndex, "search", counting)
    for owner in (alice, bob):  # the first search starts the background builds
        await indexed.keyword_search(SearchFilter(owner=owner), "cooking", limit=5)
    assert indexed.join_index_builds(60)
    used = 0

    async def same_answers() -> None:
        for owner in (alice, bob):
            flt = SearchFilter(owner=owner)
            for q in QUERIES:
                for limit in (5, 50):
                    got = _pairs(await indexed.keyword_search(flt, q, limit=limit))
                    want = _pairs(await plain.keyword_search(flt, q, limit=limit))
                    assert got == want, (owner, q, limit)

    await same_answers()
    assert isinstance(indexed._keywords.peek(alice), UserKeywordIndex)
    first = used
    assert first >= 2 * 2 * (len(QUERIES) - 2)  # only the phrase queries ("x_y", "3.14"-like) go to FTS5

    # writes after the indexes were loaded: new rows, new versions, another user forgotten
    await indexed.insert_memories([make_memory(alice, t, rng) for t in _texts(rng, 60)])
    current = await indexed.list_memories(alice, limit=30)
    for m in current[:20]:
        await indexed.write_version(alice, m.id, m.next_version(content=m.content + " cooking museum"))
    await indexed.forget_user(bob)
    await indexed.keyword_search(SearchFilter(owner=bob), "cooking", limit=5)  # bob: nothing left to index
    assert indexed.join_index_builds(60)
    await same_answers()
    assert used > first
    await indexed.close()
    await plain.close()


async def test_a_filtered_keyword_search_and_a_small_user_are_answered_by_fts5(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    store = await _store(tmp_path / "m.db", keyword_index_min_rows=100)
    small, large = Owner("t", "small"), Owner("t", "large")
    await store.insert_memories([make_memory(small, t, rng) for t in _texts(rng, 20)])
    await store.insert_memories([make_memory(large, t, rng, session_id="s1") for t in _texts(rng, 150)])
    assert await store.keyword_search(SearchFilter(owner=small), "cooking", limit=5)
    assert not isinstance(store._keywords.peek(small), UserKeywordIndex)
    await store.keyword_search(SearchFilter(owner=large, session_id="s1"), "cooking", limit=5)
    assert store._keywords.peek(large) is None  # a filtered search never builds the index
    await store.keyword_search(SearchFilter(owner=large), "cooking", limit=5)
    assert store.join_index_builds(60)
    assert isinstance(store._keywords.peek(large), UserKeywordIndex)
    # the small user grows past the threshold: indexed from the next search on
    await store.insert_memories([make_memory(small, t, rng) for t in _texts(rng, 90)])
    await store.keyword_search(SearchFilter(owner=small), "cooking", limit=5)
    assert store.join_index_builds(60)
    assert isinstance(store._keywords.peek(small), UserKeywordIndex)
    await store.close()


async def test_fts5_answers_while_the_keyword_index_is_built_and_writes_meanwhile_reach_it(
    tmp_path: Path, monkeypatch
) -> None:
    import threading

    rng = np.random.default_rng(10)
    path = tmp_path / "m.db"
    store = await _store(path, keyword_index_min_rows=100)
    plain = await _store(path, keyword_index_min_rows=0)
    owner = Owner("t", "u")
    flt = SearchFilter(owner=owner)
    await store.insert_memories([make_memory(owner, t, rng) for t in _texts(rng, 300)])
    release, loading = threading.Event(), threading.Event()
    real_load = EmbeddedStore._load_keyword_index

    def held(self, o):  # type: ignore[no-untyped-def]
        loading.set()
        assert release.wait(60)
        return real_load(self, o)

    monkeypatch.setattr(EmbeddedStore, "_load_keyword_index", held)
    first = _pairs(await store.keyword_search(flt, "cooking museum", limit=20))
    assert loading.wait(60)
    assert store._keywords.peek(owner) is None  # still building: FTS5 answered
    assert first == _pairs(await plain.keyword_search(flt, "cooking museum", limit=20))
    late = make_memory(owner, "cooking museum cooking museum", rng)
    await store.insert_memories([late])  # lands during the build: the build is read again
    release.set()
    assert store.join_index_builds(60)
    assert isinstance(store._keywords.peek(owner), UserKeywordIndex)
    got = _pairs(await store.keyword_search(flt, "cooking museum", limit=20))
    assert got == _pairs(await plain.keyword_search(flt, "cooking museum", limit=20))
    assert got[0][0] == late.id
    await store.close()
    await plain.close()


def test_the_tokenizer_gives_fts5s_tokens_and_refuses_phrases() -> None:
    tok = FtsTokenizer("porter unicode61 remove_diacritics 2")
    assert tok.single_tokens(["Cooking", "cooked", "Café", "naïve"]) == ["cook", "cook", "cafe", "naiv"]
    assert tok.single_tokens(["x_y"]) is None  # FTS5 reads it as the phrase "x" "y"
    postings, sizes = tok.postings(["cook cooks cooking", "a dog"])
    assert postings["cook"][0].tolist() == [0] and postings["cook"][1].tolist() == [3.0]
    assert sizes.tolist() == [3.0, 2.0]


def test_the_statistics_are_fts5s_own(tmp_path: Path) -> None:
    import sqlite3

    conn = sqlite3.connect(tmp_path / "f.db")
    conn.execute("CREATE VIRTUAL TABLE memories_fts USING fts5(owner, content, memory_id UNINDEXED)")
    conn.executemany(
        "INSERT INTO memories_fts VALUES (?, ?, ?)", [("o1", "a b c", "m1"), ("o1", "b c", "m2"), ("o2", "c", "m3")]
    )
    conn.execute("DELETE FROM memories_fts WHERE memory_id = 'm2'")
    stats = FtsStatistics("memories_fts")
    assert stats.totals(conn) == keyword_index.TableTotals(rows=2, tokens=2 + 4)
    assert stats.doc_freq(conn, ["c", "b", "zz"]) == {"c": 2, "b": 1, "zz": 0}


async def test_the_fact_channel_of_a_user_without_facts_answers_at_once(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    store = await _store(tmp_path / "m.db")
    owner = Owner("t", "u")
    await store.insert_memories([make_memory(owner, f"raw {i}", rng, kind=MemoryKind.RAW) for i in range(30)])
    q = unit(rng.normal(size=DIM))
    facts = SearchFilter(owner=owner, kinds=frozenset({MemoryKind.FACT}))
    res = await store.vector_search(facts, q, None, limit=5, shortlist=5)
    assert res.hits == [] and res.timings_ms == {}  # no scan was timed: none ran
    fact = make_memory(owner, "a fact", rng, vector=q, kind=MemoryKind.FACT)
    await store.insert_memories([fact])
    res = await store.vector_search(facts, q, None, limit=5, shortlist=5)
    assert [h.memory.id for h in res.hits] == [fact.id]
    await store.close()


async def _wait_for_ann(store: EmbeddedStore, owner: Owner) -> None:
    deadline = time.monotonic() + 60
    while (idx := store._vectors.peek(owner)) is None or idx.ann is None:
        assert time.monotonic() < deadline, "the approximate index was not built"
        await asyncio.sleep(0.05)


async def test_the_approximate_prefix_index_finds_what_the_exact_scan_finds_and_follows_writes(tmp_path: Path) -> None:
    pytest.importorskip("faiss")
    rng = np.random.default_rng(8)
    path = tmp_path / "m.db"
    ann = await _store(path, ann_min_rows=300)
    owner = Owner("t", "u")
    await ann.insert_memories([make_memory(owner, f"m {i}", rng) for i in range(1500)])
    queries = [unit(rng.normal(size=DIM)) for _ in range(30)]
    flt = SearchFilter(owner=owner)
    await ann.vector_search(flt, queries[0], short_of(queries[0]), limit=10, shortlist=200)
    # writes while the index may be building are replayed on it
    late = make_memory(owner, "late", rng, vector=queries[1])
    await ann.insert_memories([late])
    await _wait_for_ann(ann, owner)
    exact = await _store(path, ann_min_rows=0)
    overlap = []
    for q in queries:
        a = [h.memory.id for h in (await ann.vector_search(flt, q, short_of(q), limit=10, shortlist=200)).hits]
        e = [h.memory.id for h in (await exact.vector_search(flt, q, short_of(q), limit=10, shortlist=200)).hits]
        overlap.append(len(set(a) & set(e)) / 10)
    assert np.mean(overlap) >= 0.95
    hits = (await ann.vector_search(flt, queries[1], short_of(queries[1]), limit=3, shortlist=200)).hits
    assert hits[0].memory.id == late.id
    newer = await ann.write_version(owner, late.id, late.next_version(content="later"))
    hits = (await ann.vector_search(flt, queries[1], short_of(queries[1]), limit=3, shortlist=200)).hits
    assert hits[0].memory.id == newer.id and late.id not in {h.memory.id for h in hits}
    await ann.close()
    await exact.close()


async def test_a_graph_with_a_quarter_of_its_keys_removed_is_built_again(tmp_path: Path) -> None:
    pytest.importorskip("faiss")
    rng = np.random.default_rng(9)
    store = await _store(tmp_path / "m.db", ann_min_rows=200)
    owner = Owner("t", "u")
    mems = [make_memory(owner, f"m {i}", rng) for i in range(400)]
    await store.insert_memories(mems)
    flt = SearchFilter(owner=owner)
    q = unit(rng.normal(size=DIM))
    await store.vector_search(flt, q, short_of(q), limit=10, shortlist=100)
    await _wait_for_ann(store, owner)
    first = store._vectors.peek(owner).ann
    for m in mems[:150]:
        await store.write_version(owner, m.id, m.next_version(content=m.content + " v2"))
    assert first.stale
    await store.vector_search(flt, q, short_of(q), limit=10, shortlist=100)
    deadline = time.monotonic() + 60
    while store._vectors.peek(owner).ann is first:
        assert time.monotonic() < deadline, "the graph was not built again"
        await asyncio.sleep(0.05)
    again = store._vectors.peek(owner).ann
    assert again.removed == 0 and len(again) == 400
    await store.close()


def test_one_load_per_owner_at_a_time_and_a_write_during_it_loads_again() -> None:
    import threading

    from cognis_memory.stores.owner_cache import OwnerCache

    cache: OwnerCache[list[int]] = OwnerCache(len)
    owner = Owner("t", "u")
    calls, release, started = [], threading.Event(), threading.Event()

    def loader() -> list[int]:
        calls.append(1)
        started.set()
        assert release.wait(60)
        return [len(calls)]

    got: list[list[int]] = []
    threads = [threading.Thread(target=lambda: got.append(cache.get(owner, loader))) for _ in range(3)]
    for t in threads:
        t.start()
    assert started.wait(60)
    with cache.lock:
        cache.written(owner)  # a write lands while the rows are read: that load is not kept
    release.set()
    for t in threads:
        t.join(60)
    assert len(calls) == 2  # the first load, discarded, and one more: the waiting callers did not load
    assert got == [[2], [2], [2]] and all(g is got[0] for g in got)


def test_the_vector_index_holds_each_vector_once_and_scores_as_the_whole_vector_would() -> None:
    """Full vectors are held as their unit prefix, its length and the rest (no second copy of the prefix):
    scores, shortlists and the vectors handed back agree with plain float arithmetic on the whole vectors,
    through swap-removals, and the exact prefix scan (faiss's top-k) picks numpy's shortlist."""
    from cognis_memory.stores.numpy_index import UserVectorIndex, top_inner_products

    rng = np.random.default_rng(11)
    n, dim, d = 3_000, 48, 16
    full = rng.standard_normal((n, dim)).astype(np.float32)
    full /= np.linalg.norm(full, axis=1, keepdims=True)
    short = full[:, :d] / np.linalg.norm(full[:, :d], axis=1, keepdims=True)
    ids = [f"m{i}" for i in range(n)]
    idx = UserVectorIndex.of_vectors(ids, full, short)
    assert idx.short.nbytes + idx.tail.nbytes + idx.prefix_norm.nbytes == n * (dim + 1) * 4  # one float a memory more
    for gone in rng.choice(n, 400, replace=False):
        idx.remove(f"m{gone}")
    live = np.array([int(i[1:]) for i in idx.ids])
    np.testing.assert_allclose(idx.full_vectors(np.arange(idx.n)), full[live], atol=2e-7)
    np.testing.assert_allclose(idx.full_vectors(7), full[live[7]], atol=2e-7)
    flt = SearchFilter(owner=Owner("t", "u"))
    for _ in range(20):
        q = rng.standard_normal(dim).astype(np.float32)
        q /= np.linalg.norm(q)
        qs = (q[:d] / np.linalg.norm(q[:d])).astype(np.float32)
        np.testing.assert_allclose(idx.full_scores(None, q), full[live] @ q, atol=1e-6)
        prefix = short[live] @ qs
        assert set(live[top_inner_products(idx.short[: idx.n], qs, 200)]) == set(live[np.argsort(-prefix)[:200]])
        pairs, shortlisted, _ = idx.search(flt, q, qs, 10, 200)
        expected = live[np.argsort(-prefix)[:200]]
        best = expected[np.argsort(-(full[expected] @ q))[:10]]
        assert shortlisted == 200 and [p[0] for p in pairs] == [f"m{i}" for i in best]
        np.testing.assert_allclose([p[1] for p in pairs], full[best] @ q, atol=1e-6)


def _same(a: list, b: list) -> None:
    assert [m.id for m in a] == [m.id for m in b]
    for x, y in zip(a, b, strict=True):
        assert (x.content, x.version, x.is_current, x.session_id, x.created_at) == (
            y.content, y.version, y.is_current, y.session_id, y.created_at,
        )  # fmt: skip
        np.testing.assert_allclose(x.embedding, y.embedding, atol=1e-6)
        np.testing.assert_array_equal(x.embedding_short, y.embedding_short)


async def test_search_hits_are_read_by_rowid_and_are_the_rows_a_read_by_id_gives(tmp_path: Path) -> None:
    """A loaded vector index knows each row's SQLite rowid (from its load, from an insert, from a new
    version) and the hits of a search are read by it; what comes back is what a read by id gives. A
    rowid that no longer names the memory asked for is not trusted: that memory is read by id."""
    rng = np.random.default_rng(11)
    store = await _store(tmp_path / "m.db")
    alice, bob = Owner("t", "alice"), Owner("t", "bob")
    try:
        await store.insert_memories([make_memory(alice, t, rng) for t in _texts(rng, 60)])
        await store.insert_memories([make_memory(bob, t, rng) for t in _texts(rng, 20)])
        q = unit(rng.normal(size=DIM))
        await store.vector_search(SearchFilter(owner=alice), q, short_of(q), limit=5, shortlist=20)  # loads
        idx = store._vectors.peek(alice)
        assert idx is not None and bool((idx.rowid[: idx.n] >= 0).all())
        added = make_memory(alice, "a memory written after the load", rng)
        await store.insert_memories([added])
        first = (await store.fetch_memories(alice, [idx.ids[0]]))[0]
        newer = await store.write_version(alice, first.id, first.next_version(content="its next version"))
        assert idx.rowid[idx.row_of[added.id]] >= 0 and idx.rowid[idx.row_of[newer.id]] >= 0

        ids = list(idx.ids)
        by_rowid = store._fetch(alice, ids, vectors_from=idx)
        _same(by_rowid, await store.fetch_memories(alice, ids))
        assert len(store._fetch_indexed(alice, ids, idx)) == len(ids)  # every one read by rowid

        # a rowid that names another memory (here bob's) and one that names no row: read by id instead
        bobs_rowid = store._read("SELECT rowid FROM memories WHERE user_id = 'bob' LIMIT 1")[0][0]
        idx.rowid[idx.row_of[ids[1]]] = bobs_rowid
        idx.rowid[idx.row_of[ids[2]]] = 10**9
        assert set(store._fetch_indexed(alice, ids, idx)) == set(ids) - {ids[1], ids[2]}
        _same(store._fetch(alice, ids, vectors_from=idx), await store.fetch_memories(alice, ids))

        hits = (await store.vector_search(SearchFilter(owner=alice), q, short_of(q), limit=10, shortlist=40)).hits
        assert all(h.memory.user_id == "alice" and h.memory.is_current for h in hits) and len(hits) == 10
    finally:
        await store.close()
