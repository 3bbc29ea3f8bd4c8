"""One tenant's large import must not stall the server for everybody else (issue #11, item 4).

A real ``cognis-memory serve`` process with two tenants and an extraction LLM (a scripted
OpenAI-compatible server). Tenant A posts hundreds of long messages in one request (async
mode, so the job worker extracts and embeds a fact per message afterwards); meanwhile the test
asks ``/health`` and searches tenant B's memories, again and again, until A's request and A's
extraction job are done. Before the fix the model ran on the event loop: every probe that
arrived during the embedding waited for all of it (seen: 7.8 s behind 100 long messages,
108.6 s behind 500), so the bounds below are generous against that failure mode yet far
above what a free event loop needs.
"""

from __future__ import annotations

import random
import threading
import time

import httpx
import pytest
from cognis_dev.processes import ServeProcess

from tests.llm_server import ScriptedLLMServer

pytestmark = [pytest.mark.integration, pytest.mark.slow]

A = {"Authorization": "Bearer key-a"}
B = {"Authorization": "Bearer key-b"}
WORDS = (
    "garden river station morning coffee letter window mountain engine concert painting harbour winter "
    "market bicycle library kitchen theatre island village forest museum lantern ticket journey"
).split()


def long_messages(n: int, seed: int = 11) -> list[str]:
    """Distinct messages of about 1,500 characters (past the model's 256-token window)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        sentences = [f"Entry {i}."]
        while sum(len(s) + 1 for s in sentences) < 1500:
            sentences.append(" ".join(rng.choice(WORDS) for _ in range(12)).capitalize() + ".")
        out.append(" ".join(sentences))
    return out


def one_fact_per_line(schema: str, body: dict) -> dict:
    prompt = body["messages"][-1]["content"]
    if schema == "extracted_facts":
        lines = [line for line in prompt.splitlines() if line.strip()]
        return {"facts": [{"content": f"Noted: {line[-300:]}", "category": "hobbies", "scope": "USER",
                           "event_date": None} for line in lines]}  # fmt: skip
    facts = [line for line in prompt.splitlines() if line.startswith("fact ")]
    return {"decisions": [{"fact": i, "action": "ADD", "target": None, "content": None, "category": None}
                          for i in range(len(facts))]}  # fmt: skip


class Probe:
    """Times /health and a search of tenant B, one after the other, on its own connection."""

    def __init__(self, url: str) -> None:
        self.client = httpx.Client(base_url=url, timeout=300)
        self.health: list[float] = []
        self.search: list[float] = []

    def once(self) -> None:
        t0 = time.perf_counter()
        r = self.client.get("/health")
        self.health.append(time.perf_counter() - t0)
        assert r.status_code == 200
        t0 = time.perf_counter()
        r = self.client.post("/v1/users/bob/search", headers=B, json={"query": "Where does Bob's sister live?"})
        self.search.append(time.perf_counter() - t0)
        assert r.status_code == 200, r.text
        assert "Porto" in r.json()["results"][0]["memory"]["content"]


def test_a_large_import_of_one_tenant_leaves_health_and_other_tenants_responsive(tmp_path) -> None:
    texts = long_messages(300)
    with ScriptedLLMServer(one_fact_per_line) as llm:
        env = {
            "COGNIS_DATA_DIR": str(tmp_path / "data"),
            "COGNIS_API_KEYS": "key-a=tenant-a,key-b=tenant-b",
            "COGNIS_LLM": "openai",
            "COGNIS_OPENAI_BASE_URL": llm.base_url,
            "COGNIS_OPENAI_MODEL": "scripted",
            "COGNIS_LLM_TIMEOUT_S": "120",
        }
        server = ServeProcess(env, log_path=tmp_path / "serve.log").start()
        try:
            with httpx.Client(base_url=server.url, timeout=600) as c:
                r = c.post("/v1/users/bob/messages", headers=B, json={"messages": [
                    {"content": "My sister Jane moved to Porto last year", "speaker": "Bob"}]})  # fmt: skip
                assert r.status_code == 201, r.text
                probe = Probe(server.url)
                probe.once()  # warm: the model is loaded and tenant B's index is open

                answer: dict[str, object] = {}

                def big_import() -> None:
                    t0 = time.perf_counter()
                    answer["response"] = c.post(
                        "/v1/users/alice/messages",
                        headers=A,
                        json={"mode": "async", "messages": [{"content": t, "speaker": "Alice"} for t in texts]},
                    )
                    answer["seconds"] = time.perf_counter() - t0

                probe.health.clear()
                probe.search.clear()
                importer = threading.Thread(target=big_import)
                importer.start()
                while importer.is_alive():
                    probe.once()
                    importer.join(timeout=0.1)
                during_import = len(probe.health)
                response = answer["response"]
                assert isinstance(response, httpx.Response) and response.status_code in (201, 202), response
                job = response.json()["job"]
                assert job is not None and len(response.json()["memories"]) == len(texts)

                # The job worker now extracts one fact per message and embeds them: probe until it is done.
                t0 = time.perf_counter()
                while True:
                    status = c.get(f"/v1/users/alice/jobs/{job['id']}", headers=A).json()["status"]
                    if status in ("done", "dead"):
                        break
                    probe.once()
                job_seconds = time.perf_counter() - t0
                assert status == "done"
                listed = c.get("/v1/users/alice/memories", headers=A, params={"limit": 1000}).json()["memories"]
                assert sum(m["kind"] == "fact" for m in listed) == len(texts)
            probe.client.close()
        finally:
            server.stop()

    import_seconds = float(answer["seconds"])  # type: ignore[arg-type]
    print(f"import {import_seconds:.1f} s ({during_import} probes), job {job_seconds:.1f} s; "
          f"health max {max(probe.health):.3f} s, search max {max(probe.search):.3f} s")  # fmt: skip
    # No probe waited for the import: /health within 2 s, tenant B's search within a third of the import...
    assert max(probe.health) < 2.0, probe.health
    assert max(probe.search) < max(2.0, import_seconds / 3), (import_seconds, probe.search)
    # ...and the import lasted long enough to be observed several times.
    assert during_import >= 3, f"only {during_import} probes ran during the {import_seconds:.1f} s import"
