"""The core install serves, ingests, searches and imports with torch absent.

The dev environment has torch (the ``[sentence-transformers]`` extra), so these processes run
with an import guard: a ``sitecustomize`` on ``PYTHONPATH`` that makes ``torch``,
``sentence_transformers`` and ``transformers`` unimportable, as they are in a core install
(``pip install cognis-memory``). Any import of them on the core path then fails the process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from cognis_dev.processes import ServeProcess

pytestmark = pytest.mark.integration

GUARD = '''
import sys


class _CoreInstall:
    """Torch and the libraries built on it are not installed."""

    absent = {"torch", "sentence_transformers", "transformers"}

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.absent:
            raise ModuleNotFoundError(f"No module named {name!r} (not in the core install)", name=name)
        return None


sys.meta_path.insert(0, _CoreInstall())
'''


@pytest.fixture
def no_torch_env(tmp_path: Path) -> dict[str, str]:
    guard = tmp_path / "guard"
    guard.mkdir()
    (guard / "sitecustomize.py").write_text(GUARD)
    repo = Path(__file__).resolve().parents[2]
    return {"PYTHONPATH": os.pathsep.join([str(guard), str(repo / "runtime")]), "HF_HUB_OFFLINE": "1"}


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], env={**os.environ, **env, "COGNIS_METRICS_ENABLED": "false"},
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def test_the_guard_really_hides_torch(no_torch_env) -> None:
    proc = run(no_torch_env, "-c", "import torch")
    assert proc.returncode != 0 and "not in the core install" in proc.stderr
    proc = run(
        no_torch_env,
        "-c",
        "from cognis_memory.providers.sentence_transformers_embedder import SentenceTransformerEmbedder as S; S()",
    )
    assert proc.returncode != 0 and "cognis-memory[sentence-transformers]" in proc.stderr


def test_serve_ingest_and_search_without_torch(no_torch_env, tmp_path) -> None:
    env = {**no_torch_env, "COGNIS_DATA_DIR": str(tmp_path / "data"), "COGNIS_API_KEYS": "core-key=core"}
    server = ServeProcess(env, log_path=tmp_path / "serve.log").start()
    try:
        with httpx.Client(base_url=server.url, headers={"Authorization": "Bearer core-key"}, timeout=120) as c:
            r = c.post("/v1/users/ana/messages", json={"messages": [
                {"content": "I moved to Lisbon last month", "speaker": "Ana"},
                {"content": "My dog is called Rex", "speaker": "Ana"},
            ]})  # fmt: skip
            assert r.status_code == 201, r.text
            r = c.post("/v1/users/ana/search", json={"query": "What is the name of my dog?"})
            assert r.status_code == 200, r.text
            assert "Rex" in r.json()["results"][0]["memory"]["content"]
            r = c.patch(f"/v1/users/ana/memories/{r.json()['results'][0]['memory']['id']}",
                        json={"content": "My dog is called Rex and he is three"})  # fmt: skip
            assert r.status_code == 200, r.text
    finally:
        server.stop()
    assert "not in the core install" not in (tmp_path / "serve.log").read_text()


def test_import_and_search_commands_without_torch(no_torch_env, tmp_path) -> None:
    data = tmp_path / "conversation.jsonl"
    data.write_text("\n".join(json.dumps({"content": c, "speaker": "Ana"}) for c in (
        "I started learning the cello in March", "My sister lives in Porto", "I am allergic to peanuts")))  # fmt: skip
    common = ["--data-dir", str(tmp_path / "data")]
    proc = run(no_torch_env, "-m", "cognis_memory", "import", str(data), "--user", "ana", "--quiet", *common)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["created"] == 3
    proc = run(no_torch_env, "-m", "cognis_memory", "search", "--user", "ana", "which instrument do I play?", *common)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "cello" in json.loads(proc.stdout)["results"][0]["content"]
