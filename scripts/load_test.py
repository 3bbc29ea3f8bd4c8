"""Bounded load test of the HTTP API on 127.0.0.1 (embedded and dual stores).

    .venv/bin/python scripts/load_test.py                         # both stores, 50 clients, 120 s each
    .venv/bin/python scripts/load_test.py --store embedded --clients 5 --duration 10
    .venv/bin/python scripts/load_test.py --store dual --json /tmp/load-dual.json

For each store it starts what it needs on 127.0.0.1 (PostgreSQL + pgvector and OpenSearch via
``cognis_dev.local_servers`` for ``dual``, unless ``--postgres-dsn``/``--opensearch-url`` are given),
then ``cognis-memory serve`` as a subprocess with its own data directory, seeds ``--users``
users, and runs ``--clients`` concurrent clients for ``--duration`` seconds: each request is a
search (``--search-ratio``, default 80 %) or an add of one message with a unique
client_message_id (the rest). Afterwards every user's memories are listed through the API and
checked: every acknowledged message is there exactly once, nothing unacknowledged is doubled.

Prints a table (count, errors, p50/p95/p99/max latency per operation, throughput) and exits 1
when there was any error, lost write or duplicate. Nothing here listens on anything but
127.0.0.1, and every process it starts is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from cognis_dev.bench_common import percentile
from cognis_dev.processes import ServeProcess

KEY, TENANT = "load-test-key-0123456789", "load"
WORDS = (
    "coffee berlin guitar marathon sister python allergy salary lisbon tea dog promotion japan vegan piano "
    "garden chess hiking bread camera violin sailing pottery cinema football yoga kayak tango poetry"
).split()
CMID = re.compile(r"ld-\d+-\d+")


# -- the load ---------------------------------------------------------------------------------------
@dataclass
class Stats:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: Counter[str] = field(default_factory=Counter)
    error_samples: list[str] = field(default_factory=list)
    acked: dict[str, str] = field(default_factory=dict)  # cmid -> user
    attempted: dict[str, str] = field(default_factory=dict)

    def error(self, op: str, what: str) -> None:
        self.errors[op] += 1
        if len(self.error_samples) < 10:
            self.error_samples.append(f"{op}: {what}")


def user_of(i: int) -> str:
    return f"user-{i:03d}"


def sentence(rng: random.Random, tag: str) -> str:
    return f"I talked about {' and '.join(rng.sample(WORDS, 3))} today ({tag})"


async def seed(client: httpx.AsyncClient, users: int, per_user: int) -> None:
    rng = random.Random(7)
    for u in range(users):
        msgs = [{"content": sentence(rng, f"seed-{u}-{i}"), "speaker": "Sam"} for i in range(per_user)]
        r = await client.post(f"/v1/users/{user_of(u)}/messages", json={"messages": msgs})
        r.raise_for_status()


async def run_client(
    n: int, client: httpx.AsyncClient, args: argparse.Namespace, deadline: float, stats: Stats
) -> None:
    rng = random.Random(1000 + n)
    seq = 0
    while time.monotonic() < deadline:
        user = user_of(rng.randrange(args.users))
        if rng.random() < args.search_ratio:
            op = "search"
            body: dict[str, Any] = {"query": f"what about {' '.join(rng.sample(WORDS, 2))}", "limit": 10}
            path = f"/v1/users/{user}/search"
        else:
            op = "add"
            cmid = f"ld-{n}-{seq}"
            seq += 1
            body = {"messages": [{"content": sentence(rng, cmid), "speaker": "Sam", "client_message_id": cmid}]}
            path = f"/v1/users/{user}/messages"
            stats.attempted[cmid] = user
        t0 = time.perf_counter()
        try:
            r = await client.post(path, json=body)
        except httpx.HTTPError as e:
            stats.error(op, f"{type(e).__name__}: {e}")
            continue
        stats.latencies[op].append((time.perf_counter() - t0) * 1000)
        if r.status_code >= 300:
            stats.error(op, f"{r.status_code} {r.text[:200]}")
            continue
        if op == "add":
            stats.acked[cmid] = user


async def verify(client: httpx.AsyncClient, users: int, stats: Stats) -> dict[str, Any]:
    """Every acknowledged add exactly once; nothing attempted twice."""
    seen: Counter[str] = Counter()
    for u in range(users):
        cursor = None
        while True:
            params: dict[str, Any] = {"include_history": "true", "limit": 1000}
            if cursor:
                params["cursor"] = cursor
            r = await client.get(f"/v1/users/{user_of(u)}/memories", params=params)
            r.raise_for_status()
            page = r.json()
            for m in page["memories"]:
                if m["kind"] == "raw" and (hit := CMID.search(m["content"])):
                    seen[hit.group()] += 1
            if not page["next_cursor"]:
                break
            cursor = page["next_cursor"]
    lost = sorted(c for c in stats.acked if seen[c] == 0)
    duplicated = sorted(c for c, k in seen.items() if k > 1)
    unknown = sorted(c for c in seen if c not in stats.attempted)
    return {"acknowledged": len(stats.acked), "found": sum(seen.values()), "lost": lost, "duplicated": duplicated,
            "unknown": unknown}  # fmt: skip


def summarise(store: str, args: argparse.Namespace, stats: Stats, elapsed: float, check: dict[str, Any],
              rss_mb: float | None) -> dict[str, Any]:  # fmt: skip
    ops = {}
    for op in ("search", "add"):
        lat = stats.latencies.get(op, [])
        ops[op] = {
            "count": len(lat),
            "errors": stats.errors[op],
            "p50_ms": round(percentile(lat, 50), 1),
            "p95_ms": round(percentile(lat, 95), 1),
            "p99_ms": round(percentile(lat, 99), 1),
            "max_ms": round(max(lat), 1) if lat else None,
            "mean_ms": round(statistics.fmean(lat), 1) if lat else None,
            "throughput_rps": round(len(lat) / elapsed, 1),
        }
    total = sum(o["count"] for o in ops.values())
    return {
        "store": store, "clients": args.clients, "duration_s": round(elapsed, 1), "users": args.users,
        "search_ratio": args.search_ratio, "operations": ops, "throughput_rps": round(total / elapsed, 1),
        "errors": sum(stats.errors.values()), "error_samples": stats.error_samples, "writes": check,
        "server_rss_mb": round(rss_mb, 1) if rss_mb else None,
        "ok": sum(stats.errors.values()) == 0 and not check["lost"] and not check["duplicated"] and not check["unknown"],
    }  # fmt: skip


def print_table(summary: dict[str, Any]) -> None:
    s = summary
    w = s["writes"]
    print(f"\n== store={s['store']}  clients={s['clients']}  duration={s['duration_s']} s  users={s['users']}  "
          f"search share={s['search_ratio']:.0%}  server RSS={s['server_rss_mb']} MB")  # fmt: skip
    print(
        f"{'operation':<10}{'count':>8}{'errors':>8}{'p50 ms':>10}{'p95 ms':>10}{'p99 ms':>10}{'max ms':>10}{'req/s':>9}"
    )
    for op, o in s["operations"].items():
        print(f"{op:<10}{o['count']:>8}{o['errors']:>8}{o['p50_ms']:>10}{o['p95_ms']:>10}{o['p99_ms']:>10}"
              f"{o['max_ms'] if o['max_ms'] is not None else '-':>10}{o['throughput_rps']:>9}")  # fmt: skip
    print(
        f"{'total':<10}{sum(o['count'] for o in s['operations'].values()):>8}{s['errors']:>8}{'':>40}{s['throughput_rps']:>9}"
    )
    print(f"writes: {w['acknowledged']} acknowledged, {len(w['lost'])} lost, {len(w['duplicated'])} duplicated, "
          f"{len(w['unknown'])} unknown  ->  {'OK' if s['ok'] else 'FAILED'}")  # fmt: skip
    for e in s["error_samples"]:
        print("  error:", e)


# -- orchestration ----------------------------------------------------------------------------------
async def drive(url: str, args: argparse.Namespace) -> tuple[Stats, float, dict[str, Any]]:
    limits = httpx.Limits(max_connections=args.clients + 4, max_keepalive_connections=args.clients + 4)
    async with httpx.AsyncClient(
        base_url=url, headers={"X-API-Key": KEY}, timeout=args.timeout, limits=limits
    ) as client:
        await seed(client, args.users, args.seed_per_user)
        for i in range(3):  # warm up both paths
            (await client.post(f"/v1/users/{user_of(0)}/search", json={"query": f"warm up {i}"})).raise_for_status()
        stats = Stats()
        t0 = time.monotonic()
        deadline = t0 + args.duration
        await asyncio.gather(*(run_client(n, client, args, deadline, stats) for n in range(args.clients)))
        elapsed = time.monotonic() - t0
        check = await verify(client, args.users, stats)
    return stats, elapsed, check


def run_store(store: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    from cognis_dev.local_servers import OpenSearchServer, PostgresServer

    started: list[Any] = []
    env = {"COGNIS_STORE": store, "COGNIS_API_KEYS": f"{KEY}={TENANT}", "COGNIS_DATA_DIR": str(workdir / f"data-{store}"),
           "COGNIS_RUN_WORKER": "false"}  # fmt: skip
    try:
        if store == "dual":
            dsn, os_url = args.postgres_dsn, args.opensearch_url
            if not dsn:
                pg = PostgresServer()
                started.append(pg)
                dsn = pg.start().dsn  # type: ignore[attr-defined]
            if not os_url:
                search = OpenSearchServer()
                started.append(search)
                os_url = search.start().url  # type: ignore[attr-defined]
            env.update({"COGNIS_POSTGRES_DSN": dsn, "COGNIS_OPENSEARCH_URL": os_url,
                        "COGNIS_OPENSEARCH_INDEX_PREFIX": f"load{int(time.time())}{os.getpid()}",
                        "COGNIS_POSTGRES_POOL_SIZE": str(args.pool_size)})  # fmt: skip
        server = ServeProcess(env, log_path=workdir / f"serve-{store}.log")
        started.append(server)
        print(f"[{store}] starting cognis-memory serve ...", file=sys.stderr)
        server.start()
        print(f"[{store}] {server.url}: seeding {args.users} users, then {args.clients} clients for {args.duration} s",
              file=sys.stderr)  # fmt: skip
        stats, elapsed, check = asyncio.run(drive(server.url, args))
        rss = server.rss_mb()
        summary = summarise(store, args, stats, elapsed, check, rss)
        if not summary["ok"]:
            summary["server_log_tail"] = server.log_tail()
        return summary
    finally:
        for s in reversed(started):
            try:
                s.stop()
            except Exception as e:
                print(f"stopping {s}: {e}", file=sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--store", choices=["embedded", "dual", "both"], default="both")
    p.add_argument("--clients", type=int, default=50, help="concurrent clients (default 50)")
    p.add_argument("--duration", type=float, default=120.0, help="seconds of load per store (default 120)")
    p.add_argument("--users", type=int, default=20, help="users the clients spread over (default 20)")
    p.add_argument("--seed-per-user", type=int, default=25, help="messages per user before the run (default 25)")
    p.add_argument("--search-ratio", type=float, default=0.8, help="share of searches (default 0.8)")
    p.add_argument("--timeout", type=float, default=60.0, help="client timeout per request, seconds (default 60)")
    p.add_argument("--pool-size", type=int, default=10, help="PostgreSQL pool of the server (dual; default 10)")
    p.add_argument("--postgres-dsn", help="use this PostgreSQL (with pgvector) instead of starting one")
    p.add_argument("--opensearch-url", help="use this OpenSearch instead of starting one")
    p.add_argument("--json", help="also write the summaries as JSON to this file")
    p.add_argument("--workdir", help="keep data and logs here (default: a temporary directory, removed)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.clients < 1 or args.duration <= 0 or args.users < 1 or not 0 <= args.search_ratio <= 1:
        print("error: --clients, --duration and --users must be positive, --search-ratio in [0, 1]", file=sys.stderr)
        return 2
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="cognis-load-"))
    workdir.mkdir(parents=True, exist_ok=True)
    stores = ["embedded", "dual"] if args.store == "both" else [args.store]
    summaries = []
    try:
        for store in stores:
            summary = run_store(store, args, workdir)
            print_table(summary)
            summaries.append(summary)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(summaries, indent=2))
    return 0 if summaries and all(s["ok"] for s in summaries) else 1


if __name__ == "__main__":
    sys.exit(main())
