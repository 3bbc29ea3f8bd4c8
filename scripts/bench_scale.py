"""Latency and memory against store size: 1k, 10k, 100k, 1M memories over many users.

For each size (``--sizes``) a fresh store is loaded with synthetic conversations spread
over ``size / --per-user`` users (deterministic, seeded; vectors from a limited vocabulary
of real all-MiniLM-L6-v2 embeddings, see ``bench_common.SyntheticVectors``), then:

* search p50/p95/p99 of ``--queries`` searches for random users, in-process and over HTTP
  (a real uvicorn server on 127.0.0.1 serving the project's FastAPI app), with the mean
  per-stage breakdown from the request telemetry;
* ingest: the bulk load rate through the store API (records, FTS rows, vector blobs), and
  ``--ingest-messages`` real messages through ``add_messages`` in batches of 128 (real
  embeddings), i.e. what ``cognis-memory import`` does;
* resident memory (psutil RSS) after the searches, the SQLite file size, and RSS per 100k.

``--prefix-study N`` instead measures the two-stage vector search on N memories of ONE
user: overlap of the two-stage top 10 with the exact full-vector top 10 and the time of
both, for several prefix sizes, with and without a variance rotation (fitted with
``fit_variance_rotation`` on a held-out sample). It uses the embedded store's own
``UserVectorIndex`` (the code the store searches with).

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/bench_scale.py --sizes 1000,10000,100000
    HF_HUB_OFFLINE=1 .venv/bin/python scripts/bench_scale.py --sizes '' --prefix-study 100000

Only the embedded store is measured here (``--stores embedded``); the production stores are
benchmarked by their own scripts. The last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import bench_latency as bl
from cognis_dev import bench_common as bc

TENANT = bl.TENANT


async def run_size(n: int, embedder: Any, synth: bc.SyntheticVectors, args: argparse.Namespace) -> dict[str, Any]:
    from cognis_memory.api.app import create_app

    tmp = tempfile.mkdtemp(prefix="bench-scale-")
    try:
        db = Path(tmp) / "memory.db"
        rss0 = bc.rss_mib()
        svc = bl.build_service(db, embedder, args)
        await svc.start(run_worker=False)
        users = max(1, n // args.per_user)
        owners = [f"u{i:06d}" for i in range(users)]
        load = await bc.bulk_load(svc, synth, [(TENANT, u) for u in owners], n, batch=5000)
        rng = random.Random(n)
        picked = [rng.choice(owners) for _ in range(args.queries)]
        queries = bc.synthetic_queries(args.queries, seed=5 + n)
        assert isinstance(svc.telemetry, bc.RecordingTelemetry)
        for q, u in list(zip(queries, picked, strict=True))[:3]:
            await svc.search(TENANT, u, q)
        svc.telemetry.take()
        lat = []
        for q, u in zip(queries, picked, strict=True):
            t0 = time.perf_counter()
            await svc.search(TENANT, u, q)
            lat.append((time.perf_counter() - t0) * 1000)
        row: dict[str, Any] = {
            "memories": n,
            "users": users,
            "store": "embedded",
            "load": load,
            "search_inprocess": {**bc.latency_summary(lat), "stage_means_ms": bc.stage_means(svc.telemetry.take())},
        }
        with bc.UvicornThread(create_app(svc, manage_lifecycle=False)) as server:
            row["search_http"] = await asyncio.to_thread(_http_searches, server.url, picked, queries)
        if args.ingest_messages:
            texts = bc.synthetic_sentences(args.ingest_messages, seed=123 + n)
            row["bulk_import"] = await bl.bulk_import(svc, "import-user", texts)
        rss = bc.rss_mib()
        row["rss_mib"] = rss
        row["rss_mib_delta"] = round(rss - rss0, 1)
        row["rss_mib_per_100k"] = round((rss - rss0) * 100_000 / n, 1)
        row["sqlite_mib"] = round(sum(p.stat().st_size for p in Path(tmp).glob("memory.db*")) / 2**20, 1)
        await svc.close()
        return row
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _http_searches(url: str, users: list[str], queries: list[str]) -> dict[str, Any]:
    import httpx

    lat = []
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {bl.API_KEY}"}, timeout=60) as client:
        for q, u in list(zip(queries, users, strict=True))[:3]:
            client.post(f"/v1/users/{u}/search", json={"query": q}).raise_for_status()
        for q, u in zip(queries, users, strict=True):
            t0 = time.perf_counter()
            client.post(f"/v1/users/{u}/search", json={"query": q}).raise_for_status()
            lat.append((time.perf_counter() - t0) * 1000)
    return bc.latency_summary(lat)


def prefix_study(n: int, embedder: Any, synth: bc.SyntheticVectors, args: argparse.Namespace) -> dict[str, Any]:
    """Two-stage vs exact vector search on one user's N memories, per prefix size, +/- rotation."""
    import numpy as np

    from cognis_memory.domain import Owner
    from cognis_memory.encoding.encoder import MatryoshkaEncoder, fit_variance_rotation
    from cognis_memory.stores.numpy_index import UserVectorIndex
    from cognis_memory.stores.values import SearchFilter

    _, raw = synth.batch(0, n)
    # rotation fitted on a held-out sample: other mixtures of the vocabulary than the ones searched
    _, sample = synth.batch(10 * n + 1, min(20_000, n))
    rotation = fit_variance_rotation(sample)
    queries = bc.synthetic_queries(args.queries, seed=3)
    qraw = embedder.embed(queries)
    flt = SearchFilter(owner=Owner(TENANT, "u"))
    sizes = [int(s) for s in args.prefix_sizes.split(",")]
    dim = raw.shape[1]
    results = []
    exact_cache: dict[bool, list[set[str]]] = {}
    for rotated in (False, True):
        enc_full = MatryoshkaEncoder(embedder, dim_short=dim, rotation=rotation if rotated else None)
        full, _ = enc_full.split(raw)
        qfull, _ = enc_full.split(qraw)
        for d in sizes:
            enc = MatryoshkaEncoder(embedder, dim_short=d, rotation=rotation if rotated else None)
            _, short = enc.split(raw)
            _, qshort = enc.split(qraw)
            idx = UserVectorIndex.of_vectors([f"m{i}" for i in range(n)], full, short)
            if rotated not in exact_cache:
                exact, t_exact = [], []
                for qv in qfull:
                    t0 = time.perf_counter()
                    pairs, _, _ = idx.search(flt, qv, None, 10, args.shortlist)
                    t_exact.append((time.perf_counter() - t0) * 1000)
                    exact.append({p[0] for p in pairs})
                exact_cache[rotated] = exact
                results.append({"rotation": rotated, "prefix": dim, "mode": "full", "overlap@10": 1.0,
                                **bc.latency_summary(t_exact)})  # fmt: skip
            overlaps, t_two = [], []
            for qv, qs, ex in zip(qfull, qshort, exact_cache[rotated], strict=True):
                t0 = time.perf_counter()
                pairs, _, _ = idx.search(flt, qv, qs, 10, args.shortlist)
                t_two.append((time.perf_counter() - t0) * 1000)
                overlaps.append(len(ex & {p[0] for p in pairs}) / 10)
            results.append({"rotation": rotated, "prefix": d, "mode": "two_stage", "overlap@10": round(float(np.mean(overlaps)), 4),
                            **bc.latency_summary(t_two)})  # fmt: skip
            print(f"  rotation={rotated!s:5} prefix {d:4d}: overlap@10 {results[-1]['overlap@10']:.3f} "
                  f"p50 {results[-1]['p50_ms']:.2f} ms", file=sys.stderr)  # fmt: skip
    return {"memories": n, "shortlist": args.shortlist, "queries": len(queries), "rows": results}


def plot(rows: list[dict[str, Any]], out: Path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = [r["memories"] for r in rows]
    for key, label in (("search_inprocess", "in-process"), ("search_http", "HTTP")):
        for pct, style in (("p50_ms", "-"), ("p95_ms", "--"), ("p99_ms", ":")):
            ax.plot(xs, [r[key][pct] for r in rows], style, marker="o", label=f"{label} {pct.removesuffix('_ms')}")
    ax.set_xscale("log")
    ax.set_xlabel("memories in the store (many users)")
    ax.set_ylabel("search latency, ms")
    ax.set_title("Embedded store: search latency against size")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    p = out / "scale_latency.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return str(p)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from cognis_memory.providers.sentence_transformers_embedder import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder()
    synth = bc.SyntheticVectors(embedder, vocab=args.vocab)
    out = Path(args.out)
    summary: dict[str, Any] = {}
    if args.prefix_study:
        study = prefix_study(args.prefix_study, embedder, synth, args)
        table = bc.fmt_table(
            ["rotation", "prefix", "mode", "overlap@10 with exact", "p50 ms", "p95 ms"],
            [[r["rotation"], r["prefix"], r["mode"], r["overlap@10"], r["p50_ms"], r["p95_ms"]] for r in study["rows"]],
        )
        print(table)
        bc.write_json(out / "prefix_study.json", {**study, "machine": bc.machine_info(), "table_markdown": table})
        summary.update(prefix_study=study["rows"], prefix_study_out=str(out / "prefix_study.json"))
    if not args.sizes:
        return summary
    stores = [s.strip() for s in args.stores.split(",")]
    if stores != ["embedded"]:
        raise SystemExit("--stores: only 'embedded' is measured by this script")
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        row = await run_size(n, embedder, synth, args)
        rows.append(row)
        s, h = row["search_inprocess"], row["search_http"]
        print(
            f"{n:>8} memories / {row['users']} users: load {row['load']['memories_per_s']}/s, search p50 "
            f"{s['p50_ms']:.1f} p95 {s['p95_ms']:.1f} p99 {s['p99_ms']:.1f} | http p95 {h['p95_ms']:.1f} ms | "
            f"RSS {row['rss_mib']} MiB",
            file=sys.stderr,
        )
    table = bc.fmt_table(
        ["memories", "users", "load /s", "in-proc p50", "p95", "p99", "HTTP p50", "p95", "p99", "import msg/s",
         "RSS MiB", "RSS/100k", "SQLite MiB"],
        [[r["memories"], r["users"], r["load"]["memories_per_s"], r["search_inprocess"]["p50_ms"],
          r["search_inprocess"]["p95_ms"], r["search_inprocess"]["p99_ms"], r["search_http"]["p50_ms"],
          r["search_http"]["p95_ms"], r["search_http"]["p99_ms"],
          r.get("bulk_import", {}).get("messages_per_s", "-"), r["rss_mib"], r["rss_mib_per_100k"], r["sqlite_mib"]]
         for r in rows],
    )  # fmt: skip
    print(table)
    out.mkdir(parents=True, exist_ok=True)
    png = plot(rows, out) if rows and not args.no_plot else None
    bc.write_json(
        out / "scale.json", {"benchmark": "scale", "machine": bc.machine_info(), "rows": rows, "table_markdown": table}
    )
    return summary | {
        "search_p50_ms": {str(r["memories"]): r["search_inprocess"]["p50_ms"] for r in rows},
        "search_p95_ms": {str(r["memories"]): r["search_inprocess"]["p95_ms"] for r in rows},
        "search_p99_ms": {str(r["memories"]): r["search_inprocess"]["p99_ms"] for r in rows},
        "http_search_p95_ms": {str(r["memories"]): r["search_http"]["p95_ms"] for r in rows},
        "ingest_messages_per_s": {str(r["memories"]): r.get("bulk_import", {}).get("messages_per_s") for r in rows},
        "rss_mib": {str(r["memories"]): r["rss_mib"] for r in rows},
        "out": str(out / "scale.json"),
        "plot": png,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--sizes", default="1000,10000,100000,1000000", help="memories per configuration (default: %(default)s)"
    )
    p.add_argument("--per-user", type=int, default=1000, help="memories per user (users = size / per-user)")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--ingest-messages", type=int, default=256, help="real messages imported per size (0 = skip)")
    p.add_argument("--stores", default="embedded")
    p.add_argument("--vocab", type=int, default=3000)
    p.add_argument("--recipe", default="default")
    p.add_argument(
        "--torch-threads", type=int, default=0, help="override torch and BLAS threads (0: the encoder's choice, 1)"
    )
    p.add_argument("--dim-short", type=int, default=None)
    p.add_argument("--rotation", default=None)
    p.add_argument(
        "--prefix-study",
        type=int,
        default=0,
        metavar="N",
        help="also run the two-stage prefix study on N memories of one user (--sizes '' for the study only)",
    )
    p.add_argument("--prefix-sizes", default="32,64,96,128,192")
    p.add_argument("--shortlist", type=int, default=200)
    p.add_argument("--no-plot", action="store_true")
    p.add_argument("--out", default=str(bc.REPO / "bench-results"))
    args = p.parse_args(argv)
    print(json.dumps(asyncio.run(run(args)), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
