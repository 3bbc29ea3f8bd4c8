"""Telemetry modes: EMF where CloudWatch reads stdout, one human line on a terminal, JSON otherwise,
nothing when off; the request record keeps its fields in every mode."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from cognis_dev.processes import free_port, wait_for_http

from cognis_memory.config import Settings
from cognis_memory.service import MemoryService, MessageBody
from cognis_memory.stores.embedded import EmbeddedStore
from cognis_memory.telemetry import names
from cognis_memory.telemetry.emitter import Telemetry
from cognis_memory.telemetry.modes import ECS_MARKER, LAMBDA_MARKER, resolve_mode
from cognis_memory.telemetry.recorder import StageRecorder
from cognis_memory.telemetry.text import error_line, request_line

CLI = Path(sys.executable).with_name("cognis-memory")
TENANT = "tenant-modes"
#: A text line: clock, event, duration, then fields (see telemetry/text.py).
TEXT_LINE = re.compile(r"^\d\d:\d\d:\d\d\.\d{3} memory_(retrieval|ingest) \d+\.\dms ")


@pytest.fixture
def terminal():
    """A real pseudo-terminal: (the stream a process writes to, a reader of what it wrote)."""
    master, slave = pty.openpty()
    stream = os.fdopen(slave, "w", encoding="utf-8", buffering=1)
    yield stream, master
    stream.close()
    os.close(master)


# -- which mode where ---------------------------------------------------------------------------
def test_auto_is_emf_where_cloudwatch_reads_stdout(terminal):
    stream, _ = terminal
    ecs = {ECS_MARKER: "http://169.254.170.2/v4/abc"}
    assert resolve_mode("auto", stream=stream, environ=ecs) == "emf"  # even with a terminal attached
    assert resolve_mode("auto", stream=io.StringIO(), environ={LAMBDA_MARKER: "cognis-fn"}) == "emf"


def test_auto_is_text_on_a_terminal_and_json_elsewhere(terminal):
    stream, _ = terminal
    assert resolve_mode("auto", stream=stream, environ={}) == "text"
    assert resolve_mode("auto", stream=io.StringIO(), environ={}) == "json"
    assert resolve_mode("auto", stream=None, environ={}) == "json"
    assert resolve_mode("auto", stream=stream, environ={ECS_MARKER: ""}) == "text"  # empty is not set


def test_explicit_modes_win_and_unknown_ones_are_refused(terminal):
    stream, _ = terminal
    for mode in ("emf", "json", "text", "off"):
        assert resolve_mode(mode, stream=stream, environ={ECS_MARKER: "x"}) == mode
    with pytest.raises(ValueError, match="unknown mode 'loud'"):
        resolve_mode("loud", environ={})
    with pytest.raises(ValueError):
        Settings(telemetry="loud")


def test_settings_choose_the_mode(monkeypatch):
    monkeypatch.setenv("COGNIS_TELEMETRY", "text")
    assert Telemetry.from_settings(Settings().telemetry, stream=io.StringIO()).mode == "text"
    monkeypatch.delenv("COGNIS_TELEMETRY")
    monkeypatch.setenv(ECS_MARKER, "http://169.254.170.2/v4/abc")
    assert Telemetry.from_settings(Settings().telemetry, stream=io.StringIO()).mode == "emf"
    monkeypatch.delenv(ECS_MARKER)
    assert Telemetry.from_settings(Settings().telemetry, stream=io.StringIO()).mode == "json"


# -- what each mode writes ----------------------------------------------------------------------
async def _one_ingest_and_search(tmp_path, embedder, telemetry: Telemetry) -> None:
    settings = Settings(data_dir=tmp_path, run_worker=False)
    store = EmbeddedStore(
        settings.embedded.resolved_sqlite_path, dim=embedder.dim, dim_short=settings.encoder.dim_short
    )
    async with MemoryService(settings, store=store, embedder=embedder, telemetry=telemetry) as svc:
        await svc.add_messages(TENANT, "user-m1", [MessageBody(content="I keep bees in Porto")], request_id="rid-add")
        await svc.search(TENANT, "user-m1", "Where are my bees?", request_id="rid-find")


def _search_record(telemetry: Telemetry) -> dict:
    rec = StageRecorder()
    with rec.stage("bm25"):
        rec.fields.update(candidates_bm25=4, results_final=2, temporal_query=False)
    rec.mark_degraded("reranker")
    return telemetry.log_request(
        names.EVENT_RETRIEVAL, rec, request_id="rid-r", tenant_id=TENANT, user_id="user-r", error=False
    )


async def test_json_mode_writes_the_json_line_and_no_metrics(tmp_path, embedder):
    logs, metrics = io.StringIO(), io.StringIO()
    telemetry = Telemetry(mode="json", log_stream=logs, metrics_stream=metrics)
    await _one_ingest_and_search(tmp_path, embedder, telemetry)
    lines = [json.loads(line) for line in logs.getvalue().splitlines()]
    assert [r["request_id"] for r in lines] == ["rid-add", "rid-find"]
    assert lines[1]["event"] == names.EVENT_RETRIEVAL and lines[1]["stage_durations"]["bm25_ms"] >= 0
    assert metrics.getvalue() == "" and telemetry.metrics_enabled is False


async def test_text_mode_writes_one_short_line_per_request(tmp_path, embedder):
    logs, metrics = io.StringIO(), io.StringIO()
    await _one_ingest_and_search(tmp_path, embedder, Telemetry(mode="text", log_stream=logs, metrics_stream=metrics))
    lines = logs.getvalue().splitlines()
    assert len(lines) == 2 and metrics.getvalue() == ""
    assert all(TEXT_LINE.match(line) for line in lines), lines
    ingest, search = lines
    assert "request_id=rid-add" in ingest and "messages_created=1" in ingest and " raw_store " in ingest
    for part in ("request_id=rid-find", f"tenant_id={TENANT}", "user_id=user-m1", "results_final=1",
                 "candidates_bm25=1", " embed_query ", " rrf_fusion "):  # fmt: skip
        assert part in search, (part, search)


def test_the_text_line_and_the_json_line_carry_the_same_fields():
    as_json, as_text = io.StringIO(), io.StringIO()
    record = _search_record(Telemetry(mode="json", log_stream=as_json))
    assert _search_record(Telemetry(mode="text", log_stream=as_text)).keys() == record.keys()
    line = as_text.getvalue().strip()
    written = json.loads(as_json.getvalue())
    for key in record:
        assert key in written
        if key not in ("ts", "event", "duration_ms", "stage_durations", "degraded", "error"):  # the head shows these
            assert f" {key}=" in line, (key, line)
    assert " memory_retrieval " in line and "degraded=reranker" in line and line.endswith(" bm25 0.0")
    assert " ERROR" not in line
    failed = io.StringIO()
    Telemetry(mode="text", log_stream=failed).log_request(
        names.EVENT_RETRIEVAL, StageRecorder(), request_id="r", error=True
    )
    # the duration is the recorder's real elapsed time (0.0 ms, or a little more on a loaded machine)
    assert re.search(r" \d+\.\dms ERROR request_id=r", failed.getvalue()), failed.getvalue()


def test_off_mode_writes_nothing_but_keeps_the_record_and_the_errors():
    logs, metrics = io.StringIO(), io.StringIO()
    telemetry = Telemetry(mode="off", log_stream=logs, metrics_stream=metrics)
    record = _search_record(telemetry)
    assert record["request_id"] == "rid-r" and record["stage_durations"] and record["degraded"] == ["reranker"]
    assert (
        telemetry.emit_request_metrics(
            operation="search", latency_metric=names.RETRIEVAL_LATENCY, pipeline="retrieval", rec=StageRecorder()
        )
        == []
    )
    assert logs.getvalue() == "" and metrics.getvalue() == ""
    telemetry.log_error("unhandled_error", request_id="rid-x", error=ValueError("boom"))
    assert json.loads(logs.getvalue())["event"] == "unhandled_error"  # errors are never silenced


def test_text_mode_respects_the_log_level():
    logs = io.StringIO()
    telemetry = Telemetry(mode="text", log_stream=logs, log_level="WARNING")
    telemetry.log_request(names.EVENT_RETRIEVAL, StageRecorder(), request_id="quiet")
    assert logs.getvalue() == ""
    telemetry.log_error("ingest_worker_error", request_id=None, error=RuntimeError("store down"))
    assert "ERROR ingest_worker_error" in logs.getvalue()


def test_a_text_line_cannot_be_split_by_a_value():
    record = {
        "ts": "2025-05-01T10:00:00.123456+00:00", "event": "memory_retrieval", "request_id": "a\nb", "duration_ms": 1.5,
        "stage_durations": {"bm25_ms": 0.25}, "note": "x\u2028y", "user_id": "ana maria", "error": False,
    }  # fmt: skip
    line = request_line(record)
    assert "\n" not in line and "\u2028" not in line and "\r" not in line
    assert line.startswith("10:00:00.123 memory_retrieval 1.5ms ")
    assert 'request_id="a\\nb"' in line and 'user_id="ana maria"' in line and line.endswith("| bm25 0.2")
    err = error_line({"ts": record["ts"], "event": "unhandled_error", "error": "ValueError('multi\\nline')"})
    assert "\n" not in err and err.startswith("10:00:00.123 ERROR unhandled_error ")


# -- the real server on a terminal ---------------------------------------------------------------
@pytest.mark.integration
def test_serve_on_a_terminal_prints_one_human_line_per_request(tmp_path, terminal):
    """What a person sees after `cognis-memory serve` in a terminal: one short line per request
    (the EMF wall of JSON is for CloudWatch)."""
    stream, master = terminal
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "COGNIS_DATA_DIR": str(tmp_path), "COGNIS_API_KEYS": "k=acme"}
    for var in (ECS_MARKER, LAMBDA_MARKER, "COGNIS_TELEMETRY"):
        env.pop(var, None)
    out: list[bytes] = []
    proc = subprocess.Popen(
        [str(CLI), "serve", "--port", str(port)], env=env, stdout=stream, stderr=subprocess.DEVNULL, cwd=tmp_path
    )
    reader = threading.Thread(target=_drain, args=(master, out), daemon=True)
    reader.start()
    try:
        wait_for_http(proc, f"http://127.0.0.1:{port}/health", tmp_path / "none.log")
        headers = {"Authorization": "Bearer k"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=60) as c:
            c.post("/v1/users/ana/messages", json={"messages": [{"content": "I keep bees"}]}).raise_for_status()
            c.post(
                "/v1/users/ana/search", json={"query": "bees?"}, headers={"X-Request-Id": "tty-1"}
            ).raise_for_status()
        deadline = time.monotonic() + 30
        while b"client_request_id=tty-1" not in b"".join(out) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    lines = [line for line in b"".join(out).decode().splitlines() if line.strip()]
    assert len(lines) == 2, lines  # one per request: no EMF blobs, no JSON
    assert TEXT_LINE.match(lines[0]) and " memory_ingest " in lines[0]
    assert TEXT_LINE.match(lines[1]) and "client_request_id=tty-1" in lines[1] and "user_id=ana" in lines[1]


def _drain(fd: int, out: list[bytes]) -> None:
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            return
        if not chunk:
            return
        out.append(chunk)
