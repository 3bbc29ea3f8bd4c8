"""scripts/bench_pg_writes.py against the real PostgreSQL: both ways of writing run, each write leaves its rows."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cognis_dev.databases import database_dsn

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration

LINE = re.compile(r"round 1  (.+?) +CPU +([\d.]+)  wall +([\d.]+)$")


def test_both_ways_are_timed_and_write_their_rows(postgres_server: Any) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_pg_writes.py"), "--postgres-dsn", postgres_server.dsn,
         "--writes", "4", "--rows", "3", "--rounds", "1"],
        capture_output=True, text=True, timeout=180, env={**os.environ, "HF_HUB_OFFLINE": "1"}, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    timed = {m.group(1): float(m.group(2)) for m in map(LINE.match, proc.stdout.splitlines()) if m}
    assert set(timed) == {
        "memory + outbox, transaction", "memory + outbox, one statement", "message, transaction",
        "message, one statement",
    }  # fmt: skip
    assert all(cpu > 0 for cpu in timed.values())
    # the script made its own database; each way wrote 10 warm-up + 4 timed writes of 3 rows
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        names = [r[0] for r in conn.execute("SELECT datname FROM pg_database WHERE datname LIKE 'bench_writes_%'")]
    counts = set()
    for name in names:
        dsn = database_dsn(postgres_server.dsn, name)
        with psycopg.connect(dsn) as conn:
            counts.add(
                tuple(
                    conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("memories", "outbox", "messages")
                )
            )
    assert (2 * 14 * 3, 2 * 14 * 3, 2 * 14 * 3) in counts
