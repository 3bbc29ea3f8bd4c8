"""Latency of the three stores side by side: embedded (SQLite + numpy), dual (PostgreSQL/pgvector
+ OpenSearch BM25) and OpenSearch-only, at growing sizes.

For each size N, N synthetic memories (deterministic seed; random unit vectors, short vector =
re-normalised prefix; sentences built from a fixed vocabulary so BM25 has real text) spread over
N / --per-user users are bulk-loaded into a fresh namespace of each store (SQLite: batched
transactions; PostgreSQL: COPY, then the HNSW index is built; OpenSearch: _bulk, one refresh).
Then --queries searches of random users are timed one at a time, interleaved across the stores
(query i goes to every store in turn, the order rotating, so background load hits all alike),
after a warm-up in which every user is touched once (loading the embedded store's per-user index):

* vector: two-stage search (short prefix shortlist of --shortlist, full-vector rescoring), top --limit;
* keyword: BM25 of two vocabulary words, top --limit.

It prints p50/p95/p99 per store per size, the load times, and the dual/embedded ratio at p95.
Servers are started on 127.0.0.1 with cognis_dev.local_servers (or pass --postgres-dsn/--opensearch-url).

    .venv/bin/python scripts/bench_stores.py --sizes 10000,100000 --queries 300 --json bench.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from cognis_dev.bench_common import percentile

from cognis_memory.domain import Category, Memory, MemoryKind, Owner, Scope
from cognis_memory.stores.values import SearchFilter

STORES = ("embedded", "dual", "opensearch")

_SUBJECTS = ["I", "My sister", "My brother", "My partner", "My manager", "My friend Sam", "Our neighbour", "My dad"]
_VERBS = ["love", "started", "stopped", "tried", "planned", "booked", "finished", "enjoyed", "recommended", "hated"]
_THINGS = [
    "hiking in the Alps", "learning the violin", "a trip to Lisbon", "running a marathon", "baking sourdough bread",
    "reading science fiction", "a course on machine learning", "climbing at the local gym", "a vegetarian diet",
    "yoga every morning", "a new job at the bank", "painting watercolours", "the jazz festival", "sailing lessons",
    "a visit to the dentist", "saving for a house", "learning Japanese", "photography of birds", "the chess club",
    "growing tomatoes", "a road trip through Norway", "cooking Thai curries", "swimming twice a week",
    "a podcast about history", "knitting a sweater", "volunteering at the shelter", "cycling to work",
]  # fmt: skip
_WHEN = ["last week", "in May", "every Sunday", "two years ago", "recently", "since the summer", "at Christmas",
         "after work", "on holiday", "this month"]  # fmt: skip
_KEYWORDS = sorted({w.lower() for t in _THINGS for w in t.split() if len(w) > 3})


def sentence(rng: np.random.Generator) -> str:
    return (
        f"{_SUBJECTS[rng.integers(len(_SUBJECTS))]} {_VERBS[rng.integers(len(_VERBS))]} "
        f"{_THINGS[rng.integers(len(_THINGS))]} {_WHEN[rng.integers(len(_WHEN))]}."
    )


def unit_rows(a: np.ndarray) -> np.ndarray:
    return (a / np.linalg.norm(a, axis=1, keepdims=True)).astype(np.float32)


def make_corpus(n: int, per_user: int, dim: int, dim_short: int, seed: int) -> tuple[list[Memory], list[Owner]]:
    rng = np.random.default_rng(seed)
    tenant = f"bench-{seed}"
    users = [Owner(tenant, f"user-{u:06d}") for u in range(max(1, n // per_user))]
    full = unit_rows(rng.normal(size=(n, dim)).astype(np.float32))
    short = unit_rows(full[:, :dim_short])
    cats = list(Category)
    t0 = datetime(2023, 1, 1, tzinfo=UTC)
    out = []
    for i in range(n):
        o = users[i % len(users)]
        out.append(
            Memory(
                tenant_id=o.tenant_id, user_id=o.user_id, content=sentence(rng), category=cats[int(rng.integers(len(cats)))],
                scope=Scope.USER, kind=MemoryKind.FACT, event_time=t0 + timedelta(hours=int(rng.integers(20_000))),
                embedding=full[i], embedding_short=short[i],
            )
        )  # fmt: skip
    return out, users


@dataclass
class Result:
    store: str
    size: int
    load_s: float
    vector_ms: list[float] = field(default_factory=list)
    keyword_ms: list[float] = field(default_factory=list)
    vector_hits: float = 0.0
    keyword_hits: float = 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "size": self.size,
            "load_s": round(self.load_s, 2),
            "vector_ms": {f"p{q}": round(percentile(self.vector_ms, q), 3) for q in (50, 95, 99)},
            "keyword_ms": {f"p{q}": round(percentile(self.keyword_ms, q), 3) for q in (50, 95, 99)},
            "mean_vector_hits": round(self.vector_hits, 2),
            "mean_keyword_hits": round(self.keyword_hits, 2),
            "queries": len(self.vector_ms),
        }


async def open_store(kind: str, args: argparse.Namespace, pg_dsn: str | None, os_url: str | None, tmp: Path) -> Any:
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    if kind == "embedded":
        from cognis_memory.stores.embedded import EmbeddedStore

        store: Any = EmbeddedStore(tmp / f"{prefix}.db", dim=args.dim, dim_short=args.dim_short)
    elif kind == "dual":
        from cognis_dev.databases import create_database

        from cognis_memory.stores.dual import DualStore
        from cognis_memory.stores.opensearch import OpenSearchKeywordIndex
        from cognis_memory.stores.postgres import PostgresStore

        assert pg_dsn and os_url
        db = prefix.replace("-", "_")
        dsn = create_database(pg_dsn, db)
        keyword = OpenSearchKeywordIndex(os_client(os_url), index_prefix=prefix, replicas=0)
        store = DualStore(PostgresStore(dsn, dim=args.dim, dim_short=args.dim_short), keyword)
    else:
        from cognis_memory.stores.opensearch import OpenSearchStore

        assert os_url
        store = OpenSearchStore(
            os_client(os_url), index_prefix=prefix, dim=args.dim, dim_short=args.dim_short, replicas=0
        )
    await store.open()
    return store.roles()


def os_client(url: str) -> Any:
    from opensearchpy import OpenSearch

    return OpenSearch(hosts=[url], timeout=300, max_retries=0, pool_maxsize=16)


async def load(kind: str, store: Any, memories: list[Memory]) -> None:
    if kind == "embedded":
        for i in range(0, len(memories), 2000):
            await store.memories.insert_memories(memories[i : i + 2000])
    else:
        await store.backend.bulk_load(memories)


async def timed(fn: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = await fn()
    return (time.perf_counter() - t0) * 1000, out


async def bench_size(
    kinds: list[str], size: int, args: argparse.Namespace, pg_dsn: str | None, os_url: str | None, tmp: Path
) -> list[Result]:
    """Load the same corpus into every store, then time the same queries on all of them, interleaved
    (query i goes to every store in turn, the order rotating), so background load on a shared
    machine hits every store alike."""
    memories, users = make_corpus(size, args.per_user, args.dim, args.dim_short, args.seed)
    stores: dict[str, Any] = {}
    results: dict[str, Result] = {}
    try:
        for kind in kinds:
            print(f"... loading {size} memories into {kind}", file=sys.stderr, flush=True)
            stores[kind] = await open_store(kind, args, pg_dsn, os_url, tmp)
            t0 = time.perf_counter()
            await load(kind, stores[kind], memories)
            results[kind] = Result(kind, size, time.perf_counter() - t0)
        rng = np.random.default_rng(args.seed + 1)

        def query(owner: Owner | None = None) -> tuple[SearchFilter, np.ndarray, np.ndarray, str]:
            o = owner or users[int(rng.integers(len(users)))]
            q = rng.normal(size=args.dim).astype(np.float32)
            q /= np.linalg.norm(q)
            qs = (q[: args.dim_short] / np.linalg.norm(q[: args.dim_short])).astype(np.float32)
            words = " ".join(rng.choice(_KEYWORDS, size=2, replace=False))
            return SearchFilter(o), q, qs, words

        print(f"... warming up ({len(users)} users) and timing {args.queries} queries", file=sys.stderr, flush=True)
        for o in users:  # touch every user once (loads the embedded store's per-user vector index)
            flt, q, qs, words = query(o)
            for store in stores.values():
                await store.vectors.vector_search(flt, q, qs, limit=args.limit, shortlist=args.shortlist)
                await store.keywords.keyword_search(flt, words, limit=args.limit)
        hits: dict[str, tuple[list[int], list[int]]] = {k: ([], []) for k in kinds}
        for i in range(args.queries):
            flt, q, qs, words = query()
            order = kinds[i % len(kinds) :] + kinds[: i % len(kinds)]
            for kind in order:
                store, res = stores[kind], results[kind]
                ms, vr = await timed(
                    lambda store=store, flt=flt, q=q, qs=qs: store.vectors.vector_search(
                        flt, q, qs, limit=args.limit, shortlist=args.shortlist
                    )
                )
                res.vector_ms.append(ms)
                hits[kind][0].append(len(vr.hits))
                ms, kr = await timed(
                    lambda store=store, flt=flt, words=words: store.keywords.keyword_search(
                        flt, words, limit=args.limit
                    )
                )
                res.keyword_ms.append(ms)
                hits[kind][1].append(len(kr))
        for kind, (vh, kh) in hits.items():
            results[kind].vector_hits, results[kind].keyword_hits = float(np.mean(vh)), float(np.mean(kh))
        return [results[k] for k in kinds]
    finally:
        for store in stores.values():
            await store.close()


def print_table(results: list[Result]) -> list[dict[str, Any]]:
    rows = [r.summary() for r in results]
    head = f"{'size':>8} {'store':<11} {'load s':>8} | {'vec p50':>8} {'p95':>8} {'p99':>8} | {'bm25 p50':>8} {'p95':>8} {'p99':>8} | hits v/k"
    print(head)
    print("-" * len(head))
    for r in rows:
        v, k = r["vector_ms"], r["keyword_ms"]
        print(f"{r['size']:>8} {r['store']:<11} {r['load_s']:>8.1f} | {v['p50']:>8.2f} {v['p95']:>8.2f} {v['p99']:>8.2f} | "
              f"{k['p50']:>8.2f} {k['p95']:>8.2f} {k['p99']:>8.2f} | {r['mean_vector_hits']:.0f}/{r['mean_keyword_hits']:.1f}")  # fmt: skip
    print("\nlatency in ms, one query at a time; ratios at p95:")
    for size in sorted({r["size"] for r in rows}):
        by = {r["store"]: r for r in rows if r["size"] == size}
        if "embedded" in by:
            e = by["embedded"]
            for other in ("dual", "opensearch"):
                if other in by:
                    o = by[other]
                    print(f"  {size:>8}: {other}/embedded vector {o['vector_ms']['p95'] / e['vector_ms']['p95']:.2f}x, "
                          f"keyword {o['keyword_ms']['p95'] / e['keyword_ms']['p95']:.2f}x")  # fmt: skip
    return rows


async def main_async(args: argparse.Namespace) -> int:
    sizes = [int(s) for s in args.sizes.split(",") if s]
    kinds = [k for k in args.stores.split(",") if k]
    servers: list[Any] = []
    pg_dsn, os_url = args.postgres_dsn, args.opensearch_url
    try:
        if "dual" in kinds and not pg_dsn:
            from cognis_dev.local_servers import PostgresServer

            pg = PostgresServer(settings={"shared_buffers": "1GB", "maintenance_work_mem": "1GB",
                                          "effective_cache_size": "4GB"}, die_with_parent=True)  # fmt: skip
            servers.append(pg.start())
            pg_dsn = pg.dsn
        if ({"dual", "opensearch"} & set(kinds)) and not os_url:
            from cognis_dev.local_servers import OpenSearchServer

            osrv = OpenSearchServer(heap=args.opensearch_heap, die_with_parent=True)
            servers.append(osrv.start())
            os_url = osrv.url
        results: list[Result] = []
        with tempfile.TemporaryDirectory(prefix="cognis-bench-") as tmp:
            for size in sizes:
                results += await bench_size(kinds, size, args, pg_dsn, os_url, Path(tmp))
        rows = print_table(results)
        print(
            f"\nload average at the end (1/5/15 min): {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs"
        )
        if args.json:
            meta = {
                "when": datetime.now(UTC).isoformat(), "python": platform.python_version(), "cpus": os.cpu_count(),
                "machine": platform.machine(), "args": vars(args),
                "load_average_1_5_15": list(os.getloadavg()),
            }  # fmt: skip
            Path(args.json).write_text(json.dumps({"meta": meta, "results": rows}, indent=2))
            print(f"\nwrote {args.json}")
        return 0
    finally:
        for s in reversed(servers):
            s.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sizes", default="10000,100000", help="comma-separated corpus sizes")
    p.add_argument("--queries", type=int, default=300, help="timed queries per store and size (each side)")
    p.add_argument("--stores", default=",".join(STORES), help="subset of embedded,dual,opensearch")
    p.add_argument("--per-user", type=int, default=100, help="memories per user (users = size / per-user)")
    p.add_argument("--dim", type=int, default=384, help="full vector size (all-MiniLM-L6-v2: 384)")
    p.add_argument("--dim-short", type=int, default=128, help="short prefix size (the service default)")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--shortlist", type=int, default=200)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--postgres-dsn", help="use this server instead of starting one")
    p.add_argument("--opensearch-url", help="use this server instead of starting one")
    p.add_argument("--opensearch-heap", default="2g")
    p.add_argument("--json", help="also write the results to this JSON file")
    return asyncio.run(main_async(p.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
