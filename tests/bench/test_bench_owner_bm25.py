"""scripts/bench_owner_bm25.py against the real OpenSearch: one owner's BM25, scored with that owner's own
statistics, equals a reference computed from the owner's documents alone and stays put when another owner
writes, while the plain ``match`` scores move."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opensearchpy import OpenSearch

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


def test_owner_statistics_match_the_reference_and_ignore_other_owners(opensearch_server: Any) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_owner_bm25.py"), "--opensearch-url", opensearch_server.url,
         "--docs", "400", "--vocabulary", "60", "--queries", "12", "--timed", "3"],
        capture_output=True, text=True, timeout=180, env={**os.environ, "HF_HUB_OFFLINE": "1"}, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["queries"] == 12 and out["queries_with_the_reference_hits"] == 12
    assert out["worst_relative_score_error"] < 1e-5  # float32 scores against a float64 reference
    assert out["owner_scores_unchanged_by_another_owner"] is True
    assert out["plain_scores_unchanged_by_another_owner"] is False  # the side channel the owner's statistics close
    assert set(out["ms"]) == {"owner", "owner_tokens_known", "plain"}
    assert all(v["p50"] > 0 for v in out["ms"].values())
    # the probe index is the script's own and is gone afterwards
    assert not OpenSearch(opensearch_server.url).indices.exists(index="cognis-probe-owner-bm25")
