"""CPU and wall time of an add's PostgreSQL writes in the API process: a transaction per table against one statement.

An add without an LLM writes its messages, then its raw memories with their outbox rows (the dual store's
mirror to OpenSearch). This script times, in this process and against one PostgreSQL, ``--writes`` sequential
writes of ``--rows`` rows each, two ways side by side, ``--rounds`` rounds alternating:

* **transaction**: ``BEGIN``, the rows' inserts (psycopg's ``executemany``), ``COMMIT``: how the store wrote
  until 7 December 2026 (a message: ``INSERT ... ON CONFLICT DO NOTHING RETURNING id`` per row);
* **one statement**: the store's own :meth:`PostgresMemories.insert_memories` and
  :meth:`PostgresMessages.save_messages` (a multi-row ``INSERT``; the outbox rows in a data-modifying ``WITH``).

Printed per round and way: process CPU ms and wall ms per write (CPU is this process's, every thread: the
client-side cost that bounds an API process). PostgreSQL is started on a free port by
``cognis_dev.local_servers`` unless ``--postgres-dsn`` names one (a fresh database is made in it either way).

    .venv/bin/python scripts/bench_pg_writes.py [--writes 300] [--rows 1] [--rounds 3] [--postgres-dsn DSN]
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
from cognis_dev.databases import create_database

from cognis_memory.domain import Category, Memory, MemoryKind, Message, utcnow
from cognis_memory.stores.postgres import PostgresStore
from cognis_memory.stores.records import (
    MEMORY_COLUMNS,
    MESSAGE_COLUMNS,
    POSTGRES,
    insert_statement,
    memory_to_row,
    message_to_row,
    row_values,
)

DIM, DIM_SHORT = 384, 128
OUTBOX_INSERT = insert_statement("outbox", ("op", "memory_id", "tenant_id", "user_id", "version"), "%s")
MEMORY_INSERT = insert_statement("memories", MEMORY_COLUMNS, "%s")
MESSAGE_INSERT = (
    insert_statement("messages", MESSAGE_COLUMNS, "%s")
    + " ON CONFLICT (tenant_id, user_id, client_message_id) DO NOTHING RETURNING id"
)


def memories(rng: np.random.Generator, rows: int) -> list[Memory]:
    out = []
    for _ in range(rows):
        v = rng.normal(size=DIM).astype(np.float32)
        v /= np.linalg.norm(v)
        short = v[:DIM_SHORT] / np.linalg.norm(v[:DIM_SHORT])
        out.append(Memory("bench", "u1", "I talked about tea and chess today", Category.HOBBIES, kind=MemoryKind.RAW,
                          embedding=v, embedding_short=short))  # fmt: skip
    return out


def messages(rows: int) -> list[Message]:
    return [Message("bench", "u1", "I talked about tea and chess today", utcnow(), client_message_id=uuid.uuid4().hex)
            for _ in range(rows)]  # fmt: skip


async def memories_in_a_transaction(store: PostgresStore, batch: list[Memory]) -> None:
    params = [row_values(memory_to_row(m, POSTGRES), MEMORY_COLUMNS) for m in batch]
    outbox = [("upsert", m.id, m.tenant_id, m.user_id, m.version) for m in batch]
    async with store.connection() as conn, conn.transaction(), conn.cursor() as cur:
        await cur.executemany(MEMORY_INSERT, params)
        await cur.executemany(OUTBOX_INSERT, outbox)


async def messages_in_a_transaction(store: PostgresStore, batch: list[Message]) -> None:
    async with store.connection() as conn, conn.transaction(), conn.cursor() as cur:
        for m in batch:
            await cur.execute(MESSAGE_INSERT, row_values(message_to_row(m, POSTGRES), MESSAGE_COLUMNS))
            await cur.fetchone()


async def timed(writes: int, make: Callable[[], Any], write: Callable[[Any], Awaitable[Any]]) -> tuple[float, float]:
    batches = [make() for _ in range(writes)]
    cpu, wall = time.process_time(), time.perf_counter()
    for batch in batches:
        await write(batch)
    return (time.process_time() - cpu) * 1000 / writes, (time.perf_counter() - wall) * 1000 / writes


async def run(dsn: str, args: argparse.Namespace) -> None:
    store = PostgresStore(dsn, dim=DIM, dim_short=DIM_SHORT)
    await store.open()
    rng = np.random.default_rng(1)
    ways: dict[str, tuple[Callable[[], Any], Callable[[Any], Awaitable[Any]]]] = {
        "memory + outbox, transaction": (
            lambda: memories(rng, args.rows), lambda b: memories_in_a_transaction(store, b)),
        "memory + outbox, one statement": (
            lambda: memories(rng, args.rows), lambda b: store.memories.insert_memories(b, outbox=True)),
        "message, transaction": (lambda: messages(args.rows), lambda b: messages_in_a_transaction(store, b)),
        "message, one statement": (lambda: messages(args.rows), lambda b: store.messages.save_messages(b)),
    }  # fmt: skip
    try:
        for make, write in ways.values():  # warm-up: connections, prepared statements
            await timed(10, make, write)
        print(f"{args.writes} writes of {args.rows} row(s) each; ms per write (CPU of this process / wall)")
        for r in range(1, args.rounds + 1):
            for name, (make, write) in ways.items():
                cpu, wall = await timed(args.writes, make, write)
                print(f"round {r}  {name:32s} CPU {cpu:6.3f}  wall {wall:6.3f}", flush=True)
    finally:
        await store.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--writes", type=int, default=300, help="sequential writes per way and round (default 300)")
    p.add_argument("--rows", type=int, default=1, help="rows per write (default 1: a single-message add)")
    p.add_argument("--rounds", type=int, default=3, help="rounds, the ways alternating (default 3)")
    p.add_argument("--postgres-dsn", help="use this PostgreSQL (with pgvector) instead of starting one")
    args = p.parse_args()
    server = None
    dsn = args.postgres_dsn
    if not dsn:
        from cognis_dev.local_servers import PostgresServer

        server = PostgresServer().start()
        dsn = server.dsn
    try:
        asyncio.run(run(create_database(dsn, f"bench_writes_{uuid.uuid4().hex[:8]}"), args))
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
