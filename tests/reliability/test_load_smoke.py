"""CI-sized run of scripts/load_test.py (issue #6, part 5): a few clients for a few seconds per
store, zero errors, zero lost or duplicated writes. The full run (50 clients, 2 minutes per
store) is documented in docs/reliability.md."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.store_kinds import unique_prefix

REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration

SMALL = ["--clients", "5", "--duration", "8", "--users", "4", "--seed-per-user", "5"]


def run(tmp_path, *extra: str) -> dict:
    out = tmp_path / "load.json"
    proc = subprocess.run(
        [sys.executable, "scripts/load_test.py", *SMALL, "--json", str(out), *extra],
        cwd=str(REPO_ROOT), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, f"load test failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    [summary] = json.loads(out.read_text())
    assert summary["ok"] and summary["errors"] == 0
    assert (
        summary["writes"]["acknowledged"] > 0 and not summary["writes"]["lost"] and not summary["writes"]["duplicated"]
    )
    assert summary["operations"]["search"]["count"] > summary["operations"]["add"]["count"] > 0
    return summary


def test_load_embedded(tmp_path):
    run(tmp_path, "--store", "embedded")


def test_load_dual(tmp_path, postgres_server, opensearch_server):
    dsn = postgres_server.create_database(unique_prefix("load"))
    run(tmp_path, "--store", "dual", "--postgres-dsn", dsn, "--opensearch-url", opensearch_server.url)
