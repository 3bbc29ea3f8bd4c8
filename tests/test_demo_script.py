"""The README's first command, ``bash scripts/demo.sh``, run for real: set-up (already done here, so
quick), import of the demo conversation, the sample search, then the server it leaves running.

It was broken once without any test noticing (a Python 3.12-only f-string in the sample search made
the script exit before serving), so it is exercised end to end here: stdout shows three scored
results, the server answers a search and ``/context`` with the demo key, and it stops on SIGTERM.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_demo_script_imports_searches_and_serves(tmp_path) -> None:
    port = _free_port()
    env = {**os.environ, "COGNIS_DATA_DIR": str(tmp_path / "data"), "COGNIS_PORT": str(port)}
    env.pop("COGNIS_API_KEYS", None)
    log = open(tmp_path / "demo.log", "w+", encoding="utf-8")
    proc = subprocess.Popen(
        ["bash", "scripts/demo.sh"], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240
        while True:
            if proc.poll() is not None:
                log.seek(0)
                pytest.fail(f"demo.sh exited with {proc.returncode} before serving:\n{log.read()[-3000:]}")
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("demo.sh did not serve within 240 s")
            time.sleep(0.3)
        log.seek(0)
        out = log.read()
        sample = out.split("demo: a sample search", 1)[1].split("cognis-memory is starting", 1)[0]
        assert len(re.findall(r"^  \d\.\d{3}  \S", sample, flags=re.M)) == 3, out[-2000:]
        headers = {"Authorization": "Bearer demo-key"}
        found = httpx.post(
            f"{base}/v1/users/demo-user/search", json={"query": "Where does the user live now?"}, headers=headers
        )
        assert found.status_code == 200 and found.json()["results"]
        ctx = httpx.post(f"{base}/v1/users/demo-user/context", json={"message": "Where do I live?"}, headers=headers)
        assert ctx.status_code == 200 and ctx.json()["text"].startswith("What you remember about this user")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
