"""How far OpenSearch is behind, on the real PostgreSQL and OpenSearch: writes the drain has not pushed yet are
the outbox backlog (rows, and the age of the oldest), a drain empties it, and a service started on the dual
store reports both as the EMF metrics the stack's dashboard and alarm read until it closes."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import numpy as np
import pytest
from cognis_dev.databases import create_database

from cognis_memory.config import Settings
from cognis_memory.service import MemoryService, MessageBody
from cognis_memory.stores.dual import DualStore
from cognis_memory.stores.opensearch import OpenSearchKeywordIndex
from cognis_memory.stores.postgres import PostgresStore
from cognis_memory.telemetry import names
from cognis_memory.telemetry.emitter import Telemetry
from tests.stores.helpers import DIM, DIM_SHORT, make_memory, new_owner, new_prefix, os_client

pytestmark = pytest.mark.integration


def _store(postgres_server, opensearch_server, *, dim: int = DIM, dim_short: int = DIM_SHORT) -> DualStore:
    """A dual store whose writes stay in the outbox until a drain is asked for (no inline drain, no loop)."""
    keyword = OpenSearchKeywordIndex(
        os_client(opensearch_server.url), index_prefix=new_prefix(), replicas=0, refresh=True
    )
    return DualStore(
        PostgresStore(create_database(postgres_server.dsn), dim=dim, dim_short=dim_short), keyword, inline_drain=False
    )


def _outbox_blobs(stream: io.StringIO) -> list[dict[str, Any]]:
    blobs = [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]
    return [b for b in blobs if names.OUTBOX_BACKLOG in b]


def _value(blob: dict[str, Any], metric: str) -> float:
    v = blob[metric]
    return float(v[0] if isinstance(v, list) else v)


async def test_waiting_writes_are_the_backlog_until_a_drain_pushes_them(
    postgres_server, opensearch_server, rng: np.random.Generator
) -> None:
    store = _store(postgres_server, opensearch_server)
    await store.open()
    try:
        empty = await store.outbox_state()
        assert (empty.rows, empty.oldest_age_s) == (0, 0.0)

        o = new_owner()
        await store.roles().memories.insert_memories([make_memory(o, "I grow figs", rng)])
        await asyncio.sleep(1.2)  # the oldest row has waited at least this long
        await store.roles().memories.insert_memories(
            [make_memory(o, "I grow medlars", rng), make_memory(new_owner(), "I keep hens", rng)]
        )
        waiting = await store.outbox_state()
        assert waiting.rows == 3 == await store.outbox_size()
        assert 1.2 <= waiting.oldest_age_s < 60, waiting

        metrics = io.StringIO()
        from cognis_memory.telemetry.outbox import OutboxReporter

        reporter = OutboxReporter(store.outbox_state, Telemetry(log_stream=io.StringIO(), metrics_stream=metrics))
        blob = await reporter.report_once()
        assert blob is not None and _outbox_blobs(metrics) == [blob]
        assert _value(blob, names.OUTBOX_BACKLOG) == 3
        assert _value(blob, names.OUTBOX_OLDEST_AGE) >= 1.2

        assert await store.drain_outbox() == 3
        drained = await store.outbox_state()
        assert (drained.rows, drained.oldest_age_s) == (0, 0.0)
        after = await reporter.report_once()
        assert after is not None
        assert (_value(after, names.OUTBOX_BACKLOG), _value(after, names.OUTBOX_OLDEST_AGE)) == (0, 0)
    finally:
        await store.close()


async def test_a_service_on_the_dual_store_reports_its_outbox_while_it_runs(
    postgres_server, opensearch_server, embedder, tmp_path
) -> None:
    """Started with its worker, the service reports at once and then every interval (shortened here), with no
    request in flight; closing it ends the reporting before the store's pool closes (no failed reading)."""
    settings = Settings(data_dir=tmp_path, run_worker=True)
    store = _store(postgres_server, opensearch_server, dim=embedder.dim, dim_short=settings.encoder.dim_short)
    logs, metrics = io.StringIO(), io.StringIO()
    svc = MemoryService(
        settings, store=store, embedder=embedder, telemetry=Telemetry(log_stream=logs, metrics_stream=metrics)
    )
    assert svc.outbox_report is not None, "the dual store's outbox is not reported"
    svc.outbox_report.interval_s = 0.2
    await svc.start()
    try:
        for user in ("ines", "joao"):
            await svc.add_messages("acme", user, [MessageBody(content=f"{user} planted an olive tree")])
        waiting = await store.outbox_size()
        assert waiting >= 2
        seen = await _reported(metrics, lambda b: _value(b, names.OUTBOX_BACKLOG) == waiting)
        assert seen, f"no report of the {waiting} waiting rows: {_outbox_blobs(metrics)}"
        assert seen["service"] == names.DEFAULT_SERVICE and _value(seen, names.OUTBOX_OLDEST_AGE) >= 0
        assert await store.drain_outbox() == waiting
        assert await _reported(metrics, lambda b: _value(b, names.OUTBOX_BACKLOG) == 0), "no report of the drain"
    finally:
        await svc.close()
    reported = len(_outbox_blobs(metrics))
    await asyncio.sleep(0.5)
    assert len(_outbox_blobs(metrics)) == reported, "the reporting outlived the service"
    assert "outbox_report_failed" not in logs.getvalue()


async def _reported(metrics: io.StringIO, wanted, within_s: float = 5.0) -> dict[str, Any] | None:
    """The first outbox report written from now on that ``wanted`` accepts, or None after ``within_s``."""
    start = len(_outbox_blobs(metrics))
    for _ in range(int(within_s / 0.1)):
        found = [b for b in _outbox_blobs(metrics)[start:] if wanted(b)]
        if found:
            return found[0]
        await asyncio.sleep(0.1)
    return None
