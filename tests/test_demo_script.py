"""The README's first command, ``bash scripts/demo.sh``, run for real: set-up (already done here, so
quick), import of the demo conversation, the sample search, then the server it leaves running.

It was broken once without any test noticing (a Python 3.12-only f-string in the sample search made
the script exit before serving), so it is exercised end to end here: stdout shows three scored
results, the first of which answers the present-state sample question with the current statement
(issue 12: it used to show the stale one), the server answers a search and ``/context`` with the
demo key, and it stops on SIGTERM.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import httpx
import pytest
from cognis_dev.processes import free_port, wait_for_http

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_demo_script_imports_searches_and_serves(tmp_path) -> None:
    port = free_port()
    env = {**os.environ, "COGNIS_DATA_DIR": str(tmp_path / "data"), "COGNIS_PORT": str(port)}
    env.pop("COGNIS_API_KEYS", None)
    log = open(tmp_path / "demo.log", "w+", encoding="utf-8")  # noqa: SIM115 - the demo writes it until stopped
    proc = subprocess.Popen(
        ["bash", "scripts/demo.sh"], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(proc, f"{base}/health", tmp_path / "demo.log", timeout_s=240)
        log.seek(0)
        out = log.read()
        sample = out.split("demo: a sample search", 1)[1].split("cognis-memory is starting", 1)[0]
        results = re.findall(r"^  \d\.\d{3}  (.*)$", sample, flags=re.M)
        assert len(results) == 3, out[-2000:]
        # the sample is a present-state question: the first result is what holds now, not the stale statement
        assert results[0].startswith("Maya: By the way, I am not vegetarian anymore"), results
        headers = {"Authorization": "Bearer demo-key"}
        found = httpx.post(
            f"{base}/v1/users/demo-user/search", json={"query": "Where does the user live now?"}, headers=headers
        )
        assert found.status_code == 200 and found.json()["results"]
        ctx = httpx.post(f"{base}/v1/users/demo-user/context", json={"message": "Where do I live?"}, headers=headers)
        assert ctx.status_code == 200 and ctx.json()["text"].startswith("<memories>\nMemories of earlier conversations")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
