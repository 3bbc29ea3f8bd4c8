"""Search and ingest latency (issue #2): p50/p95/p99 in-process and over HTTP.

The embedder is the configured one (``COGNIS_EMBEDDER``, default the ONNX int8 model; set
``COGNIS_EMBEDDER=sentence-transformers`` for torch). scripts/bench_embedding.py compares them.

For each size N (``--sizes``, default 10000,100000) a fresh embedded store is loaded with N
synthetic memories of ONE user, and again with N memories spread over ``--users`` users;
then ``--queries`` searches (the service's default recipe, real all-MiniLM-L6-v2 query
embeddings, no cache, no cross-encoder) run one at a time in-process and over HTTP (a real
uvicorn server on 127.0.0.1 serving the project's FastAPI app). Ingest is measured on the
same service: single-message ``add_messages`` calls (in-process and HTTP) and a bulk import
of ``--ingest-messages`` messages through ``add_messages`` in batches of 128, as
``cognis-memory import`` does (real embeddings).

Loading the N memories uses the store API with vectors of a limited synthetic vocabulary
(see ``bench_common.SyntheticVectors``): the load is setup, not what is measured.

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/bench_latency.py
    HF_HUB_OFFLINE=1 .venv/bin/python scripts/bench_latency.py --sizes 500 --queries 10 --ingest-messages 64

Targets on a 2-core machine: search p95 <= 50 ms at 10k memories of one user, <= 150 ms at
100k; bulk import >= 150 messages/s. The last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cognis_dev import bench_common as bc

from cognis_memory.config import Settings
from cognis_memory.service import MemoryService, MessageBody

TENANT = "bench"
API_KEY = "bench-latency-key"
IMPORT_BATCH = 128  # as cognis-memory import
TARGETS = {10_000: 50.0, 100_000: 150.0}
INGEST_TARGET = 150.0


def build_service(db: Path, embedder: Any, args: argparse.Namespace) -> MemoryService:
    from cognis_memory.wiring import build_store

    overrides: dict[str, Any] = {
        "data_dir": db.parent, "sqlite_path": db, "run_worker": False, "api_keys": f"{API_KEY}={TENANT}",
        "recipe": args.recipe,
    }  # fmt: skip
    if args.dim_short:
        overrides["embedding_dim_short"] = args.dim_short
    if args.rotation:
        if not bc.has_setting("embedding_rotation_path"):
            raise SystemExit("--rotation: this runtime has no embedding_rotation_path setting")
        overrides["embedding_rotation_path"] = args.rotation
    settings = Settings(**overrides)
    svc = MemoryService(
        settings,
        store=build_store(settings, dim=embedder.dim, dim_short=bc.setting(settings, "embedding_dim_short")),
        embedder=embedder,
        telemetry=bc.RecordingTelemetry(),
    )
    if getattr(args, "torch_threads", 0):  # override what the encoder chose (for before/after figures)
        from cognis_memory.encoding.encoder import limit_cpu_threads

        limit_cpu_threads(args.torch_threads)
    return svc


async def search_inprocess(svc: MemoryService, owners: list[str], queries: list[str]) -> dict[str, Any]:
    assert isinstance(svc.telemetry, bc.RecordingTelemetry)
    for q in queries[:3]:  # warm-up: load the user's vector index, JIT paths, model
        await svc.search(TENANT, owners[0], q)
    svc.telemetry.take()
    lat, cpu = [], []
    for i, q in enumerate(queries):
        c0, t0 = time.process_time(), time.perf_counter()
        await svc.search(TENANT, owners[i % len(owners)], q)
        lat.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    # CPU milliseconds the process spent per search (all its threads): the work a search needs,
    # independent of how much of the shared machine other processes took meanwhile.
    return {**bc.latency_summary(lat), **bc.latency_summary(cpu, prefix="cpu_"),
            "stage_means_ms": bc.stage_means(svc.telemetry.take())}  # fmt: skip


def search_http(url: str, owners: list[str], queries: list[str]) -> dict[str, Any]:
    import httpx

    lat = []
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=60) as client:
        for q in queries[:3]:
            client.post(f"/v1/users/{owners[0]}/search", json={"query": q}).raise_for_status()
        for i, q in enumerate(queries):
            t0 = time.perf_counter()
            r = client.post(f"/v1/users/{owners[i % len(owners)]}/search", json={"query": q})
            lat.append((time.perf_counter() - t0) * 1000)
            r.raise_for_status()
    return bc.latency_summary(lat)


def ingest_http(url: str, user: str, texts: list[str]) -> dict[str, Any]:
    import httpx

    lat = []
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=60) as client:
        for i, t in enumerate(texts):
            t0 = time.perf_counter()
            r = client.post(
                f"/v1/users/{user}/messages",
                json={"messages": [{"content": t, "speaker": t.split(":")[0], "client_message_id": f"h{i}"}]},
            )
            lat.append((time.perf_counter() - t0) * 1000)
            r.raise_for_status()
    return bc.latency_summary(lat)


async def ingest_single(svc: MemoryService, user: str, texts: list[str]) -> dict[str, Any]:
    lat = []
    for i, t in enumerate(texts):
        t0 = time.perf_counter()
        await svc.add_messages(
            TENANT, user, [MessageBody(content=t, speaker=t.split(":")[0], client_message_id=f"p{i}")]
        )
        lat.append((time.perf_counter() - t0) * 1000)
    return bc.latency_summary(lat)


async def bulk_import(svc: MemoryService, user: str, texts: list[str]) -> dict[str, Any]:
    """Messages through add_messages in batches of 128 (background mode, as the CLI import)."""
    c0, t0 = time.process_time(), time.perf_counter()
    per_batch = []
    for i in range(0, len(texts), IMPORT_BATCH):
        chunk = texts[i : i + IMPORT_BATCH]
        tb = time.perf_counter()
        await svc.add_messages(
            TENANT,
            user,
            [MessageBody(content=t, speaker=t.split(":")[0], session_id=f"import{i // 40}", client_message_id=f"b{i + j}")
             for j, t in enumerate(chunk)],
            background=True,
        )  # fmt: skip
        per_batch.append((time.perf_counter() - tb) * 1000)
    seconds = time.perf_counter() - t0
    cpu_s = time.process_time() - c0
    return {
        "messages": len(texts),
        "seconds": round(seconds, 2),
        "messages_per_s": round(len(texts) / seconds, 1),
        "messages_per_cpu_s": round(len(texts) / cpu_s, 1) if cpu_s > 0 else None,
        **bc.latency_summary(per_batch, prefix="batch_"),
    }


async def run_size(
    n: int, layout: str, embedder: Any, synth: bc.SyntheticVectors, args: argparse.Namespace
) -> dict[str, Any]:
    from cognis_memory.api.app import create_app

    tmp = tempfile.mkdtemp(prefix="bench-latency-")
    try:
        svc = build_service(Path(tmp) / "memory.db", embedder, args)
        await svc.start(run_worker=False)
        users = 1 if layout == "one_user" else max(1, min(args.users, n))
        owners = [f"u{i:05d}" for i in range(users)]
        load = await bc.bulk_load(svc, synth, [(TENANT, u) for u in owners], n)
        queries = bc.synthetic_queries(args.queries, seed=11 + n)
        row: dict[str, Any] = {"memories": n, "layout": layout, "users": users, "load": load}
        row["search_inprocess"] = await search_inprocess(svc, owners, queries)
        row["rss_mib_after_search"] = bc.rss_mib()
        with bc.UvicornThread(create_app(svc, manage_lifecycle=False)) as server:
            row["search_http"] = await asyncio.to_thread(search_http, server.url, owners, queries)
            if layout == "one_user" and args.ingest_messages:
                texts = bc.synthetic_sentences(args.ingest_messages + 2 * args.single_messages, seed=99 + n)
                singles, bulk = texts[: 2 * args.single_messages], texts[2 * args.single_messages :]
                row["ingest_single_inprocess"] = await ingest_single(
                    svc, "ingest-user", singles[: args.single_messages]
                )
                row["ingest_single_http"] = await asyncio.to_thread(
                    ingest_http, server.url, "ingest-user-http", singles[args.single_messages :]
                )
                row["bulk_import"] = await bulk_import(svc, "import-user", bulk)
        await svc.close()
        return row
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _torch_threads() -> int | None:
    torch = sys.modules.get("torch")
    return int(torch.get_num_threads()) if torch is not None else None


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from cognis_memory.wiring import build_embedder

    embedder = build_embedder(Settings())  # the configured embedder (COGNIS_EMBEDDER; default: ONNX int8)
    synth = bc.SyntheticVectors(embedder, vocab=args.vocab)
    sizes = [int(s) for s in args.sizes.split(",")]
    layouts = ["one_user"] + ([] if args.users <= 1 else ["many_users"])
    rows = []
    for n in sizes:
        for layout in layouts:
            row = await run_size(n, layout, embedder, synth, args)
            rows.append(row)
            s, h = row["search_inprocess"], row["search_http"]
            print(
                f"{n:>8} {layout:10s} search in-process p50 {s['p50_ms']:.1f} p95 {s['p95_ms']:.1f} "
                f"p99 {s['p99_ms']:.1f} | http p50 {h['p50_ms']:.1f} p95 {h['p95_ms']:.1f} p99 {h['p99_ms']:.1f} ms"
                + (f" | bulk import {row['bulk_import']['messages_per_s']} msg/s" if "bulk_import" in row else ""),
                file=sys.stderr,
            )
    headers = [
        "memories",
        "layout",
        "in-proc p50",
        "p95",
        "p99",
        "CPU ms p50",
        "p95",
        "HTTP p50",
        "p95",
        "p99",
        "target p95",
        "RSS MiB",
    ]
    table_rows = []
    for r in rows:
        s, h = r["search_inprocess"], r["search_http"]
        target = TARGETS.get(r["memories"]) if r["layout"] == "one_user" else None
        table_rows.append(
            [r["memories"], r["layout"], s["p50_ms"], s["p95_ms"], s["p99_ms"], s["cpu_p50_ms"], s["cpu_p95_ms"],
             h["p50_ms"], h["p95_ms"], h["p99_ms"],
             f"<= {target:.0f} ms: {'met' if s['p95_ms'] <= target else 'MISSED'}" if target else "-", r["rss_mib_after_search"]]
        )  # fmt: skip
    table = bc.fmt_table(headers, table_rows)
    ingest_rows = []
    for r in rows:
        if "bulk_import" in r:
            si, sh, b = r["ingest_single_inprocess"], r["ingest_single_http"], r["bulk_import"]
            ingest_rows.append(
                [r["memories"], si["p50_ms"], si["p95_ms"], si["p99_ms"], sh["p50_ms"], sh["p95_ms"], sh["p99_ms"],
                 b["messages_per_s"], b["messages_per_cpu_s"], "met" if b["messages_per_s"] >= INGEST_TARGET else "MISSED"]
            )  # fmt: skip
    ingest_table = bc.fmt_table(
        [
            "store size",
            "add 1 msg in-proc p50",
            "p95",
            "p99",
            "HTTP p50",
            "p95",
            "p99",
            "bulk msg/s",
            "msg per CPU-s",
            ">= 150/s",
        ],
        ingest_rows,
    )
    print(table)
    print(ingest_table)
    out = Path(args.out)
    payload = {
        "benchmark": "latency",
        "recipe": args.recipe,
        "torch_threads": _torch_threads(),
        "machine": bc.machine_info(),
        "rows": rows,
        "table_markdown": table,
        "ingest_table_markdown": ingest_table,
    }
    bc.write_json(out / "latency.json", payload)
    one = [r for r in rows if r["layout"] == "one_user"]
    bulk = [r["bulk_import"]["messages_per_s"] for r in rows if "bulk_import" in r]
    return {
        "search_p50_ms": {str(r["memories"]): r["search_inprocess"]["p50_ms"] for r in one},
        "search_p95_ms": {str(r["memories"]): r["search_inprocess"]["p95_ms"] for r in one},
        "search_p99_ms": {str(r["memories"]): r["search_inprocess"]["p99_ms"] for r in one},
        "search_cpu_p95_ms": {str(r["memories"]): r["search_inprocess"]["cpu_p95_ms"] for r in one},
        "http_search_p95_ms": {str(r["memories"]): r["search_http"]["p95_ms"] for r in one},
        "many_users_search_p95_ms": {str(r["memories"]): r["search_inprocess"]["p95_ms"] for r in rows if r["layout"] != "one_user"},
        "ingest_p95_ms": {str(r["memories"]): r["ingest_single_inprocess"]["p95_ms"] for r in rows if "ingest_single_inprocess" in r},
        "bulk_import_messages_per_s": min(bulk) if bulk else None,
        "bulk_import_messages_per_cpu_s": min(r["bulk_import"]["messages_per_cpu_s"] or 0 for r in rows if "bulk_import" in r)
        if bulk else None,
        "torch_threads": _torch_threads(),
        "targets": {"search_p95_ms": {str(k): v for k, v in TARGETS.items()}, "bulk_import_messages_per_s": INGEST_TARGET},
        "out": str(out / "latency.json"),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="10000,100000", help="memories per configuration (default: %(default)s)")
    p.add_argument("--users", type=int, default=100, help="users of the many-users layout (1 = skip it)")
    p.add_argument("--queries", type=int, default=200, help="searches per configuration")
    p.add_argument("--ingest-messages", type=int, default=1024, help="messages of the bulk import (0 = skip ingest)")
    p.add_argument("--single-messages", type=int, default=50, help="single-message add calls (in-process and HTTP)")
    p.add_argument("--vocab", type=int, default=3000, help="distinct synthetic sentences embedded for the load")
    p.add_argument("--recipe", default="default")
    p.add_argument(
        "--torch-threads", type=int, default=0, help="override torch and BLAS threads (0: the encoder's choice, 1)"
    )
    p.add_argument("--dim-short", type=int, default=None)
    p.add_argument("--rotation", default=None)
    p.add_argument("--out", default=str(bc.REPO / "bench-results"))
    args = p.parse_args(argv)
    print(json.dumps(asyncio.run(run(args)), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
