"""Tiny smoke runs of the benchmark scripts, as subprocesses (what a developer would type).

Each run must end with one JSON object carrying the documented keys. Sizes are the
smallest that exercise every path (ingest, every recipe or layout, HTTP, plots), so the
three runs together stay within about a minute on two cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo10.json"
LONGMEMEVAL = ROOT.parent / "shared" / "data" / "longmemeval_s_dev100.json.gz"
pytestmark = pytest.mark.slow


def run_script(name: str, *args: str, timeout: int = 240, env: dict[str, str] | None = None) -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           **(env or {})}  # fmt: skip
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / name), *args],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    last = proc.stdout.strip().splitlines()[-1]
    return json.loads(last)


@pytest.mark.skipif(not LOCOMO.is_file(), reason="the LoCoMo file is not beside the repository")
def test_bench_locomo_smoke(tmp_path: Path) -> None:
    out = run_script(
        "bench_locomo.py", "--conversations", "1", "--sessions", "2", "--questions", "40",
        "--recipes", "bm25,vector,rrf,default", "--out", str(tmp_path),
    )  # fmt: skip
    for key in (
        "recall@1",
        "recall@5",
        "recall@10",
        "recall@20",
        "per_category",
        "search_p50_ms",
        "search_p95_ms",
        "config",
    ):
        assert key in out, key
    assert out["questions"] > 0 and set(out["recipes"]) == {"bm25", "vector", "rrf", "default"}
    assert 0.0 <= out["recall@10"] <= 1.0 and out["recall@1"] <= out["recall@20"]
    assert out["config"]["speaker_aware"] is True
    assert (tmp_path / "locomo.json").is_file() and (tmp_path / "locomo_recall.png").is_file()


@pytest.mark.skipif(not LONGMEMEVAL.is_file(), reason="the LongMemEval file is not beside the repository")
def test_bench_longmemeval_smoke(tmp_path: Path) -> None:
    out = run_script(
        "bench_longmemeval.py", "--sample", "2", "--sessions", "2", "--recipes", "rrf,default", "--no-cache",
        "--out", str(tmp_path),
    )  # fmt: skip
    assert out["questions"] == 2 and set(out["recipes"]) == {"rrf", "default"}
    for key in ("session_any@5", "session_all@5", "session_any@10", "turn_any@5", "turn_any@10"):
        assert 0.0 <= out["recipes"]["default"][key] <= 1.0, key
    assert "newest_first@5" in out["recipes"]["default"]  # the first question of the sample is a knowledge update
    assert (tmp_path / "longmemeval.json").is_file()


def test_bench_updates_smoke(tmp_path: Path) -> None:
    out = run_script("bench_updates.py", "--users", "2", "--recipes", "rrf,default", "--no-cache",
                     "--dump", str(tmp_path / "users.jsonl"), "--out", str(tmp_path))  # fmt: skip
    default = out["recipes"]["default"]
    for key in ("current@1", "stale_above_current", "history_recall@5", "unchanged@1"):
        assert 0.0 <= default[key] <= 1.0, key
    assert default["questions"] == {"current": 6, "previous": 6, "unchanged": 4}
    users = [json.loads(line) for line in (tmp_path / "users.jsonl").read_text().splitlines()]
    assert len(users) == 2 and all(u["questions"] and u["turns"] for u in users)


def test_bench_latency_smoke(tmp_path: Path) -> None:
    out = run_script(
        "bench_latency.py", "--sizes", "300", "--users", "3", "--queries", "5", "--ingest-messages", "32",
        "--single-messages", "3", "--vocab", "120", "--out", str(tmp_path),
    )  # fmt: skip
    for key in ("search_p50_ms", "search_p95_ms", "search_p99_ms", "http_search_p95_ms", "bulk_import_messages_per_s"):
        assert key in out, key
    assert out["search_p95_ms"]["300"] > 0 and out["bulk_import_messages_per_s"] > 0
    assert (tmp_path / "latency.json").is_file()


def test_bench_scale_smoke(tmp_path: Path) -> None:
    out = run_script(
        "bench_scale.py", "--sizes", "400", "--per-user", "100", "--queries", "5", "--ingest-messages", "16",
        "--vocab", "120", "--prefix-study", "2000", "--prefix-sizes", "32,128", "--out", str(tmp_path),
    )  # fmt: skip
    for key in ("search_p50_ms", "search_p95_ms", "http_search_p95_ms", "rss_mib", "ingest_messages_per_s"):
        assert key in out, key
    assert (tmp_path / "scale.json").is_file() and (tmp_path / "scale_latency.png").is_file()
    modes = {(r["rotation"], r["prefix"], r["mode"]) for r in out["prefix_study"]}
    assert (False, 32, "two_stage") in modes and (True, 128, "two_stage") in modes


def test_bench_search_smoke(tmp_path: Path) -> None:
    # tiny thresholds so that the keyword index and the approximate prefix index (and its recall) are used
    env = {"COGNIS_KEYWORD_INDEX_MIN_MEMORIES": "100", "COGNIS_ANN_MIN_MEMORIES": "300"}
    common = ["--sizes", "400", "--per-user", "100", "--vocab", "120", "--db", str(tmp_path / "stores")]
    out = run_script(
        "bench_search.py", *common, "--layouts", "one_user,many_users", "--queries", "5",
        "--compare-with", str(ROOT), "--rounds", "1", "--out", str(tmp_path), env=env,
    )  # fmt: skip
    assert out["compared"] == 2
    data = json.loads((tmp_path / "search.json").read_text())
    for c in data["compare"]:
        for side in ("before", "after"):
            r = c[side]
            for key in ("search_cpu", "stages_cpu", "floor_total_cpu", "first_search_ms", "rss_per_100k_mib"):
                assert key in r, key
            assert r["search_cpu"]["p50"] > 0 and r["floor_total_cpu"]["p50"] > 0
    one = next(c["after"] for c in data["compare"] if c["after"]["layout"] == "one_user")
    assert one["ann_recall_at_10"] is not None and 0 <= one["ann_recall_at_10"] <= 1
    many = next(c["after"] for c in data["compare"] if c["after"]["layout"] == "many_users")
    assert many["first_search_other_users_wall"]["p50"] > 0
    cold = run_script(
        "bench_search.py", *common, "--layouts", "one_user", "--cold-serve", "--rounds", "1", "--port", "18757",
        "--out", str(tmp_path / "cold"), env=env,
    )  # fmt: skip
    assert cold["cold_serve"] == 1
    row = json.loads((tmp_path / "cold" / "search.json").read_text())["cold_serve"][0]
    assert row["serve_to_first_answer_s"] >= row["server_up_s"] > 0


def test_bench_ann_smoke(tmp_path: Path) -> None:
    pytest.importorskip("faiss")
    out = run_script(
        "bench_ann.py", "--n", "2000", "--candidates", "exact,faiss-hnsw,runtime", "--queries", "5", "--vocab", "120",
        "--shortlist", "50", "--out", str(tmp_path),
    )  # fmt: skip
    rows = {r["candidate"]: r for r in out["rows"]}
    assert rows["exact"]["recall@10"] == 1.0
    assert all(0 <= r["recall@10"] <= 1 and r["cpu_p50_ms"] >= 0 for r in rows.values()) and len(rows) == 3
