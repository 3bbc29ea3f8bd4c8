"""Forget user, proven by looking into every backend directly (issue #6, part 6).

The user has messages, raw memories, extracted facts, several versions (updates, a delete),
jobs, cached embeddings and search results, and index documents. After ``DELETE /v1/users/{u}``:

* SQLite: no row of the user in memories, messages, jobs; no FTS row with the user's owner
  token; the in-memory vector index of the user is gone;
* PostgreSQL: no row in memories, messages, jobs, outbox; OpenSearch keyword index ``_count`` 0;
* OpenSearch-only: ``_count`` 0 in the memories, messages, message-keys and jobs indices;
* Redis: ``SCAN MATCH <owner prefix>*`` finds nothing;

while a same-tenant neighbour and a namesake in another tenant keep every row, document and
cache key they had.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
import pytest

from cognis_memory.api.app import create_app
from cognis_memory.caching.redis_cache import owner_prefix
from cognis_memory.domain import Owner
from cognis_memory.providers.llms import OpenAICompatibleLLM
from cognis_memory.service import MessageBody
from tests.llm_server import ScriptedLLMServer
from tests.reliability.helpers import make_service
from tests.store_kinds import KINDS

pytestmark = pytest.mark.integration


class Extractor:
    """One fact per message; ``gate`` (when set) holds the decide call until released."""

    def __init__(self) -> None:
        self.gate: threading.Event | None = None
        self.waiting = threading.Event()

    def __call__(self, schema: str, body: dict[str, Any]) -> dict[str, Any]:
        prompt = body["messages"][-1]["content"]
        if schema == "extracted_facts":
            line = prompt.splitlines()[-1]
            return {"facts": [{"content": "Fact: " + line.split("] ", 1)[-1], "category": "hobbies", "scope": "USER",
                               "event_date": None}]}  # fmt: skip
        if self.gate is not None:
            self.waiting.set()
            self.gate.wait(30)
        return {"decisions": [{"fact": 0, "action": "ADD", "target": None, "content": None, "category": None}]}


async def backend_counts(handle: Any, cache: Any, owner: Owner) -> dict[str, int]:
    """Everything of ``owner`` that each backend still holds, counted at the source (the store kind's harness,
    plus the embedded store's in-memory vector index and the Redis cache)."""
    out = {f"{handle.kind}.{part}": n for part, n in (await KINDS[handle.kind].owner_counts(handle, owner)).items()}
    if handle.kind == "embedded":
        idx = handle.store._vectors.peek(owner)
        out["numpy_index.rows"] = idx.n if idx is not None else 0
    out["redis.keys"] = len([k async for k in cache._redis.scan_iter(match=owner_prefix(owner) + "*")])
    return out


async def test_forget_user_removes_everything_from_every_backend(any_store, embedder, redis_cache):
    extractor = Extractor()
    gone, neighbour, namesake = Owner("forget-t", "gone"), Owner("forget-t", "stays"), Owner("forget-other", "gone")
    with ScriptedLLMServer(extractor) as llm_server:
        svc = make_service(any_store.store, embedder, cache=redis_cache,
                           llm=OpenAICompatibleLLM(llm_server.base_url, "scripted", timeout_s=10))  # fmt: skip
        for o in (gone, neighbour, namesake):
            for i, text in enumerate(["I play the cello", "I moved to Oslo", "I am allergic to nuts"]):
                await svc.add_messages(o.tenant_id, o.user_id, [MessageBody(content=text, speaker="Lou", client_message_id=f"m{i}")],
                                       background=True)  # fmt: skip
            await svc.worker.drain(timeout_s=60)
            mems = await svc.list_memories(o.tenant_id, o.user_id)
            upd = await svc.update_memory(o.tenant_id, o.user_id, mems[0].id, content="I play the viola now")
            await svc.update_memory(o.tenant_id, o.user_id, upd.id, content="I play the viola and the cello")
            await svc.delete_memory(o.tenant_id, o.user_id, mems[1].id)
            for q in ("cello", "Oslo", "what instrument do I play", "what does Lou play"):
                await svc.search(o.tenant_id, o.user_id, q)  # cached embeddings and results
            await svc.add_messages(
                o.tenant_id, o.user_id, [MessageBody(content="queued for later", speaker="Lou")], background=True
            )
        before = {o: await backend_counts(any_store, redis_cache, o) for o in (gone, neighbour, namesake)}
        for o, counts in before.items():
            assert all(v > 0 for k, v in counts.items() if not k.endswith("outbox")), (o, counts)

        key = await svc.create_api_key(gone.tenant_id)
        app = create_app(svc, manage_lifecycle=False)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://forget.test") as client:
            r = await client.delete(f"/v1/users/{gone.user_id}", headers={"X-API-Key": key})
            assert r.status_code == 200, r.text
            deleted = r.json()["deleted"]
            assert deleted["memories"] >= 9 and deleted["messages"] == 4 and deleted["cache_entries"] > 0, deleted
            r = await client.get(f"/v1/users/{gone.user_id}/memories", headers={"X-API-Key": key},
                                 params={"include_history": "true"})  # fmt: skip
            assert r.json()["memories"] == []
            r = await client.post(
                f"/v1/users/{gone.user_id}/search", headers={"X-API-Key": key}, json={"query": "cello"}
            )
            assert r.json()["results"] == []

        assert svc.retrieval.speakers.known(gone) == [], "the forgotten user's speaker names stay in the process"
        after = await backend_counts(any_store, redis_cache, gone)
        leftover = {k: v for k, v in after.items() if v and not (k == "redis.keys" and v <= 2)}
        assert not leftover, f"{any_store.kind}: forget left {leftover}"
        # the only keys a search of the forgotten user may re-create are its (empty) result and query embedding
        for o in (neighbour, namesake):
            now = await backend_counts(any_store, redis_cache, o)
            assert now == before[o], f"{any_store.kind}: forgetting {gone} changed {o}: {before[o]} -> {now}"
        # the worker finds nothing left to do for the forgotten user
        await svc.worker.drain(timeout_s=60)
        assert (await backend_counts(any_store, redis_cache, gone)) == after


async def test_forget_during_a_running_extraction_resurrects_nothing(any_store, embedder, redis_cache):
    """A job of the user is half-way (waiting for the LLM) when the user is forgotten: when it
    resumes it must not write facts or its job row back for a user that no longer exists."""
    extractor = Extractor()
    owner = Owner("forget-race", f"u-{any_store.kind}")
    with ScriptedLLMServer(extractor) as llm_server:
        svc = make_service(any_store.store, embedder, cache=redis_cache,
                           llm=OpenAICompatibleLLM(llm_server.base_url, "scripted", timeout_s=30))  # fmt: skip
        await svc.add_messages(
            owner.tenant_id, owner.user_id, [MessageBody(content="I knit scarves", speaker="Kim")], background=True
        )
        extractor.gate = threading.Event()
        running = asyncio.create_task(svc.worker.run_once())
        await asyncio.to_thread(extractor.waiting.wait, 30)
        await svc.forget_user(owner.tenant_id, owner.user_id)
        extractor.gate.set()
        await running
        counts = await backend_counts(any_store, redis_cache, owner)
        assert not any(counts.values()), f"{any_store.kind}: data of a forgotten user came back: {counts}"
