"""The real server: ``cognis-memory serve`` in a subprocess on a free 127.0.0.1 port, real HTTP.

Configuration comes from the environment the way an operator sets it (COGNIS_DATA_DIR,
COGNIS_API_KEYS); the example client in ``examples/python_client.py`` runs against it too.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from cognis_dev.processes import free_port, wait_for_http

REPO = Path(__file__).resolve().parents[2]
CLI = Path(sys.executable).with_name("cognis-memory")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("server")
    port = free_port()
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "COGNIS_DATA_DIR": str(tmp / "data"),
        "COGNIS_API_KEYS": "real-key=acme,real-read=acme:read",
        "COGNIS_TELEMETRY": "emf",  # as the infra sets it on ECS (auto would pick json for a file)
    }
    out = open(tmp / "server.out", "w+", encoding="utf-8")  # noqa: SIM115 - the server writes it until stopped
    proc = subprocess.Popen(
        [str(CLI), "serve", "--port", str(port)], env=env, stdout=out, stderr=subprocess.STDOUT, cwd=tmp
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(proc, f"{base}/health", tmp / "server.out")
    except BaseException:
        proc.kill()
        raise
        time.sleep(0.2)
    try:
        yield {"base": base, "proc": proc, "out": out, "db": tmp / "data" / "memory.db"}
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        out.close()


def test_real_server_over_http(server):
    base = server["base"]
    with httpx.Client(base_url=base, timeout=60) as c:
        assert c.get("/health").json() == {"status": "ok"}
        assert c.get("/ready").status_code == 200
        assert c.get("/openapi.json").json()["info"]["title"] == "cognis-memory"

        r = c.post("/v1/users/alice/messages", json={"messages": [{"content": "hi"}]})
        assert r.status_code == 401

        r = c.post(
            "/v1/users/alice/messages",
            json={"messages": [{"content": "I moved to Lisbon last month", "speaker": "Alice",
                                "timestamp": "2025-05-10T10:00:00Z", "client_message_id": "real-1"}]},
            headers={"Authorization": "Bearer real-key", "X-Request-Id": "real-req-ingest"},
        )  # fmt: skip
        assert r.status_code == 201, r.text
        assert r.headers["X-Client-Request-Id"] == "real-req-ingest"
        ingest_id = r.headers["X-Request-Id"]  # the server's own
        assert "server" not in r.headers  # no banner naming the server software
        assert (r.headers["X-Content-Type-Options"], r.headers["Cache-Control"]) == ("nosniff", "no-store")
        memory = r.json()["memories"][0]
        assert memory["event_time"].startswith("2025-04")

        r = c.post(
            "/v1/users/alice/search",
            json={"query": "Where does Alice live?"},
            headers={"X-API-Key": "real-read", "X-Request-Id": "real-req-search"},
        )
        assert r.status_code == 200, r.text
        search_id = r.headers["X-Request-Id"]
        assert [h["memory"]["id"] for h in r.json()["results"]] == [memory["id"]]

        r = c.delete("/v1/users/alice", headers={"X-API-Key": "real-read"})
        assert r.status_code == 403

        r = c.post(
            "/v1/users/alice/messages",
            content=b'{"messages":[{"content":"\xff"}]}',
            headers={"Authorization": "Bearer real-key", "Content-Type": "application/json"},
        )
        assert r.status_code == 400 and r.json()["error"]["field"] == "body"

    # the example client, against the same server
    run = subprocess.run(
        [sys.executable, str(REPO / "examples" / "python_client.py")],
        env={**os.environ, "COGNIS_URL": base, "COGNIS_API_KEY": "real-key", "COGNIS_USER": "maya"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert "added 2 new message(s)" in run.stdout
    assert "Pixel" in run.stdout.splitlines()[1]  # the top hit names the cat

    # a graceful shutdown on SIGTERM (uvicorn re-raises the signal after it, hence -15): the
    # lifespan closed the store, so SQLite checkpointed and removed its write-ahead log
    proc = server["proc"]
    assert Path(f"{server['db']}-wal").exists()  # WAL mode, store open
    proc.terminate()
    assert proc.wait(timeout=30) in (0, -15)
    assert not Path(f"{server['db']}-wal").exists()
    with sqlite3.connect(server["db"]) as conn:
        rows = conn.execute("SELECT user_id, count(*) FROM messages GROUP BY user_id ORDER BY user_id").fetchall()
    assert rows == [("alice", 1), ("maya", 2)]

    # one JSON log line per request, carrying the request id; EMF lines are valid JSON
    server["out"].seek(0)
    lines = [json.loads(line) for line in server["out"].read().splitlines() if line.startswith("{")]
    logs = {r["request_id"]: r for r in lines if "event" in r}
    assert (logs[ingest_id]["event"], logs[ingest_id]["client_request_id"]) == ("memory_ingest", "real-req-ingest")
    assert (logs[search_id]["event"], logs[search_id]["client_request_id"]) == ("memory_retrieval", "real-req-search")
    assert logs[search_id]["results_final"] == 1
    assert any(r.get("_aws", {}).get("CloudWatchMetrics") for r in lines)
