"""scripts/load_test.py: the arithmetic of its ingest and cache summaries, and two tiny runs of the whole
path against the real local servers (a real ``cognis-memory serve`` on the dual store): ingest with the
outbox lag read from OpenSearch, and a mixed load with the Redis cache, its hit rate from the server's
request lines and the in-process cache probe."""

from __future__ import annotations

import argparse
import json
import random
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from cognis_dev.databases import create_database

from tests.file_modules import load_file

ROOT = Path(__file__).resolve().parents[2]

lt: Any = load_file("load_test_under_test", ROOT / "scripts" / "load_test.py")


def _in_thread(fn: Any, *args: Any) -> Any:
    # the script's asyncio.run would leave this thread without an event loop for later tests
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn, *args).result()


def _args(**over: Any) -> argparse.Namespace:
    args = lt.build_parser().parse_args([])
    vars(args).update(over)
    return args


def test_lag_summary_splits_around_the_pause_and_finds_drain_and_recovery() -> None:
    stats = lt.Stats()
    # acknowledged at t, found at t + lag: lag 0.5 s before the pause (0-10 s), the writes during it
    # (10-20 s) found only at 23 s, then 3 s lag for the first window after the resume, 0.5 s later
    plan = [(t, 0.5) for t in range(10)] + [(t, 23.0 - t) for t in range(10, 20)]
    plan += [(t + 0.5, 3.0) for t in range(20, 25)] + [(t + 0.5, 0.5) for t in range(25, 40)]
    for i, (t, lag) in enumerate(plan):
        c = f"ld0x{i}"
        stats.ack_at[c] = float(t)
        stats.seen_at[c] = float(t) + lag
        stats.events.append((float(t), "add", 201, 10.0 if t < 10 or t >= 20 else 900.0))
    stats.ack_at["ld0x999"] = 39.0  # never found
    stats.unseen["ld0x999"] = 39.0
    out = lt.lag_summary(stats, _args(pause_opensearch=(10.0, 10.0)), elapsed=40.0)
    assert out["messages_acknowledged"] == 41 and out["searchable"] == 40 and out["not_searchable"] == 1
    ph = out["pause"]["phases"]
    assert (ph["before"]["adds"], ph["during"]["adds"], ph["after"]["adds"]) == (10, 10, 20)
    assert ph["before"]["lag_p95_s"] == 0.5 and ph["during"]["add_p50_ms"] == 900.0
    assert ph["during"]["status"] == {"201": 10}
    assert out["pause"]["drain_s"] == 3.0  # everything acknowledged before the resume (20 s) found at 23 s
    assert out["pause"]["lag_on_target_from_s_after_resume"] == 5  # the 20-25 s window is at 3 s


def test_cache_summary_classes_searches_by_the_servers_request_lines() -> None:
    stats = lt.Stats()
    ids = [uuid.uuid4().hex for _ in range(4)]
    stats.search_ids = [(ids[0], 3.0), (ids[1], 50.0), (ids[2], 4.0), (ids[3], 60.0)]
    log = "\n".join([
        f'10:00:00.001 memory_retrieval 1.5ms request_id="{ids[0]}" cache="hit" tenant_id="load"',
        f'10:00:00.002 memory_retrieval 40.0ms request_id="{ids[1]}" tenant_id="load" | embedding 9.0',
        f'10:00:00.003 memory_retrieval 2.5ms request_id="{ids[2]}" cache="hit"',
        f'10:00:00.004 memory_ingest 30.0ms request_id="{ids[3]}" cache="hit"',  # not a search line
    ])  # fmt: skip
    out = lt.cache_summary(stats, log)
    assert (out["searches"], out["hits"], out["logged"]) == (4, 2, 3)
    assert out["hit_rate"] == 0.5 and out["http_hit_p50_ms"] == 3.5 and out["server_hit_p95_ms"] == 2.5


def test_zipf_ranks_favour_the_first_questions() -> None:
    rng = random.Random(1)
    counts = [0] * 20
    for _ in range(4000):
        counts[lt.zipf_rank(rng, 20, 1.1)] += 1
    assert counts[0] > counts[1] > counts[4] > counts[19] > 0


def test_a_pause_needs_the_ingest_mode_and_a_started_opensearch() -> None:
    assert lt.main(["--store", "dual", "--pause-opensearch", "5,10"]) == 2
    assert lt.main(["--store", "embedded", "--mode", "ingest"]) == 2
    with pytest.raises(SystemExit):
        lt.build_parser().parse_args(["--pause-opensearch", "5"])


def test_ingest_run_measures_the_outbox_lag_on_the_real_servers(
    postgres_server: Any, opensearch_server: Any, tmp_path: Path
) -> None:
    out = tmp_path / "ingest.json"
    assert _in_thread(lt.main, [
        "--store", "dual", "--mode", "ingest", "--rate", "8", "--clients", "2", "--duration", "3", "--users", "2",
        "--seed-per-user", "2", "--messages-per-request", "2", "--postgres-dsn", create_database(postgres_server.dsn),
        "--opensearch-url", opensearch_server.url, "--lag-wait", "30", "--json", str(out),
    ]) == 0  # fmt: skip
    s = json.loads(out.read_text())[0]
    ing = s["ingest"]
    assert s["ok"] and s["writes"]["acknowledged"] == ing["messages_acknowledged"] > 0
    assert ing["searchable"] == ing["messages_acknowledged"] and ing["not_searchable"] == 0
    assert 0 <= ing["lag_p50_s"] <= ing["lag_p95_s"] < 30
    assert s["operations"]["search"]["count"] == 0


def test_mixed_run_with_redis_reports_hits_and_the_cache_probe(
    postgres_server: Any, opensearch_server: Any, redis_server: Any, tmp_path: Path
) -> None:
    out = tmp_path / "mixed.json"
    redis_url = redis_server.url.rsplit("/", 1)[0] + "/7"  # a database of its own on the shared server
    assert _in_thread(lt.main, [
        "--store", "dual", "--clients", "2", "--duration", "4", "--users", "2", "--seed-per-user", "3",
        "--query-pattern", "zipf", "--recent-queries", "2", "--cache-probe", "3",
        "--postgres-dsn", create_database(postgres_server.dsn), "--opensearch-url", opensearch_server.url,
        "--redis-url", redis_url, "--json", str(out),
    ]) == 0  # fmt: skip
    s = json.loads(out.read_text())[0]
    c, p = s["cache"], s["cache_probe"]
    assert c["searches"] == s["operations"]["search"]["count"] > 0 and c["logged"] == c["searches"]
    assert c["hits"] > 0, "two questions per user, asked again and again: some answers must come from Redis"
    assert p["hits"] == 3 and p["writes"] == 3 and p["stale_after_write"] == 0
