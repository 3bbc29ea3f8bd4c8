"""A database of its own on a shared PostgreSQL server: tests and benchmarks each write to a fresh one."""

from __future__ import annotations

import uuid

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo


def database_dsn(server_dsn: str, name: str) -> str:
    """``server_dsn`` pointed at the database ``name``."""
    return make_conninfo(**{**conninfo_to_dict(server_dsn), "dbname": name})


def create_database(server_dsn: str, name: str | None = None, *, if_missing: bool = False) -> str:
    """Create the database ``name`` (default: a new random ``cognis_test_...`` name) on the server and return its
    DSN; with ``if_missing`` an existing one is kept (a benchmark reusing its store)."""
    name = name or f"cognis_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is not None
        if not (exists and if_missing):
            conn.execute(f'CREATE DATABASE "{name}"')
    return database_dsn(server_dsn, name)
