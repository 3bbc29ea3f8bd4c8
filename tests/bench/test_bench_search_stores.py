"""scripts/bench_search.py on the server stores: the recall arithmetic, and the whole path (load, timed
searches, stages, recall) on the dual and OpenSearch-only stores against the real local servers, at a
tiny size so the path cannot rot between the runs that measure it at scale."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from tests.file_modules import load_file

ROOT = Path(__file__).resolve().parents[2]

bench: Any = load_file("bench_search_under_test", ROOT / "scripts" / "bench_search.py")


def _in_thread(fn: Any, *args: Any) -> Any:
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn, *args).result()


def _unit(a: np.ndarray) -> np.ndarray:
    return (a / np.linalg.norm(a, axis=-1, keepdims=True)).astype(np.float32)


def test_recall_counts_the_exact_top_ten_the_store_returned() -> None:
    rng = np.random.default_rng(3)
    full = _unit(rng.normal(size=(300, 16)))
    short = _unit(full[:, :4])
    ids = np.array([f"m{i}" for i in range(300)])
    q = _unit(rng.normal(size=16))
    qs = _unit(q[:4])
    exact_full = [str(ids[i]) for i in np.argsort(-(full @ q))[:10]]
    # with a shortlist of every row the two-stage scan is the full-vector scan
    assert bench.exact_recall(exact_full, ids, full, short, q, qs, shortlist=300) == (1.0, 1.0)
    # one of the ten replaced by the worst row: 9 of 10
    worst = str(ids[int(np.argmin(full @ q))])
    assert bench.exact_recall(exact_full[:9] + [worst], ids, full, short, q, qs, shortlist=300) == (0.9, 0.9)
    # a narrow shortlist changes the two-stage answer but not the full one
    cand = np.argsort(-(short @ qs))[:20]
    two = [str(ids[i]) for i in cand[np.argsort(-(full[cand] @ q))[:10]]]
    got_two, got_full = bench.exact_recall(two, ids, full, short, q, qs, shortlist=20)
    assert got_two == 1.0
    assert got_full == len(set(two) & set(exact_full)) / 10


def test_the_server_stores_are_loaded_searched_and_scored_on_the_real_servers(
    postgres_server: Any, opensearch_server: Any, tmp_path: Path
) -> None:
    # in a thread: the script's asyncio.run would leave this thread without an event loop for later tests
    assert _in_thread(bench.main, [
        "--stores", "dual,opensearch", "--sizes", "200", "--layouts", "one_user,many_users", "--per-user", "50",
        "--queries", "5", "--postgres-dsn", postgres_server.dsn, "--opensearch-url", opensearch_server.url,
        "--db", str(tmp_path / "stores"), "--out", str(tmp_path),
    ]) == 0  # fmt: skip
    payload = json.loads((tmp_path / "search.json").read_text())
    rows = {(r["store"], r["layout"]): r for r in payload["stores"]}
    assert set(rows) == {(k, lay) for k in ("dual", "opensearch") for lay in ("one_user", "many_users")}
    for r in rows.values():
        assert r["memories"] == 200 and r["queries"] == 5
        assert r["users"] == (1 if r["layout"] == "one_user" else 4)
        assert r["search_wall"]["p50"] > 0 and r["load_memories_per_s"] > 0
        assert r["stages_cpu"]["vector"]["p50"] > 0 and r["stages_cpu"]["keyword"]["p50"] > 0
        assert r["server_cpu_ms_per_search"] is None  # servers it did not start
        # 200 memories (50 per user) fit in the shortlist: the store must return the exact top ten
        assert r["recall_at_10_vs_exact_two_stage"] == 1.0, r
    assert "| dual" in payload["stores_table_markdown"]


def test_a_reused_server_store_is_loaded_once_and_two_runtimes_are_compared_on_it(
    postgres_server: Any, opensearch_server: Any, tmp_path: Path
) -> None:
    servers = ["--postgres-dsn", postgres_server.dsn, "--opensearch-url", opensearch_server.url]
    common = ["--stores", "dual", "--sizes", "120", "--layouts", "many_users", "--per-user", "40", "--queries", "4",
              "--reuse", "--db", str(tmp_path / "stores"), *servers]  # fmt: skip
    assert _in_thread(bench.main, [*common, "--out", str(tmp_path / "first")]) == 0
    marker = tmp_path / "stores" / "bench_dual_many_users_120.loaded.json"
    loaded = json.loads(marker.read_text())
    assert loaded["servers"]["postgres_dsn"] == postgres_server.dsn
    # the second run searches the same store (not a second load): its load time is the first run's
    assert _in_thread(bench.main, [*common, "--out", str(tmp_path / "second"), "--compare-with", str(ROOT),
                                   "--rounds", "1"]) == 0  # fmt: skip
    payload = json.loads((tmp_path / "second" / "search.json").read_text())
    (c,) = payload["server_compare"]
    for side in ("before", "after"):
        assert c[side]["load_s"] == round(loaded["load_s"], 1) and c[side]["recall_at_10_vs_exact_two_stage"] == 1.0
        assert len(c[side]["answers"]) == 4 and all(c[side]["answers"])
    # the same runtime on both sides: the same ids in the same order for every search
    assert c["same_answers"] == 4
    first = json.loads((tmp_path / "first" / "search.json").read_text())["stores"][0]
    assert first["answers"] == c["after"]["answers"]
