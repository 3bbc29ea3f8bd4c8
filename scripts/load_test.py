"""Bounded load test of the HTTP API on 127.0.0.1 (embedded and dual stores).

    .venv/bin/python scripts/load_test.py                         # both stores, 50 clients, 120 s each
    .venv/bin/python scripts/load_test.py --store embedded --clients 5 --duration 10
    .venv/bin/python scripts/load_test.py --store dual --json /tmp/load-dual.json
    # dual store with the Redis cache, searches repeating a user's recent questions (Zipf), the cache's
    # hit rate from the server's request log, then the cost of a cache hit in-process
    .venv/bin/python scripts/load_test.py --store dual --redis --clients 40 --query-pattern zipf --cache-probe 200
    # ingest only at 100 messages/s, outbox lag to OpenSearch; OpenSearch stopped (SIGSTOP) 30 s in, for 60 s
    .venv/bin/python scripts/load_test.py --store dual --redis --mode ingest --rate 100 --duration 180 \
        --pause-opensearch 30,60

For each store it starts what it needs on 127.0.0.1 (PostgreSQL + pgvector and OpenSearch via
``cognis_dev.local_servers`` for ``dual``, unless ``--postgres-dsn``/``--opensearch-url`` are given),
then ``cognis-memory serve`` as a subprocess with its own data directory, seeds ``--users``
users, and runs ``--clients`` concurrent clients for ``--duration`` seconds: each request is a
search (``--search-ratio``, default 80 %) or an add of one message with a unique
client_message_id (the rest). Afterwards every user's memories are listed through the API and
checked: every acknowledged message is there exactly once, nothing unacknowledged is doubled.

``--mode ingest`` (dual): adds only, ``--messages-per-request`` messages each, paced to ``--rate``
requests/s over all clients (0: as fast as the server answers). Every message carries a unique word;
a poller asks OpenSearch's keyword index directly (a ``terms`` query on ``content``, every
``--lag-poll`` s) which acknowledged words it can find: the *outbox lag* of a message is the start
of the first poll that found it minus the moment its add was acknowledged (resolution: one poll
interval plus the poll's own time). After the load it waits up to ``--lag-wait`` s for the rest;
a message never found is reported as not searchable. ``--pause-opensearch AT,SECONDS`` stops the
OpenSearch process this script started (SIGSTOP; SIGCONT after SECONDS) AT seconds into the load;
the summary then splits the adds before / during / after the pause (status codes, latency, lag) and
gives the drain time (resume until every message acknowledged so far is searchable) and the first
second after the resume from which the lag p95 of every later 5-second window is within
``--lag-target``.

``--redis`` (dual) starts Redis (or uses ``--redis-url``) as the service's cache. The server then logs
one line per request (``COGNIS_TELEMETRY=text``, INFO), from which each search is classed as a cache
hit or miss (by its ``x-request-id``): hit rate and p50/p95 over HTTP per class. ``--query-pattern
zipf`` makes searches repeat: each user has ``--recent-queries`` recent questions and asks the one
of rank k with probability proportional to 1/k^``--zipf-s`` (an agent re-asking what it asked before
in the conversation); ``uniform`` draws fresh word pairs. ``--cache-probe N`` afterwards measures,
in this process, ``MemoryService.search`` answered by Redis (N hits, each after a miss that stored
it) and checks that a search after a write never serves the answer cached before it.

Prints a table (count, errors, p50/p95/p99/max latency per operation, throughput) and exits 1
when there was any error, lost write or duplicate. Nothing here listens on anything but
127.0.0.1, and every process it starts is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import shutil
import signal
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

KEY = "load-test-key-0123456789"
# A tenant of this run's own: a PostgreSQL reused across runs (--postgres-dsn) would otherwise answer the same
# client_message_ids (ld<client>x<seq>) as "already stored" from an earlier run, writing nothing.
TENANT = f"load{int(time.time())}p{os.getpid()}"
WORDS = (
    "coffee berlin guitar marathon sister python allergy salary lisbon tea dog promotion japan vegan piano "
    "garden chess hiking bread camera violin sailing pottery cinema football yoga kayak tango poetry"
).split()
CMID = re.compile(r"ld\d+x\d+")  # one word for OpenSearch's standard analyzer (the lag poller's terms query)


# -- the load ---------------------------------------------------------------------------------------
@dataclass
class Stats:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: Counter[str] = field(default_factory=Counter)
    error_samples: list[str] = field(default_factory=list)
    acked: dict[str, str] = field(default_factory=dict)  # cmid -> user
    attempted: dict[str, str] = field(default_factory=dict)
    #: (seconds into the load, operation, HTTP status or 0 for a transport error, latency ms)
    events: list[tuple[float, str, int, float]] = field(default_factory=list)
    search_ids: list[tuple[str, float]] = field(default_factory=list)  # (x-request-id, latency ms)
    ack_at: dict[str, float] = field(default_factory=dict)  # cmid -> seconds into the load
    unseen: dict[str, float] = field(default_factory=dict)  # acknowledged, not yet found in OpenSearch
    seen_at: dict[str, float] = field(default_factory=dict)  # cmid -> seconds into the load
    t0: float = 0.0

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


def zipf_rank(rng: random.Random, n: int, s: float) -> int:
    """A rank in [0, n) drawn with probability proportional to 1/(rank+1)^s."""
    weights = [1.0 / (k + 1) ** s for k in range(n)]
    return rng.choices(range(n), weights=weights)[0]


def search_text_of(rng: random.Random, args: argparse.Namespace, user: int) -> str:
    if args.query_pattern == "zipf":  # the user's recent questions, the same every run (seeded per user)
        rank = zipf_rank(rng, args.recent_queries, args.zipf_s)
        words = random.Random(f"{user}-{rank}").sample(WORDS, 2)
        return f"what about {' '.join(words)} ({rank})"
    return f"what about {' '.join(rng.sample(WORDS, 2))}"


async def run_client(
    n: int, client: httpx.AsyncClient, args: argparse.Namespace, deadline: float, stats: Stats
) -> None:
    rng = random.Random(1000 + n)
    seq = 0
    # --rate paces the clients together: each sends every clients/rate seconds, offset by its number
    gap = args.clients / args.rate if args.rate > 0 else 0.0
    next_at = time.monotonic() + (gap * n / args.clients if gap else 0.0)
    while time.monotonic() < deadline:
        if gap:
            if (wait := next_at - time.monotonic()) > 0:
                await asyncio.sleep(wait)
            next_at += gap
            if time.monotonic() >= deadline:
                break
        u = rng.randrange(args.users)
        user = user_of(u)
        cmids: list[str] = []
        if args.mode == "mixed" and rng.random() < args.search_ratio:
            op = "search"
            body: dict[str, Any] = {"query": search_text_of(rng, args, u), "limit": 10}
            path = f"/v1/users/{user}/search"
        else:
            op = "add"
            msgs = []
            for _ in range(args.messages_per_request if args.mode == "ingest" else 1):
                cmid = f"ld{n}x{seq}"
                seq += 1
                cmids.append(cmid)
                stats.attempted[cmid] = user
                msgs.append({"content": sentence(rng, cmid), "speaker": "Sam", "client_message_id": cmid})
            body = {"messages": msgs}
            path = f"/v1/users/{user}/messages"
        t0 = time.perf_counter()
        sent_at = time.monotonic() - stats.t0
        try:
            r = await client.post(path, json=body)
        except httpx.HTTPError as e:
            stats.events.append((sent_at, op, 0, (time.perf_counter() - t0) * 1000))
            stats.error(op, f"{type(e).__name__}: {e}")
            continue
        ms = (time.perf_counter() - t0) * 1000
        stats.latencies[op].append(ms)
        stats.events.append((sent_at, op, r.status_code, ms))
        if r.status_code >= 300:
            stats.error(op, f"{r.status_code} {r.text[:200]}")
            continue
        if op == "add":
            done = time.monotonic() - stats.t0
            for cmid in cmids:
                stats.acked[cmid] = user
                stats.ack_at[cmid] = done
                stats.unseen[cmid] = done
        else:
            stats.search_ids.append((r.headers.get("x-request-id", ""), ms))


async def poll_lag(os_url: str, index: str, stats: Stats, stop: asyncio.Event, interval: float) -> None:
    """Mark acknowledged messages as searchable once OpenSearch's keyword index finds their unique word."""
    async with httpx.AsyncClient(base_url=os_url, timeout=2.0) as client:
        while not stop.is_set():
            started = time.monotonic() - stats.t0
            pending = list(stats.unseen)
            try:
                for i in range(0, len(pending), 5000):
                    chunk = [c.lower() for c in pending[i : i + 5000]]
                    body = {"size": len(chunk), "_source": ["content"],
                            "query": {"bool": {"filter": [{"terms": {"content": chunk}}]}}}  # fmt: skip
                    r = await client.post(f"/{index}/_search", json=body)
                    r.raise_for_status()
                    for hit in r.json()["hits"]["hits"]:
                        if (m := CMID.search(hit["_source"]["content"])) and m.group() in stats.unseen:
                            del stats.unseen[m.group()]
                            stats.seen_at[m.group()] = started
            except (httpx.HTTPError, KeyError, ValueError):
                pass  # OpenSearch stopped or busy: the next poll asks again
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=interval)


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
              rss_mb: float | None, *, lag: bool = False) -> dict[str, Any]:  # fmt: skip
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
    extra: dict[str, Any] = {}
    if stats.ack_at and lag:
        extra["ingest"] = lag_summary(stats, args, elapsed)
    summary = {
        "store": store, "runtime": args.runtime or "this checkout", "mode": args.mode, "rate": args.rate, "clients": args.clients, "duration_s": round(elapsed, 1), "users": args.users,
        "search_ratio": args.search_ratio, "operations": ops, "throughput_rps": round(total / elapsed, 1),
        "errors": sum(stats.errors.values()), "error_samples": stats.error_samples, "writes": check,
        "server_rss_mb": round(rss_mb, 1) if rss_mb else None,
        "ok": sum(stats.errors.values()) == 0 and not check["lost"] and not check["duplicated"] and not check["unknown"],
        **extra,
    }  # fmt: skip
    if extra.get("ingest", {}).get("not_searchable"):
        summary["ok"] = False
    return summary


def _ms(values: list[float], q: float) -> float | None:
    return round(percentile(values, q), 1) if values else None


def _s(values: list[float], q: float) -> float | None:
    return round(percentile(values, q), 2) if values else None


def lag_summary(stats: Stats, args: argparse.Namespace, elapsed: float) -> dict[str, Any]:
    """Messages/s and the outbox lag (acknowledged -> found in OpenSearch), split around a pause when there was one."""
    lag = {c: stats.seen_at[c] - stats.ack_at[c] for c in stats.seen_at}
    out: dict[str, Any] = {
        "messages_acknowledged": len(stats.ack_at),
        "messages_per_s": round(len(stats.ack_at) / elapsed, 1),
        "searchable": len(lag),
        "not_searchable": len(stats.unseen),
        "not_searchable_sample": sorted(stats.unseen)[:5],
        "lag_p50_s": _s(list(lag.values()), 50),
        "lag_p95_s": _s(list(lag.values()), 95),
        "lag_max_s": round(max(lag.values()), 2) if lag else None,
        "lag_poll_s": args.lag_poll,
    }
    if args.pause_opensearch is None:
        return out
    at, dur = args.pause_opensearch
    resume = at + dur
    phases: dict[str, Any] = {}
    for name, lo, hi in (("before", 0.0, at), ("during", at, resume), ("after", resume, float("inf"))):
        adds = [(status, ms) for t, op, status, ms in stats.events if op == "add" and lo <= t < hi]
        lags = [lag[c] for c, t in stats.ack_at.items() if lo <= t < hi and c in lag]
        phases[name] = {
            "adds": len(adds),
            "status": dict(Counter(str(st) for st, _ in adds)),
            "add_p50_ms": _ms([ms for _, ms in adds], 50),
            "add_p95_ms": _ms([ms for _, ms in adds], 95),
            "add_max_ms": round(max(ms for _, ms in adds), 1) if adds else None,
            "lag_p50_s": _s(lags, 50),
            "lag_p95_s": _s(lags, 95),
        }
    out["pause"] = {"at_s": at, "seconds": dur, "phases": phases}
    before_resume = [c for c, t in stats.ack_at.items() if t < resume]
    if before_resume and all(c in stats.seen_at for c in before_resume):
        out["pause"]["drain_s"] = round(max(stats.seen_at[c] for c in before_resume) - resume, 2)
    else:
        out["pause"]["drain_s"] = None
    # the first 5 s window (by acknowledgement) after the resume from which every later window's lag p95 is on target
    windows: dict[int, list[float]] = defaultdict(list)
    for c, t in stats.ack_at.items():
        if t >= resume and c in lag:
            windows[int((t - resume) // 5)].append(lag[c])
    recovered = None
    for w in sorted(windows, reverse=True):
        if percentile(windows[w], 95) > args.lag_target:
            break
        recovered = w * 5
    out["pause"]["lag_on_target_from_s_after_resume"] = recovered
    return out


def cache_summary(stats: Stats, log_text: str) -> dict[str, Any]:
    """Hit rate and HTTP latency of hits and misses, from the server's request lines (cache=hit) by request id."""
    hits: set[str] = set()
    server_ms: dict[str, float] = {}
    for line in log_text.splitlines():
        rid = re.search(r'request_id="?([0-9a-f]{32})', line)
        if rid is None or "memory_retrieval" not in line:
            continue
        if took := re.search(r" (\d+(?:\.\d+)?)ms ", line):
            server_ms[rid.group(1)] = float(took.group(1))
        if re.search(r'cache="?hit', line):
            hits.add(rid.group(1))
    hit_ms = [ms for rid, ms in stats.search_ids if rid in hits]
    miss_ms = [ms for rid, ms in stats.search_ids if rid not in hits]
    hit_server = [server_ms[rid] for rid, _ in stats.search_ids if rid in hits and rid in server_ms]
    return {
        "searches": len(stats.search_ids),
        "logged": sum(1 for rid, _ in stats.search_ids if rid in server_ms),
        "hits": len(hit_ms),
        "hit_rate": round(len(hit_ms) / len(stats.search_ids), 3) if stats.search_ids else None,
        "http_hit_p50_ms": _ms(hit_ms, 50), "http_hit_p95_ms": _ms(hit_ms, 95),
        "http_miss_p50_ms": _ms(miss_ms, 50), "http_miss_p95_ms": _ms(miss_ms, 95),
        "server_hit_p50_ms": _ms(hit_server, 50), "server_hit_p95_ms": _ms(hit_server, 95),
    }  # fmt: skip


def print_table(summary: dict[str, Any]) -> None:
    s = summary
    w = s["writes"]
    share = (
        f"search share={s['search_ratio']:.0%}" if s["mode"] == "mixed" else f"ingest, rate={s['rate'] or 'unpaced'}"
    )
    print(f"\n== store={s['store']}  runtime={s['runtime']}  clients={s['clients']}  duration={s['duration_s']} s  "
          f"users={s['users']}  {share}  server RSS={s['server_rss_mb']} MB")  # fmt: skip
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
    if ing := s.get("ingest"):
        print(f"ingest: {ing['messages_acknowledged']} messages, {ing['messages_per_s']} messages/s; outbox lag "
              f"(acknowledged -> found in OpenSearch, poll every {ing['lag_poll_s']} s): p50 {ing['lag_p50_s']} s, "
              f"p95 {ing['lag_p95_s']} s, max {ing['lag_max_s']} s; not searchable: {ing['not_searchable']}")  # fmt: skip
        if pause := ing.get("pause"):
            print(f"OpenSearch stopped at {pause['at_s']} s for {pause['seconds']} s: drained {pause['drain_s']} s "
                  f"after the resume; lag p95 on target from {pause['lag_on_target_from_s_after_resume']} s after it")  # fmt: skip
            for name, ph in pause["phases"].items():
                print(f"  {name:<7} adds {ph['adds']:>6}  status {ph['status']}  add p50/p95/max "
                      f"{ph['add_p50_ms']}/{ph['add_p95_ms']}/{ph['add_max_ms']} ms  lag p50/p95 "
                      f"{ph['lag_p50_s']}/{ph['lag_p95_s']} s")  # fmt: skip
    if c := s.get("cache"):
        print(f"cache: {c['hits']} hits of {c['searches']} searches (hit rate {c['hit_rate']}); over HTTP hit p50/p95 "
              f"{c['http_hit_p50_ms']}/{c['http_hit_p95_ms']} ms, miss {c['http_miss_p50_ms']}/{c['http_miss_p95_ms']}"
              f" ms; in the server (request line) hit {c['server_hit_p50_ms']}/{c['server_hit_p95_ms']} ms")  # fmt: skip
    if p := s.get("cache_probe"):
        print(f"cache probe (in-process MemoryService.search): hit p50/p95 {p['hit_p50_ms']}/{p['hit_p95_ms']} ms "
              f"({p['hits']} hits), the misses before them {p['miss_p50_ms']}/{p['miss_p95_ms']} ms; after a write: "
              f"{p['stale_after_write']} stale of {p['writes']} (the new message missing right after the write: "
              f"{p['missing_right_after_write']}, the outbox lag)")  # fmt: skip


# -- orchestration ----------------------------------------------------------------------------------
@dataclass
class Lag:
    """Where the lag poller looks (the dual store's keyword index), and the OpenSearch process to pause."""

    os_url: str
    index: str
    pid: int | None = None


async def pause_process(pid: int, at: float, seconds: float, t0: float) -> None:
    """SIGSTOP the process group ``pid`` ``at`` seconds after ``t0`` for ``seconds``; SIGCONT always follows."""
    await asyncio.sleep(max(0.0, t0 + at - time.monotonic()))
    os.killpg(pid, signal.SIGSTOP)
    print(f"OpenSearch (pid {pid}) stopped at {time.monotonic() - t0:.1f} s", file=sys.stderr)
    try:
        await asyncio.sleep(seconds)
    finally:
        os.killpg(pid, signal.SIGCONT)
        print(f"OpenSearch resumed at {time.monotonic() - t0:.1f} s", file=sys.stderr)


async def drive(url: str, args: argparse.Namespace, lag: Lag | None) -> tuple[Stats, float, dict[str, Any]]:
    limits = httpx.Limits(max_connections=args.clients + 4, max_keepalive_connections=args.clients + 4)
    async with httpx.AsyncClient(
        base_url=url, headers={"X-API-Key": KEY}, timeout=args.timeout, limits=limits
    ) as client:
        await seed(client, args.users, args.seed_per_user)
        for i in range(3):  # warm up both paths
            (await client.post(f"/v1/users/{user_of(0)}/search", json={"query": f"warm up {i}"})).raise_for_status()
        stats = Stats()
        stop = asyncio.Event()
        t0 = stats.t0 = time.monotonic()
        deadline = t0 + args.duration
        background = []
        if lag is not None:
            background.append(asyncio.create_task(poll_lag(lag.os_url, lag.index, stats, stop, args.lag_poll)))
        pause = None
        if args.pause_opensearch is not None:
            assert lag is not None and lag.pid is not None
            pause = asyncio.create_task(pause_process(lag.pid, *args.pause_opensearch, t0))
        await asyncio.gather(*(run_client(n, client, args, deadline, stats) for n in range(args.clients)))
        elapsed = time.monotonic() - t0
        if pause is not None:
            await pause
        if lag is not None:  # the rest of the outbox: wait until every acknowledged message is searchable
            wait_until = time.monotonic() + args.lag_wait
            while stats.unseen and time.monotonic() < wait_until:
                await asyncio.sleep(args.lag_poll)
        stop.set()
        await asyncio.gather(*background)
        check = await verify(client, args.users, stats)
    return stats, elapsed, check


async def cache_probe(env: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    """In this process, against the same servers: ``MemoryService.search`` answered by Redis (a miss stores
    the answer, the same search again is the hit timed), and after a write the same search again, which
    must not be that cached answer (the new message is in the fresh one)."""
    from cognis_dev.bench_common import RecordingTelemetry

    from cognis_memory.config import Settings
    from cognis_memory.message_body import MessageBody
    from cognis_memory.service import MemoryService
    from cognis_memory.wiring import build_cache, build_embedder, build_store

    flat = {k.removeprefix("COGNIS_").lower(): v for k, v in env.items() if k.startswith("COGNIS_")}
    for key in ("api_keys", "run_worker", "telemetry", "log_level"):
        flat.pop(key, None)
    settings = Settings(**flat, run_worker=False)
    embedder = build_embedder(settings)
    telemetry = RecordingTelemetry()
    svc = MemoryService(
        settings,
        store=build_store(settings, dim=embedder.dim, dim_short=settings.encoder.dim_short),
        embedder=embedder,
        cache=build_cache(settings),
        telemetry=telemetry,
    )
    await svc.start(run_worker=False)
    hit_ms: list[float] = []
    miss_ms: list[float] = []
    stale = writes = missing_right_after = 0
    stale_samples: list[str] = []
    try:
        rng = random.Random(11)
        # the load's last writes reach OpenSearch first: their on-indexed invalidation would turn a hit into a miss
        await asyncio.sleep(args.lag_target)
        for i in range(args.cache_probe):
            user, query = user_of(i % args.users), f"probe {i} {' '.join(rng.sample(WORDS, 2))}"
            t = time.perf_counter()
            await svc.search(TENANT, user, query)
            miss_ms.append((time.perf_counter() - t) * 1000)
            telemetry.take()
            t = time.perf_counter()
            await svc.search(TENANT, user, query)
            took = (time.perf_counter() - t) * 1000
            if [r.get("cache") for r in telemetry.take()] == ["hit"]:
                hit_ms.append(took)
        # a write between two equal searches; then, once the outbox lag has passed (--lag-target), the same search
        # again: a search right after the write may miss the new message on the keyword side (not in OpenSearch
        # yet: the lag), but the answer after the lag must show it, whether computed or served from the cache
        writes = min(20, args.cache_probe)
        for i in range(writes):
            user, word = user_of(i % args.users), f"zqprobe{i}"
            query = f"did I mention {word}"
            await svc.search(TENANT, user, query)  # cached now
            text = f"I did mention {word} while we spoke of {' and '.join(rng.sample(WORDS, 3))}"
            await svc.add_messages(TENANT, user, [MessageBody(content=text, speaker="Sam")])
            telemetry.take()
            right_after = await svc.search(TENANT, user, query)
            if any(r.get("cache") == "hit" for r in telemetry.take()):
                stale += 1  # the answer cached before the write
                stale_samples.append(f"{user} {query!r}: the answer cached before the write")
            if not any(word in h.memory.content for h in right_after.hits):
                missing_right_after += 1
        await asyncio.sleep(args.lag_target)
        for i in range(writes):
            user, word = user_of(i % args.users), f"zqprobe{i}"
            query = f"did I mention {word}"
            later = await svc.search(TENANT, user, query)
            served_cached = any(r.get("cache") == "hit" for r in telemetry.take())
            if not any(word in h.memory.content for h in later.hits):
                stale += 1
                stale_samples.append(f"{user} {query!r} {args.lag_target} s after the write: "
                                     f"{'served from the cache' if served_cached else 'computed'}, without it")  # fmt: skip
    finally:
        await svc.close()
    return {"hits": len(hit_ms), "probes": args.cache_probe, "hit_p50_ms": _ms(hit_ms, 50),
            "hit_p95_ms": _ms(hit_ms, 95), "miss_p50_ms": _ms(miss_ms, 50), "miss_p95_ms": _ms(miss_ms, 95),
            "writes": writes, "stale_after_write": stale, "stale_samples": stale_samples,
            "missing_right_after_write": missing_right_after}  # fmt: skip


def run_store(store: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    from cognis_dev.local_servers import OpenSearchServer, PostgresServer, RedisServer

    started: list[Any] = []
    env = {"COGNIS_STORE": store, "COGNIS_API_KEYS": f"{KEY}={TENANT}", "COGNIS_DATA_DIR": str(workdir / f"data-{store}"),
           "COGNIS_RUN_WORKER": "false"}  # fmt: skip
    lag: Lag | None = None
    try:
        if store == "dual":
            dsn, os_url = args.postgres_dsn, args.opensearch_url
            os_pid = None
            if not dsn:
                pg = PostgresServer()
                started.append(pg)
                dsn = pg.start().dsn  # type: ignore[attr-defined]
            if not os_url:
                search = OpenSearchServer()
                started.append(search)
                os_url = search.start().url  # type: ignore[attr-defined]
                os_pid = search.pid
            prefix = f"load{int(time.time())}{os.getpid()}"
            env.update({"COGNIS_POSTGRES_DSN": dsn, "COGNIS_OPENSEARCH_URL": os_url,
                        "COGNIS_OPENSEARCH_INDEX_PREFIX": prefix,
                        "COGNIS_POSTGRES_POOL_SIZE": str(args.pool_size)})  # fmt: skip
            if args.redis or args.redis_url:
                redis_url = args.redis_url
                if not redis_url:
                    redis = RedisServer()
                    started.append(redis)
                    redis_url = redis.start().url  # type: ignore[attr-defined]
                # one request line per request at INFO: the cache hits are read from it
                env.update({"COGNIS_REDIS_URL": redis_url, "COGNIS_TELEMETRY": "text", "COGNIS_LOG_LEVEL": "INFO"})
            if args.mode == "ingest":
                lag = Lag(os_url, f"{prefix}-keyword", os_pid)
        if args.runtime:  # the server runs another checkout's code (e.g. before a change), this script stays
            tree = Path(args.runtime).resolve()
            env["PYTHONPATH"] = os.pathsep.join(
                [str(tree / "runtime"), str(tree / "devtools"), os.environ.get("PYTHONPATH", "")]
            )
        server = ServeProcess(env, log_path=workdir / f"serve-{store}.log")
        started.append(server)
        print(f"[{store}] starting cognis-memory serve ...", file=sys.stderr)
        server.start()
        print(f"[{store}] {server.url}: seeding {args.users} users, then {args.clients} clients for {args.duration} s",
              file=sys.stderr)  # fmt: skip
        stats, elapsed, check = asyncio.run(drive(server.url, args, lag))
        rss = server.rss_mb()
        summary = summarise(store, args, stats, elapsed, check, rss, lag=lag is not None)
        if "COGNIS_REDIS_URL" in env and stats.search_ids:
            summary["cache"] = cache_summary(stats, server.log_path.read_text(errors="replace"))
        if "COGNIS_REDIS_URL" in env and args.cache_probe:
            summary["cache_probe"] = asyncio.run(cache_probe(env, args))
            if summary["cache_probe"]["stale_after_write"]:
                summary["ok"] = False
        if not summary["ok"]:
            summary["server_log_tail"] = server.log_tail()
        return summary
    finally:
        for s in reversed(started):
            try:
                s.stop()
            except Exception as e:
                print(f"stopping {s}: {e}", file=sys.stderr)


def _pause(text: str) -> tuple[float, float]:
    try:
        at, seconds = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError("expected AT,SECONDS, e.g. 30,60") from None
    if at < 0 or seconds <= 0:
        raise argparse.ArgumentTypeError("AT must be >= 0 and SECONDS > 0")
    return at, seconds


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
    p.add_argument(
        "--mode",
        choices=["mixed", "ingest"],
        default="mixed",
        help="mixed: searches and adds (--search-ratio); ingest: adds only, with the outbox lag (dual)",
    )
    p.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="requests/s over all clients, paced (default 0: each client sends when its answer came)",
    )
    p.add_argument("--messages-per-request", type=int, default=1, help="messages per add in --mode ingest (default 1)")
    p.add_argument(
        "--lag-poll", type=float, default=0.1, help="seconds between the lag poller's searches (default 0.1)"
    )
    p.add_argument(
        "--lag-wait",
        type=float,
        default=180.0,
        help="after the load, seconds to wait for the acknowledged messages to be searchable (default 180)",
    )
    p.add_argument("--lag-target", type=float, default=2.0, help="outbox lag p95 target, seconds (default 2)")
    p.add_argument(
        "--pause-opensearch",
        type=_pause,
        metavar="AT,SECONDS",
        help="--mode ingest: SIGSTOP the OpenSearch this script started AT s into the load, SIGCONT after SECONDS",
    )
    p.add_argument("--redis", action="store_true", help="dual: start Redis as the service's cache (hit rate measured)")
    p.add_argument("--redis-url", help="dual: use this Redis as the service's cache instead of starting one")
    p.add_argument(
        "--query-pattern",
        choices=["uniform", "zipf"],
        default="uniform",
        help="uniform: fresh word pairs; zipf: each user re-asks its --recent-queries questions (Zipf)",
    )
    p.add_argument("--recent-queries", type=int, default=20, help="questions per user for --query-pattern zipf (20)")
    p.add_argument("--zipf-s", type=float, default=1.1, help="Zipf exponent of --query-pattern zipf (default 1.1)")
    p.add_argument(
        "--cache-probe",
        type=int,
        default=0,
        help="with Redis: afterwards time N in-process searches answered by the cache, check invalidation",
    )
    p.add_argument(
        "--runtime",
        metavar="DIR",
        help="run the server on the runtime/ and devtools/ of this tree (e.g. `git archive main` unpacked)",
    )
    p.add_argument("--json", help="also write the summaries as JSON to this file")
    p.add_argument("--workdir", help="keep data and logs here (default: a temporary directory, removed)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.clients < 1 or args.duration <= 0 or args.users < 1 or not 0 <= args.search_ratio <= 1:
        print("error: --clients, --duration and --users must be positive, --search-ratio in [0, 1]", file=sys.stderr)
        return 2
    if args.store != "dual" and (args.mode == "ingest" or args.redis or args.redis_url):
        print("error: --mode ingest, --redis and --redis-url need --store dual", file=sys.stderr)
        return 2
    if args.pause_opensearch is not None and (args.mode != "ingest" or args.opensearch_url):
        print("error: --pause-opensearch needs --mode ingest and the OpenSearch this script starts", file=sys.stderr)
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
