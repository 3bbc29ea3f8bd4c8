"""Connections to the embedded store's SQLite file."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

#: How long a connection waits for another one's lock (the busy timeout), seconds.
BUSY_TIMEOUT_S = 30.0


def connect(path: Path | str, *, busy_timeout_s: float = BUSY_TIMEOUT_S) -> sqlite3.Connection:
    """A connection to the store's file as the store uses it: autocommit, WAL, a busy timeout.

    Switching a new database to WAL takes the file's exclusive lock, and SQLite answers ``database is
    locked`` at once when another connection holds it (the busy timeout does not cover that pragma):
    several processes opening one new store at the same moment failed that way (6 openers, 300
    trials: 44 failures). The switch is retried until the busy timeout."""
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=busy_timeout_s)
    deadline = time.monotonic() + busy_timeout_s
    delay = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            break
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + delay > deadline:
                conn.close()
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.1)
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
    return conn
