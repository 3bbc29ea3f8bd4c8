"""Search cost per stage against the size of a user's memory, with its floor (issue 23).

For each size (``--sizes``) and layout (``one_user``: every memory belongs to one user;
``many_users``: ``--per-user`` memories each) an embedded store is built once with synthetic
memories (``bench_common.bulk_load``: real all-MiniLM-L6-v2 vectors of a synthetic vocabulary,
real text for BM25) and kept under ``--db`` (reused by later runs). Each store is then measured
in a FRESH process (``--measure``), so that start-up, resident memory and the first search are
those of a server that just started:

* **cold start**: the service started on the existing file (model and store opened), and the
  wall time of the first search (the user's indexes loaded or built);
* **resident memory**: RSS after start (the idle process, model loaded) and after the searches
  (the searched users' indexes loaded); the difference per 100k memories;
* **the whole search**: ``MemoryService.search`` with the default recipe for ``--queries``
  synthetic queries (random users in the many-users layout), CPU-ms (process CPU time, every
  thread) and wall ms, p50/p95, plus the mean of every stage the request telemetry timed;
* **each stage alone**, on the same queries, in CPU-ms: the query embedding (the model, no
  cache), the main vector search, the fact channel's vector search, the keyword search (the text
  the pipeline sends it, read from ``explain``), the speaker probe (one keyword query per probed
  word, only when the pipeline probed); "after fusion" is the whole search less the parts;
* **the floor** the issue defines, measured in the same process: the query embedding + a bare
  prefix scan (faiss's brute-force top-k of the shortlist over one contiguous float32 matrix of
  the user's prefix vectors; until 4 December 2026 the floor's scan was numpy's product and
  ``argpartition``, 2-3x its cost) + a bare FTS5 top-k (``bm25()`` ``ORDER BY rank LIMIT k``
  over the owner's rows, ids only, no join). The prefix matrix of the floor is made by the
  script, not by the store.

Where the user's approximate prefix index answers (``ann_min_memories``), the recall@10 of the
vector stage against the exact scan is measured too: the same searches run again with the index
detached. ``--cold-serve`` measures only the cold start as an operator sees it: ``cognis-memory
serve`` started on the store, and the wall time from its start to the first answered search over
HTTP (with ``--compare-with``, alternately with the other runtime); with ``--http-searches N``
the server then answers N searches over HTTP, one after another, and their wall p50/p95 are the
latency a client sees.

``--stores embedded,dual,opensearch`` measures the production stores as well, in the same run: each
is loaded once with the same synthetic memories through its own ``bulk_load``, on PostgreSQL (pgvector)
and OpenSearch started on free ports by ``cognis_dev.local_servers`` (or at ``--postgres-dsn`` /
``--opensearch-url``), and the same searches are timed in this process: wall, this process's CPU, the
servers' CPU per search, the telemetry's stage means, each stage alone, and recall@10 of the store's
vector search against two exact numpy scans of the user's loaded vectors (the two stages done exactly;
the full vector alone). One table then lists every store.

``--compare-with TREE`` measures every store twice per round, alternately (the two take turns going
first): once with this checkout's runtime and once with the runtime of TREE (another checkout, e.g. a worktree of
``main``: its ``runtime/`` and ``devtools/`` go first on ``PYTHONPATH``), ``--rounds`` times,
and prints the ratios round by round (after / before), so the machine's load drifts under both.

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/bench_search.py --sizes 10000,100000 --db /tmp/bench-search
    HF_HUB_OFFLINE=1 .venv/bin/python scripts/bench_search.py --sizes 100000 --layouts one_user \\
        --db /tmp/bench-search --compare-with /work/wt-base --rounds 3
    HF_HUB_OFFLINE=1 .venv/bin/python scripts/bench_search.py --sizes 100000 --layouts one_user \
        --db /tmp/bench-search --cold-serve --http-searches 200 --compare-with /work/wt-base --rounds 3

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/bench_search.py --stores embedded,dual,opensearch --sizes 10000 \
        --queries 100 --db /tmp/bench-search

The last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cognis_dev import bench_common as bc

if TYPE_CHECKING:
    import numpy as np

TENANT = "bench"
LAYOUTS = ("one_user", "many_users")


def store_path(root: Path, n: int, layout: str, per_user: int) -> Path:
    users = 1 if layout == "one_user" else max(1, n // per_user)
    return root / f"{layout}-{n}-{users}u" / "memory.db"


def owners_of(n: int, layout: str, per_user: int) -> list[str]:
    users = 1 if layout == "one_user" else max(1, n // per_user)
    return [f"u{i:06d}" for i in range(users)]


def _service(db: Path, embedder: Any) -> Any:
    from cognis_memory.config import Settings
    from cognis_memory.service import MemoryService
    from cognis_memory.wiring import build_store

    settings = Settings(data_dir=db.parent, sqlite_path=db, run_worker=False)
    # a baseline runtime (--compare-with) runs with its own cognis_dev, so this cannot be bench_common.setting:
    # before nested settings the prefix size was a field of Settings itself
    dim_short = settings.encoder.dim_short if hasattr(settings, "encoder") else settings.embedding_dim_short
    return MemoryService(
        settings,
        store=build_store(settings, dim=embedder.dim, dim_short=dim_short),
        embedder=embedder,
        telemetry=bc.RecordingTelemetry(),
    )


async def build(db: Path, n: int, layout: str, per_user: int, vocab: int) -> dict[str, Any]:
    """The store for (n, layout) at ``db``, made once (a finished store has a ``.done`` file beside it)."""
    from cognis_memory.config import Settings
    from cognis_memory.wiring import build_embedder

    done = db.parent / ".done"
    if done.exists():
        return json.loads(done.read_text())
    db.parent.mkdir(parents=True, exist_ok=True)
    for p in db.parent.glob("memory.db*"):
        p.unlink()
    embedder = build_embedder(Settings())
    synth = bc.SyntheticVectors(embedder, vocab=vocab)
    svc = _service(db, embedder)
    await svc.start(run_worker=False)
    owners = owners_of(n, layout, per_user)
    load = await bc.bulk_load(svc, synth, [(TENANT, u) for u in owners], n, batch=5000)
    await svc.close()
    info = {"memories": n, "layout": layout, "users": len(owners), "load": load,
            "sqlite_mib": round(sum(p.stat().st_size for p in db.parent.glob("memory.db*")) / 2**20, 1)}  # fmt: skip
    done.write_text(json.dumps(info))
    return info


def _cpu_ms(fn: Any) -> tuple[float, Any]:
    c0 = time.process_time()
    out = fn()
    return (time.process_time() - c0) * 1000, out


async def _acpu_ms(coro: Any) -> tuple[float, Any]:
    c0 = time.process_time()
    out = await coro
    return (time.process_time() - c0) * 1000, out


def _trim_heap() -> None:
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None).malloc_trim(0)
        except (OSError, AttributeError):  # not glibc
            pass


def summary(values: list[float]) -> dict[str, float]:
    s = bc.latency_summary(values)
    return {"p50": s["p50_ms"], "p95": s["p95_ms"], "mean": s["mean_ms"]}


async def stages_alone(svc: Any, queries: list[str], picked: list[str]) -> tuple[dict[str, list[float]], list[Any]]:
    """Each stage of the searches alone, CPU-ms of this process: the query embedding, the main vector
    search, the fact channel's vector search, the keyword search, each on the texts the pipeline used
    (read from ``explain``); and those texts, ``(user, search text, keyword text)`` per query."""
    import numpy as np

    from cognis_memory.domain import Owner
    from cognis_memory.encoding.batching import Priority
    from cognis_memory.retrieval.pipeline import SearchQuery, fact_filter
    from cognis_memory.stores.values import SearchFilter
    from cognis_memory.telemetry.recorder import StageRecorder

    pipe, cfg = svc.retrieval, svc.retrieval_config
    enc = svc.encoder
    stage: dict[str, list[float]] = {k: [] for k in ("embed_query", "vector", "fact_channel", "keyword")}
    explained = []
    for q, u in zip(queries, picked, strict=True):
        r = await pipe.search(
            SearchQuery(filter=SearchFilter(owner=Owner(TENANT, u)), text=q, explain=True), StageRecorder()
        )
        explained.append((u, r.explain["analysis"]["search_text"], r.explain["analysis"]["keyword_text"]))
    for u, text, kw in explained:
        flt = SearchFilter(owner=Owner(TENANT, u))
        ms, (full_rows, _short) = await _acpu_ms(enc.encode_async([enc.query_text(text)], Priority.QUERY))
        stage["embed_query"].append(ms)
        full = full_rows[0]
        short = full[: enc.dim_short] / np.linalg.norm(full[: enc.dim_short])
        ms, _ = await _acpu_ms(
            svc.stores.vectors.vector_search(flt, full, short, limit=cfg.vector_k, shortlist=cfg.shortlist)
        )
        stage["vector"].append(ms)
        ff = fact_filter(flt) if cfg.fact_channel else None
        if ff is not None:
            ms, _ = await _acpu_ms(
                svc.stores.vectors.vector_search(ff, full, None, limit=cfg.fact_k, shortlist=cfg.fact_k)
            )
            stage["fact_channel"].append(ms)
        ms, _ = await _acpu_ms(svc.stores.keywords.keyword_search(flt, kw, limit=cfg.bm25_k))
        stage["keyword"].append(ms)
    return stage, explained


async def first_search(svc: Any, owners: list[str], n: int, count: int) -> tuple[list[str], list[str], float]:
    """The users and texts of ``count`` searches (the same for every store and runtime of a size), and the
    wall ms of the first user's first search (its indexes loaded or built)."""
    rng = random.Random(n)
    picked = [owners[0]] + [rng.choice(owners) for _ in range(count - 1)]
    queries = bc.synthetic_queries(count, seed=5 + n)
    assert isinstance(svc.telemetry, bc.RecordingTelemetry)
    t0 = time.perf_counter()
    await svc.search(TENANT, picked[0], "what did I say about the museum?")
    return picked, queries, (time.perf_counter() - t0) * 1000


async def measure(db: Path, n: int, layout: str, args: argparse.Namespace) -> dict[str, Any]:
    """Everything of one store, in this (fresh) process."""
    import sqlite3

    import faiss
    import numpy as np

    from cognis_memory.config import Settings
    from cognis_memory.domain import Owner
    from cognis_memory.wiring import build_embedder

    try:
        from cognis_memory.stores.embedded.keyword_query import fts_query_terms
        from cognis_memory.stores.embedded.keyword_query import quote as _quote
    except ImportError:  # a runtime from before the quoting function was public, or from before the role split
        try:
            from cognis_memory.stores.embedded.keyword_query import _quote, fts_query_terms  # type: ignore[attr-defined,no-redef]
        except ImportError:
            from cognis_memory.stores.embedded import _quote, fts_query_terms  # type: ignore[attr-defined,no-redef]
    from cognis_memory.stores.filters import owner_token
    from cognis_memory.stores.values import SearchFilter

    embedder = build_embedder(Settings())
    embedder.embed(["warm up the model"])
    t_start = time.perf_counter()
    svc = _service(db, embedder)
    await svc.start(run_worker=False)
    started_s = time.perf_counter() - t_start
    # the idle figure after handing free heap pages back, as a runtime that trims after its loads does:
    # otherwise that runtime's first trim also returns the idle process's slack and reads as negative
    # memory per 100k
    _trim_heap()
    rss_idle = bc.rss_mib()
    owners = owners_of(n, layout, args.per_user)
    # cold: the first search of a user (its indexes loaded or built)
    picked, queries, first_ms = await first_search(svc, owners, n, args.queries)
    # a large user's keyword index and a very large user's approximate index are built in the background
    # after the first search: measure the searches once they are there (a runtime without background
    # builds has no join_index_builds; one without an approximate index no ann_pending)
    t0 = time.perf_counter()
    join = getattr(svc.stores.vectors, "join_index_builds", None)
    if join is not None:
        await asyncio.to_thread(join)
    builds_s = round(time.perf_counter() - t0, 1)
    cache = getattr(svc.stores.vectors, "_vectors", None)
    idx = cache.peek(Owner(TENANT, picked[0])) if hasattr(cache, "peek") else None
    while getattr(idx, "ann_pending", None) is not None:
        await asyncio.sleep(0.5)
    ann_build_s = (
        round(time.perf_counter() - t0, 1) if getattr(idx, "ann", None) is not None else None
    )  # from the first search
    for q in queries[:3]:
        await svc.search(TENANT, picked[0], q + " warm")
    # every other user's first search (its indexes loaded): timed apart, so that the searches below are
    # those of a server whose users were seen before (their indexes stay cached up to max_cached_rows)
    first_user_wall = []
    for u in dict.fromkeys(picked[1:]):
        if u != picked[0]:
            w0 = time.perf_counter()
            await svc.search(TENANT, u, queries[0] + " warm")
            first_user_wall.append((time.perf_counter() - w0) * 1000)
    if join is not None:
        await asyncio.to_thread(join)
    svc.telemetry.take()

    whole_cpu, whole_wall = [], []
    for q, u in zip(queries, picked, strict=True):
        c0, w0 = time.process_time(), time.perf_counter()
        await svc.search(TENANT, u, q)
        whole_wall.append((time.perf_counter() - w0) * 1000)
        whole_cpu.append((time.process_time() - c0) * 1000)
    records = svc.telemetry.take()
    probes = sum(1 for r in records if r.get("speaker_probe"))
    rss_after = bc.rss_mib()

    # each stage alone (the texts the pipeline used, from explain)
    stage, explained = await stages_alone(svc, queries, picked)
    cfg, enc = svc.retrieval_config, svc.encoder

    # recall@10 of the vector stage against the exact scan, where an approximate index shortlists (the
    # same search run twice: with the index, and with the index detached so the prefix scan is exact)
    recall: list[float] = []
    vs = svc.stores.vectors

    async def top10(flt: SearchFilter, full: np.ndarray, short: np.ndarray) -> set[str]:
        r = await vs.vector_search(flt, full, short, limit=10, shortlist=cfg.shortlist)
        return {h.memory.id for h in r.hits}

    if getattr(idx, "ann", None) is not None:
        for u, text, _kw in explained:
            full = enc.encode([enc.query_text(text)])[0][0]
            short = full[: enc.dim_short] / np.linalg.norm(full[: enc.dim_short])
            flt = SearchFilter(owner=Owner(TENANT, u))
            approx = await top10(flt, full, short)
            ann, idx.ann = idx.ann, None
            try:
                exact = await top10(flt, full, short)
            finally:
                idx.ann = ann
            recall.append(len(approx & exact) / max(1, len(exact)))

    # the floor: embedding + bare prefix scan + bare FTS5 top-k, on the same texts
    conn = sqlite3.connect(db)
    mats: dict[str, np.ndarray] = {}
    floor_scan, floor_fts = [], []
    for u, text, kw in explained:
        if u not in mats:
            rows = conn.execute(
                "SELECT embedding_short FROM memories WHERE tenant_id = ? AND user_id = ? AND is_current = 1",
                (TENANT, u),
            ).fetchall()
            mats[u] = np.frombuffer(b"".join(r[0] for r in rows), dtype=np.float32).reshape(len(rows), -1).copy()
            del rows
        full = enc.encode([enc.query_text(text)])[0][0]
        short = (full[: enc.dim_short] / np.linalg.norm(full[: enc.dim_short])).astype(np.float32)
        m = mats[u]

        def scan(m: np.ndarray = m, short: np.ndarray = short) -> Any:
            # the cheapest bare scan known here: faiss's SIMD top-k over the matrix (numpy's product and
            # argpartition cost 2-3x more at 100k rows)
            k = min(cfg.shortlist, m.shape[0])
            return faiss.knn(short[None, :], m, k, metric=faiss.METRIC_INNER_PRODUCT)[1]

        floor_scan.append(_cpu_ms(scan)[0])
        terms = fts_query_terms(kw)
        if terms:
            match = f'owner : "{owner_token(Owner(TENANT, u))}" AND content : ({" OR ".join(_quote(t) for t in terms)})'
            sql = "SELECT rowid, bm25(memories_fts, 0.0, 1.0) AS r FROM memories_fts WHERE memories_fts MATCH ? ORDER BY r LIMIT ?"
            floor_fts.append(_cpu_ms(lambda: conn.execute(sql, (match, cfg.bm25_k)).fetchall())[0])  # noqa: B023
    conn.close()
    del mats
    await svc.close()
    parts = {k: summary(v) for k, v in stage.items() if v}
    p50_parts = sum(p["p50"] for p in parts.values())
    floor = {
        "embed_query": parts["embed_query"],
        "prefix_scan": summary(floor_scan),
        "fts_topk": summary(floor_fts),
    }
    floor_total = {
        q: round(floor["embed_query"][q] + floor["prefix_scan"][q] + floor["fts_topk"][q], 2) for q in ("p50", "p95")
    }
    return {
        "memories": n,
        "layout": layout,
        "users": len(owners),
        "queries": len(queries),
        "start_s": round(started_s, 2),
        "first_search_ms": round(first_ms, 1),
        "first_search_other_users_wall": summary(first_user_wall) if first_user_wall else None,
        "ann_build_wait_s": ann_build_s,
        "background_builds_wait_s": builds_s,
        "ann_recall_at_10": round(sum(recall) / len(recall), 4) if recall else None,
        "rss_idle_mib": rss_idle,
        "rss_after_mib": rss_after,
        "rss_per_100k_mib": round(
            (rss_after - rss_idle) * 100_000 / max(1, min(n, len(set(picked)) * n // len(owners))), 1
        ),
        "search_cpu": summary(whole_cpu),
        "search_wall": summary(whole_wall),
        "stage_means_wall_ms": bc.stage_means(records),
        "speaker_probes": probes,
        "stages_cpu": parts,
        "after_fusion_cpu_p50": round(summary(whole_cpu)["p50"] - p50_parts, 2),
        "floor_cpu": floor,
        "floor_total_cpu": floor_total,
        "load_avg": os.getloadavg(),
    }


def _measure_in_subprocess(
    tree: Path | None, db: Path, n: int, layout: str, args: argparse.Namespace
) -> dict[str, Any]:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree / "runtime"), str(tree / "devtools"), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, __file__, "--measure", str(db), "--sizes", str(n), "--layouts", layout,
           "--queries", str(args.queries), "--per-user", str(args.per_user)]  # fmt: skip
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"measure {db} ({tree or 'this tree'}) failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _measure_server_in_subprocess(
    tree: Path | None, kind: str, servers: Servers, n: int, layout: str, args: argparse.Namespace
) -> dict[str, Any]:
    """``measure_server_store`` in a fresh process running the runtime of ``tree`` (default: this one), on
    the reused store of (kind, n, layout) on these servers."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree / "runtime"), str(tree / "devtools"), env.get("PYTHONPATH", "")])
    pids = [str(s.pid) for s in servers.started] + [str(p) for p in servers.pids]
    cmd = [sys.executable, __file__, "--measure-server", kind, "--sizes", str(n), "--layouts", layout, "--reuse",
           "--queries", str(args.queries), "--per-user", str(args.per_user), "--vocab", str(args.vocab),
           "--db", str(args.db), "--opensearch-url", str(servers.os_url), "--server-pids", ",".join(pids),
           "--opensearch-timeout", str(args.opensearch_timeout)]  # fmt: skip
    if servers.pg_dsn:
        cmd += ["--postgres-dsn", servers.pg_dsn]
    out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"measure {kind} ({tree or 'this tree'}) failed with {out.returncode}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]), runtime=str(tree or "this tree"))


API_KEY = "bench-search-key"


def _order(rnd: int, other: str | None) -> list[tuple[str, str | None]]:
    """Which runtime goes first in round ``rnd``: they take turns, so that neither always meets the
    store's file colder in the page cache (the first search of a user reads it)."""
    pair: list[tuple[str, str | None]] = [("after", None)] + ([("before", other)] if other else [])
    return pair if rnd % 2 == 0 else pair[::-1]


def cold_serve(tree: Path | None, db: Path, user: str, port: int, searches: int = 0) -> dict[str, Any]:
    """``cognis-memory serve`` started on the store at ``db`` (no worker), then one search for ``user``
    sent every 20 ms until one is answered: the wall time from the process's start to that answer (the
    interpreter, the model, the store opened, the server up, the user's indexes loaded or built).

    Then, with ``searches``, the latency of searches over HTTP as a client sees it: once the user's
    background index builds are done (20 warm-up searches, then 20 s of quiet), ``searches`` distinct
    synthetic queries one after another (keep-alive connection), wall ms from request to parsed answer."""
    import httpx

    env = dict(os.environ, COGNIS_API_KEYS=f"{API_KEY}={TENANT}", COGNIS_RUN_WORKER="false",
               COGNIS_SQLITE_PATH=str(db), COGNIS_DATA_DIR=str(db.parent), COGNIS_TELEMETRY="off")  # fmt: skip
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree / "runtime"), str(tree / "devtools"), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-c", "import sys; from cognis_memory.cli import main; sys.exit(main())",
           "serve", "--port", str(port)]  # fmt: skip
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {API_KEY}"},
                          timeout=600) as client:  # fmt: skip
            while True:
                if proc.poll() is not None:
                    raise SystemExit(f"serve exited with {proc.returncode} ({tree or 'this tree'})")
                try:
                    t1 = time.perf_counter()
                    r = client.post(f"/v1/users/{user}/search", json={"query": "what did I say about the museum?"})
                except httpx.TransportError:
                    time.sleep(0.02)
                    continue
                r.raise_for_status()
                done = time.perf_counter()
                out: dict[str, Any] = {"serve_to_first_answer_s": round(done - t0, 2), "server_up_s": round(t1 - t0, 2),
                                       "first_search_ms": round((done - t1) * 1000, 1)}  # fmt: skip
                break
            if searches:
                queries = bc.synthetic_queries(searches + 20, seed=17)
                for q in queries[:20]:
                    client.post(f"/v1/users/{user}/search", json={"query": q + " warm"}).raise_for_status()
                time.sleep(20)
                wall = []
                for q in queries[20:]:
                    w0 = time.perf_counter()
                    r = client.post(f"/v1/users/{user}/search", json={"query": q})
                    r.raise_for_status()
                    r.json()
                    wall.append((time.perf_counter() - w0) * 1000)
                out["http_search_wall"] = summary(wall)
            return out
    finally:
        proc.terminate()
        proc.wait(timeout=60)


SERVER_STORES = ("dual", "opensearch")


class Servers:
    """PostgreSQL (with pgvector) and OpenSearch for the server stores: the ones at ``--postgres-dsn`` /
    ``--opensearch-url``, or started on free ports by ``cognis_dev.local_servers`` (as the test fixtures
    start them) and stopped at the end. ``cpu_s`` is the CPU time the started servers' processes (and
    their children: PostgreSQL's backends) have used, so a search's server-side cost can be measured."""

    def __init__(self, args: argparse.Namespace, kinds: list[str]) -> None:
        self.started: list[Any] = []
        #: processes of servers this script did not start whose CPU is counted too (``--server-pids``)
        self.pids = [int(p) for p in (args.server_pids or "").split(",") if p]
        self.pg_dsn, self.os_url = args.postgres_dsn, args.opensearch_url
        self.timeout_s: float = args.opensearch_timeout
        if "dual" in kinds and not self.pg_dsn:
            from cognis_dev.local_servers import PostgresServer

            pg = PostgresServer(settings={"shared_buffers": "1GB", "maintenance_work_mem": "1GB",
                                          "effective_cache_size": "4GB"}, die_with_parent=True)  # fmt: skip
            self.started.append(pg.start())
            self.pg_dsn = pg.dsn
        if set(kinds) & set(SERVER_STORES) and not self.os_url:
            from cognis_dev.local_servers import OpenSearchServer

            osrv = OpenSearchServer(heap=args.opensearch_heap, die_with_parent=True)
            self.started.append(osrv.start())
            self.os_url = osrv.url

    def cpu_s(self) -> float:
        import psutil

        total = 0.0
        for pid in [server.pid for server in self.started] + self.pids:
            try:
                root = psutil.Process(pid)
                for p in [root, *root.children(recursive=True)]:
                    t = p.cpu_times()
                    total += t.user + t.system
            except psutil.Error:  # a backend that exited between the listing and the read
                continue
        return total

    @property
    def measures_cpu(self) -> bool:
        return bool(self.started or self.pids)

    def settings(self, kind: str, name: str) -> dict[str, Any]:
        """The service settings of a ``kind`` store called ``name``: its own PostgreSQL database (created
        unless it exists) and its own OpenSearch index prefix, so stores never share rows."""
        # the load's one refresh of 100k documents takes longer than the service's 5 s request timeout here
        out: dict[str, Any] = {"store": kind, "opensearch_url": self.os_url, "opensearch_index_prefix": name,
                               "opensearch_timeout_s": self.timeout_s}  # fmt: skip
        if kind == "dual":
            from cognis_dev.databases import create_database

            assert self.pg_dsn
            out["postgres_dsn"] = create_database(self.pg_dsn, name, if_missing=True)
        return out

    def stop(self) -> None:
        for server in reversed(self.started):
            server.stop()


def exact_recall(
    hits: list[str], ids: np.ndarray, full: np.ndarray, short: np.ndarray, q_full: np.ndarray, q_short: np.ndarray,
    shortlist: int, k: int = 10,
) -> tuple[float, float]:  # fmt: skip
    """Recall@k of ``hits`` (the ids a store's vector search returned) against two exact scans of the same
    user's loaded vectors: the store's own two stages done exactly (the top ``shortlist`` by the short
    vector, then the top k of those by the full vector), and the top k by the full vector alone."""
    import numpy as np

    s = short @ q_short
    cand = np.argpartition(-s, shortlist - 1)[:shortlist] if shortlist < len(s) else np.arange(len(s))
    two = cand[np.argsort(-(full[cand] @ q_full))[:k]]
    f = full @ q_full
    one = np.argpartition(-f, k - 1)[:k] if k < len(f) else np.arange(len(f))
    got = set(hits[:k])
    want_two, want_full = {str(i) for i in ids[two]}, {str(i) for i in ids[one]}
    return len(got & want_two) / max(1, len(want_two)), len(got & want_full) / max(1, len(want_full))


async def measure_server_store(
    kind: str, servers: Servers, n: int, layout: str, args: argparse.Namespace
) -> dict[str, Any]:
    """A ``kind`` store (dual or opensearch) loaded with the same synthetic memories as the embedded store
    of (n, layout), through the store's one-shot ``bulk_load`` (PostgreSQL: COPY then the HNSW index;
    OpenSearch: _bulk), then the same searches timed in this process: the whole search (wall, this
    process's CPU, and the servers' CPU per search), the telemetry's stage means, each stage alone, and
    recall@10 of the store's vector search against exact scans of the loaded vectors."""
    import uuid

    import numpy as np

    from cognis_memory.config import Settings
    from cognis_memory.domain import Memory, Owner
    from cognis_memory.service import MemoryService
    from cognis_memory.stores.values import SearchFilter
    from cognis_memory.wiring import build_embedder, build_store

    # --reuse: one store per (kind, size, layout) on these servers, loaded by the first run that needs it
    name = f"bench_{kind}_{layout}_{n}" if args.reuse else f"bench_{kind}_{uuid.uuid4().hex[:8]}"
    marker = Path(args.db) / f"{name}.loaded.json"
    where = {"postgres_dsn": servers.pg_dsn if kind == "dual" else None, "opensearch_url": servers.os_url}
    reused = json.loads(marker.read_text()) if args.reuse and marker.exists() else None
    if reused is not None and reused["servers"] != where:
        raise SystemExit(f"{marker} was loaded on other servers ({reused['servers']}); delete it to reload")
    settings = Settings(**servers.settings(kind, name), run_worker=False)
    embedder = build_embedder(settings)
    synth = bc.SyntheticVectors(embedder, vocab=args.vocab)
    svc = MemoryService(
        settings,
        store=build_store(settings, dim=embedder.dim, dim_short=settings.encoder.dim_short),
        embedder=embedder,
        telemetry=bc.RecordingTelemetry(),
    )
    await svc.start(run_worker=False)
    try:
        owners = owners_of(n, layout, args.per_user)
        loaded: list[Memory] = []

        async def collect(batch: list[Memory]) -> None:
            loaded.extend(batch)

        vectors: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

        def keep_vectors(u: str, mine: list[Memory]) -> None:
            vectors[u] = (np.array([m.id for m in mine]), np.stack([m.embedding for m in mine]),
                          np.stack([m.embedding_short for m in mine]))  # fmt: skip

        if reused is None:
            t0 = time.perf_counter()
            await bc.bulk_load(svc, synth, [(TENANT, u) for u in owners], n, batch=5000, insert=collect)
            await svc.stores.backend.bulk_load(loaded)
            load_s = time.perf_counter() - t0
            print(f"{kind}: loaded {n} in {load_s:.1f} s ({n / load_s:.0f} memories/s)", file=sys.stderr, flush=True)
            by_user: dict[str, list[Memory]] = {}
            for m in loaded:
                by_user.setdefault(m.user_id, []).append(m)
            loaded.clear()
            for u, mine in by_user.items():
                keep_vectors(u, mine)
            del by_user
            if args.reuse:
                marker.parent.mkdir(parents=True, exist_ok=True)
                marker.write_text(json.dumps({"servers": where, "load_s": load_s}))
        else:
            load_s = float(reused["load_s"])
            print(f"{kind}: reusing {name} (loaded in {load_s:.1f} s)", file=sys.stderr, flush=True)

        picked, queries, first_ms = await first_search(svc, owners, n, args.queries)
        for u in dict.fromkeys(picked):
            if u not in vectors:  # a reused store: the searched users' vectors as stored
                keep_vectors(u, [m async for m in svc.export(TENANT, u, include_history=False)])
        for q in queries[:3]:
            await svc.search(TENANT, picked[0], q + " warm")
        for u in dict.fromkeys(picked[1:]):
            await svc.search(TENANT, u, queries[0] + " warm")
        svc.telemetry.take()

        whole_cpu, whole_wall, answers = [], [], []
        server0 = servers.cpu_s()
        for q, u in zip(queries, picked, strict=True):
            c0, w0 = time.process_time(), time.perf_counter()
            res = await svc.search(TENANT, u, q)
            whole_wall.append((time.perf_counter() - w0) * 1000)
            whole_cpu.append((time.process_time() - c0) * 1000)
            answers.append([h.memory.id for h in res.hits])
        # the servers' CPU is only known for servers this script started (not for --postgres-dsn/--opensearch-url)
        server_ms = (servers.cpu_s() - server0) * 1000 / len(queries) if servers.measures_cpu else None
        records = svc.telemetry.take()
        stage, explained = await stages_alone(svc, queries, picked)

        cfg, enc = svc.retrieval_config, svc.encoder
        recall_two, recall_full = [], []
        for u, text, _kw in explained:
            f_rows, s_rows = enc.encode([enc.query_text(text)])
            r = await svc.stores.vectors.vector_search(
                SearchFilter(owner=Owner(TENANT, u)), f_rows[0], s_rows[0], limit=10, shortlist=cfg.shortlist
            )
            ids, full, short = vectors[u]
            two, one = exact_recall([h.memory.id for h in r.hits], ids, full, short, f_rows[0], s_rows[0],
                                    cfg.shortlist)  # fmt: skip
            recall_two.append(two)
            recall_full.append(one)
        return {
            "store": kind,
            "memories": n,
            "layout": layout,
            "users": len(owners),
            "queries": len(queries),
            "load_s": round(load_s, 1),
            "load_memories_per_s": round(n / load_s, 1),
            "first_search_ms": round(first_ms, 1),
            "search_cpu": summary(whole_cpu),
            "search_wall": summary(whole_wall),
            "server_cpu_ms_per_search": round(server_ms, 2) if server_ms is not None else None,
            "stage_means_wall_ms": bc.stage_means(records),
            "stages_cpu": {k: summary(v) for k, v in stage.items() if v},
            "shortlist": cfg.shortlist,
            "recall_at_10_vs_exact_two_stage": round(sum(recall_two) / len(recall_two), 4),
            "recall_at_10_vs_exact_full": round(sum(recall_full) / len(recall_full), 4),
            "load_avg": os.getloadavg(),
            # the ids each search returned, in order: two runtimes on one store must agree unless a change
            # is meant to alter results
            "answers": answers,
        }
    finally:
        await svc.close()


def _store_row(r: dict[str, Any]) -> list[Any]:
    """One line of the stores table: a server store's result, or the embedded store's (``measure``)."""
    s = r["stages_cpu"]
    if "store" in r:
        recall: Any = f"{r['recall_at_10_vs_exact_two_stage']} / {r['recall_at_10_vs_exact_full']}"
        load, server = r["load_memories_per_s"], r["server_cpu_ms_per_search"]
    else:  # below ann_min_memories the embedded store scans exactly: its recall is that of the exact scan
        recall = r.get("ann_recall_at_10") or "exact scan"
        load, server = r.get("load_memories_per_s", "-"), 0
    return [
        r.get("store", "embedded"), r["memories"], r["layout"], load, r["search_wall"]["p50"], r["search_wall"]["p95"],
        r["search_cpu"]["p50"], r["search_cpu"]["p95"], server, s["vector"]["p50"], s["keyword"]["p50"], recall,
        f"{r['load_avg'][0]:.1f}",
    ]  # fmt: skip


STORE_HEADERS = ["store", "memories", "layout", "load memories/s", "wall p50", "wall p95", "CPU p50", "CPU p95",
                 "server CPU ms/search", "vector CPU p50", "keyword CPU p50",
                 "recall@10 (exact two-stage / exact full)", "load"]  # fmt: skip


def _row(r: dict[str, Any]) -> list[Any]:
    s = r["stages_cpu"]
    return [
        r["memories"], r["layout"], r["search_cpu"]["p50"], r["search_cpu"]["p95"], r["search_wall"]["p50"],
        r["search_wall"]["p95"], s["embed_query"]["p50"], s["vector"]["p50"], s.get("fact_channel", {}).get("p50", "-"),
        s["keyword"]["p50"], r["after_fusion_cpu_p50"], r["speaker_probes"], r["floor_total_cpu"]["p50"],
        r["floor_cpu"]["prefix_scan"]["p50"], r["floor_cpu"]["fts_topk"]["p50"],
        round(r["search_cpu"]["p50"] / r["floor_total_cpu"]["p50"], 2), r["first_search_ms"], r["rss_idle_mib"],
        r["rss_after_mib"], r["rss_per_100k_mib"], r.get("ann_recall_at_10") or "-", f"{r['load_avg'][0]:.1f}",
    ]  # fmt: skip


HEADERS = ["memories", "layout", "CPU p50", "CPU p95", "wall p50", "wall p95", "embed", "vector", "facts", "keyword",
           "after fusion", "probes", "floor p50", "floor scan", "floor FTS", "x floor", "first search ms",
           "RSS idle", "RSS after", "RSS/100k", "ANN recall@10", "load"]  # fmt: skip


async def run(args: argparse.Namespace) -> dict[str, Any]:
    root = Path(args.db)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    layouts = [x for x in args.layouts.split(",") if x]
    out = Path(args.out)
    kinds = [k for k in args.stores.split(",") if k]
    unknown = set(kinds) - {"embedded", *SERVER_STORES}
    if unknown:
        raise SystemExit(f"--stores: unknown {sorted(unknown)}")
    rows, compare, cold, store_rows, server_compare = [], [], [], [], []
    if args.compare_with and set(kinds) & set(SERVER_STORES) and not args.reuse:
        raise SystemExit("--compare-with on server stores needs --reuse (both runtimes search the same store)")
    servers = Servers(args, kinds) if set(kinds) & set(SERVER_STORES) else None
    try:
        for n in sizes:
            for layout in layouts:
                for kind in kinds:
                    if kind == "embedded":
                        continue
                    assert servers is not None
                    if args.compare_with:
                        # the store loaded once (by this runtime), then measured by each runtime in turn
                        for rnd in range(args.rounds):
                            got = {label: _measure_server_in_subprocess(Path(tree) if tree else None, kind, servers,
                                                                        n, layout, args)
                                   for label, tree in _order(rnd, args.compare_with)}  # fmt: skip
                            server_compare.append({"round": rnd + 1, "before": got["before"], "after": got["after"]})
                            print(bc.fmt_table(["runtime", *STORE_HEADERS],
                                               [[k, *_store_row(v)] for k, v in got.items()]), file=sys.stderr, flush=True)  # fmt: skip
                        continue
                    r = await measure_server_store(kind, servers, n, layout, args)
                    store_rows.append(r)
                    print(bc.fmt_table(STORE_HEADERS, [_store_row(r)]), file=sys.stderr, flush=True)
    finally:
        if servers is not None:
            servers.stop()
    for n in sizes if "embedded" in kinds else []:
        for layout in layouts:
            db = store_path(root, n, layout, args.per_user)
            info = await build(db, n, layout, args.per_user, args.vocab)
            print(f"store {db}: {info}", file=sys.stderr)
            if args.cold_serve:
                owner = owners_of(n, layout, args.per_user)[0]
                for rnd in range(args.rounds):
                    for label, tree in _order(rnd, args.compare_with):
                        c = cold_serve(Path(tree) if tree else None, db, owner, args.port, args.http_searches)
                        c.update(round=rnd + 1, tree=label, memories=n, layout=layout, load=os.getloadavg()[0])
                        cold.append(c)
                        print(f"cold serve {label} {n} {layout}: {c}", file=sys.stderr)
                continue
            if args.compare_with:
                for rnd in range(args.rounds):
                    got = {label: _measure_in_subprocess(Path(tree) if tree else None, db, n, layout, args)
                           for label, tree in _order(rnd, args.compare_with)}  # fmt: skip
                    after, before = got["after"], got["before"]
                    compare.append({"round": rnd + 1, "before": before, "after": after})
                    print(f"round {rnd + 1} {n} {layout}: CPU p50 {before['search_cpu']['p50']} -> "
                          f"{after['search_cpu']['p50']} ms", file=sys.stderr)  # fmt: skip
            else:
                r = _measure_in_subprocess(None, db, n, layout, args)
                r["load_memories_per_s"] = info["load"]["memories_per_s"]
                rows.append(r)
                store_rows.append(r)
                print(bc.fmt_table(HEADERS, [_row(r)]), file=sys.stderr)
    payload: dict[str, Any] = {"benchmark": "search", "machine": bc.machine_info()}
    if rows:
        payload["rows"] = rows
        payload["table_markdown"] = bc.fmt_table(HEADERS, [_row(r) for r in rows])
        print(payload["table_markdown"])
    if store_rows:
        payload["stores"] = [r for r in store_rows if "store" in r]
        payload["stores_table_markdown"] = bc.fmt_table(STORE_HEADERS, [_store_row(r) for r in store_rows])
        print(payload["stores_table_markdown"])
    if cold:
        payload["cold_serve"] = cold
        payload["cold_serve_table_markdown"] = bc.fmt_table(
            ["round", "memories", "layout", "runtime", "serve to first answer s", "server up s", "first search ms",
             "HTTP search p50 ms", "HTTP search p95 ms", "load"],
            [[c["round"], c["memories"], c["layout"], c["tree"], c["serve_to_first_answer_s"], c["server_up_s"],
              c["first_search_ms"], c.get("http_search_wall", {}).get("p50", "-"),
              c.get("http_search_wall", {}).get("p95", "-"), f"{c['load']:.1f}"] for c in cold],
        )  # fmt: skip
        print(payload["cold_serve_table_markdown"])
    if server_compare:
        for c in server_compare:
            pairs = list(zip(c["before"]["answers"], c["after"]["answers"], strict=True))
            c["same_answers"] = sum(a == b for a, b in pairs)
            print(f"round {c['round']}: {c['same_answers']} of {len(pairs)} searches returned the same ids in the "
                  "same order before and after", file=sys.stderr)  # fmt: skip
        payload["server_compare"] = server_compare
        payload["server_compare_table_markdown"] = bc.fmt_table(
            ["round", "runtime", *STORE_HEADERS],
            [[c["round"], label, *_store_row(c[label])] for c in server_compare for label in ("before", "after")],
        )
        print(payload["server_compare_table_markdown"])
    if compare:
        table = bc.fmt_table(
            ["round", "memories", "layout", "before CPU p50", "after", "ratio", "before CPU p95", "after", "ratio",
             "before wall p95", "after", "ratio", "before keyword", "after", "before vector", "after",
             "before RSS/100k", "after", "before first search ms", "after", "load"],
            [[c["round"], c["after"]["memories"], c["after"]["layout"],
              c["before"]["search_cpu"]["p50"], c["after"]["search_cpu"]["p50"],
              round(c["after"]["search_cpu"]["p50"] / c["before"]["search_cpu"]["p50"], 2),
              c["before"]["search_cpu"]["p95"], c["after"]["search_cpu"]["p95"],
              round(c["after"]["search_cpu"]["p95"] / c["before"]["search_cpu"]["p95"], 2),
              c["before"]["search_wall"]["p95"], c["after"]["search_wall"]["p95"],
              round(c["after"]["search_wall"]["p95"] / c["before"]["search_wall"]["p95"], 2),
              c["before"]["stages_cpu"]["keyword"]["p50"], c["after"]["stages_cpu"]["keyword"]["p50"],
              c["before"]["stages_cpu"]["vector"]["p50"], c["after"]["stages_cpu"]["vector"]["p50"],
              c["before"]["rss_per_100k_mib"], c["after"]["rss_per_100k_mib"],
              c["before"]["first_search_ms"], c["after"]["first_search_ms"], f"{c['after']['load_avg'][0]:.1f}"]
             for c in compare],
        )  # fmt: skip
        payload["compare"] = compare
        payload["compare_table_markdown"] = table
        print(table)
    bc.write_json(out / "search.json", payload)
    return {
        "out": str(out / "search.json"),
        "rows": len(rows),
        "store_rows": len(store_rows),
        "compared": len(compare),
        "cold_serve": len(cold),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="10000,100000", help="memories per store (default: %(default)s)")
    p.add_argument("--layouts", default="one_user,many_users", help="one_user and/or many_users")
    p.add_argument("--per-user", type=int, default=1000, help="memories per user in the many-users layout")
    p.add_argument("--queries", type=int, default=200, help="searches per store")
    p.add_argument("--vocab", type=int, default=3000, help="distinct synthetic sentences embedded for the load")
    p.add_argument("--db", default=str(bc.REPO / "bench-results" / "search-stores"), help="where the stores are kept")
    p.add_argument("--compare-with", default=None, metavar="TREE", help="another checkout: measure its runtime too")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds with --compare-with")
    p.add_argument(
        "--cold-serve",
        action="store_true",
        help="only the cold start of `serve`: from its start to the first answered search (HTTP)",
    )
    p.add_argument("--port", type=int, default=18731, help="port of --cold-serve's server")
    p.add_argument(
        "--http-searches",
        type=int,
        default=0,
        help="with --cold-serve: then this many searches over HTTP, one after another (latency p50/p95)",
    )
    p.add_argument(
        "--stores",
        default="embedded",
        help="embedded, dual and/or opensearch; the server stores are loaded in this run, on the servers below",
    )
    p.add_argument("--postgres-dsn", help="the dual store's PostgreSQL (default: one started on a free port)")
    p.add_argument("--opensearch-url", help="the server stores' OpenSearch (default: one started on a free port)")
    p.add_argument("--opensearch-heap", default="2g", help="heap of the started OpenSearch")
    p.add_argument(
        "--opensearch-timeout",
        type=float,
        default=300.0,
        help="OpenSearch request timeout of the server stores, s (the bulk load's refresh needs more than 5)",
    )
    p.add_argument(
        "--reuse",
        action="store_true",
        help="keep each server store (named by kind, layout and size) and reuse it in later runs on the same "
        "servers (a marker file under --db says it is loaded); use with --postgres-dsn/--opensearch-url",
    )
    p.add_argument("--server-pids", default="", help="pids of the given servers, to count their CPU per search")
    p.add_argument("--measure", default=None, metavar="DB", help=argparse.SUPPRESS)
    p.add_argument("--measure-server", default=None, metavar="KIND", help=argparse.SUPPRESS)
    p.add_argument("--out", default=str(bc.REPO / "bench-results"))
    args = p.parse_args(argv)
    if args.measure_server:
        servers = Servers(args, [args.measure_server])
        result = asyncio.run(measure_server_store(args.measure_server, servers, int(args.sizes), args.layouts, args))
        print(json.dumps(result, default=str))
        return 0
    if args.measure:
        result = asyncio.run(measure(Path(args.measure), int(args.sizes), args.layouts, args))
        print(json.dumps(result, default=str))
        return 0
    print(json.dumps(asyncio.run(run(args)), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
