"""The outbox backlog metrics without a server: the EMF blob the alarm and the dashboard read, which stores
report, and a report that never raises into the service and ends when the service closes. (The backlog of
a real dual store, and a started service reporting it, are in tests/stores/test_dual_outbox_report.py.)"""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

from cognis_memory.config import Settings
from cognis_memory.service import MemoryService
from cognis_memory.stores.dual import DualStore
from cognis_memory.stores.opensearch import OpenSearchKeywordIndex
from cognis_memory.stores.postgres import PostgresStore
from cognis_memory.telemetry import names
from cognis_memory.telemetry.emitter import Telemetry
from tests.stores.helpers import DIM, DIM_SHORT, os_client

#: Nothing listens here: a store pointed at it can never be opened.
NOWHERE_PG = "postgresql://cognis@127.0.0.1:9/nothing"
NOWHERE_OS = "http://127.0.0.1:9"


def _blobs(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def test_gauges_are_one_emf_blob_with_their_units_and_the_service_dimension() -> None:
    out = io.StringIO()
    telemetry = Telemetry(service="svc-a", namespace="Ns", log_stream=io.StringIO(), metrics_stream=out)
    blob = telemetry.emit_gauges({names.OUTBOX_BACKLOG: (7, "Count"), names.OUTBOX_OLDEST_AGE: (93.5, "Seconds")})
    assert _blobs(out) == [blob]
    assert blob is not None
    (directive,) = blob["_aws"]["CloudWatchMetrics"]
    assert (directive["Namespace"], directive["Dimensions"]) == ("Ns", [["service"]])
    assert directive["Metrics"] == [
        {"Name": "OutboxBacklog", "Unit": "Count"},
        {"Name": "OutboxOldestAgeSeconds", "Unit": "Seconds"},
    ]
    assert blob["service"] == "svc-a"
    assert blob["OutboxBacklog"] in (7, [7], [7.0]) and blob["OutboxOldestAgeSeconds"] in (93.5, [93.5])

    off = io.StringIO()
    quiet = Telemetry(log_stream=io.StringIO(), metrics_stream=off, metrics_enabled=False)
    assert quiet.emit_gauges({names.OUTBOX_BACKLOG: (1, "Count")}) is None and off.getvalue() == ""


async def test_a_store_without_an_outbox_has_nothing_to_report(make_service) -> None:
    svc = await make_service()
    assert svc.outbox_report is None


async def test_a_failed_outbox_read_is_logged_never_raised_and_stop_ends_the_report(tmp_path, embedder) -> None:
    """The dual store's reporter, built by the wiring, over a PostgreSQL that cannot be reached: each reading
    fails, is logged and is tried again at the next tick, and stop() ends the task."""
    logs, metrics = io.StringIO(), io.StringIO()
    telemetry = Telemetry(log_stream=logs, metrics_stream=metrics)
    keyword = OpenSearchKeywordIndex(os_client(NOWHERE_OS, timeout=1.0), index_prefix="never")
    store = DualStore(PostgresStore(NOWHERE_PG, dim=DIM, dim_short=DIM_SHORT), keyword, inline_drain=False)
    svc = MemoryService(
        Settings(data_dir=tmp_path, run_worker=False), store=store, embedder=embedder, telemetry=telemetry
    )
    reporter = svc.outbox_report
    assert reporter is not None, "the dual store's outbox is not reported"

    assert await reporter.report_once() is None
    failures = [json.loads(line) for line in logs.getvalue().splitlines()]
    assert [f["event"] for f in failures] == ["outbox_report_failed"]
    assert "not open" in failures[0]["error"]

    reporter.interval_s = 0.05
    reporter.start()
    await asyncio.sleep(0.4)
    assert _report_tasks(), "a failed reading ended the reporting"
    assert logs.getvalue().count("outbox_report_failed") >= 3
    await reporter.stop()
    assert _report_tasks() == []
    seen = logs.getvalue().count("outbox_report_failed")
    await asyncio.sleep(0.2)
    assert logs.getvalue().count("outbox_report_failed") == seen
    assert _blobs(metrics) == []
    await store.close()


def _report_tasks() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == "cognis-outbox-report" and not t.done()]
