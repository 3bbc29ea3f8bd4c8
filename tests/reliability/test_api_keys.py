"""API keys, by-id access across owners and the per-tenant job list, on every store (issues #6 and #11).

* Keys are stored hashed: the row holds sha256(key), and the plaintext is nowhere in the
  backend (SQLite file and WAL bytes, every PostgreSQL api_keys column, every OpenSearch
  api-key document). The keys of COGNIS_API_KEYS are not stored at all.
* A key maps to exactly one tenant; a read-only key may search and read, never write.
* COGNIS_API_KEYS is authoritative for its own keys and revocation is durable: the rotation of
  docs/deploy.md (new key in the list, restart) leaves the old key 401, a revoked listed key stays
  revoked after a restart, keys from ``api-key create`` are untouched by the list. Each "restart"
  is a new store object on the same backend namespace and a new service; one test restarts a real
  ``cognis-memory serve``.
* get / update / delete / history / job by id of another tenant's or another user's record
  answers 404, with a body that says no more than for an id that does not exist, and changes
  nothing.
* ``GET /v1/jobs?status=dead`` lists one tenant's dead letters (every user's), paged by id; another
  tenant's jobs never appear.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import pytest_asyncio
from cognis_dev.processes import ServeProcess

from cognis_memory.api.app import create_app
from cognis_memory.client import AsyncMemoryClient, MemoryClient
from cognis_memory.domain import Job, JobStatus
from cognis_memory.serialization import memory_to_dict
from cognis_memory.service import MemoryService, MessageBody
from cognis_memory.stores.values import ApiKeyRecord
from tests.llm_server import Reply, ScriptedLLMServer
from tests.reliability.helpers import make_service, reopen, seg
from tests.store_kinds import KINDS, StoreHandle

pytestmark = pytest.mark.integration


async def stored_key_rows(handle, key: str) -> list[dict[str, Any]]:
    """Every stored API-key record, read directly from the backend; asserts the plaintext is absent."""
    return await KINDS[handle.kind].api_key_rows(handle, key)


@pytest_asyncio.fixture(scope="module")
async def api(any_store, embedder):
    svc = make_service(any_store.store, embedder)
    app = create_app(svc, manage_lifecycle=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://keys.test") as client:
        yield any_store, svc, client


def sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


async def test_keys_are_stored_as_sha256_and_map_to_one_tenant(api, embedder):
    handle, svc, client = api
    key = await svc.create_api_key("tenant-a", name="ops")
    read_key = await svc.create_api_key("tenant-a", read_only=True)
    rows = {r["key_hash"]: r for r in await stored_key_rows(handle, key)}
    await stored_key_rows(handle, read_key)
    assert rows[sha(key)]["tenant_id"] == "tenant-a" and not rows[sha(key)]["read_only"]
    assert rows[sha(read_key)]["read_only"]
    assert (await svc.authenticate(key)).tenant_id == "tenant-a"

    # the keys of COGNIS_API_KEYS are neither stored in plaintext nor hashed: they live in the process
    listed = make_service(handle.store, embedder, api_keys="boot-key-123=tenant-b,boot-read-456=tenant-b:read")
    assert (await listed.authenticate("boot-read-456")).read_only
    for listed_key in ("boot-key-123", "boot-read-456"):
        assert sha(listed_key) not in {r["key_hash"] for r in await stored_key_rows(handle, listed_key)}

    # one key, one tenant: the same user id under two keys is two different owners
    ka, kb = await svc.create_api_key("iso-a"), await svc.create_api_key("iso-b")
    r = await client.post("/v1/users/u/messages", headers={"X-API-Key": ka},
                          json={"messages": [{"content": "tenant a secret zq000000aaaa"}]})  # fmt: skip
    assert r.status_code == 201
    r = await client.post("/v1/users/u/search", headers={"Authorization": f"Bearer {kb}"}, json={"query": "secret"})
    assert r.status_code == 200 and r.json()["results"] == []
    r = await client.get("/v1/users/u/memories", headers={"X-API-Key": kb}, params={"include_history": "true"})
    assert r.json()["memories"] == []

    # revoked, unknown, missing and absurd keys
    assert await svc.revoke_api_key(kb)
    for headers in ({"X-API-Key": kb}, {"X-API-Key": "nope"}, {}, {"X-API-Key": "k" * 600},
                    {"Authorization": "Basic " + ka}, {"Authorization": f"Bearer {ka[:-1]}"}):  # fmt: skip
        r = await client.post("/v1/users/u/search", headers=headers, json={"query": "secret"})
        assert r.status_code == 401, (headers, r.text)
        assert "zq000000aaaa" not in r.text and r.json()["error"]["code"] == "unauthorized"


async def test_read_only_keys_read_but_never_write(api):
    _, svc, client = api
    rw, ro = await svc.create_api_key("ro-t"), await svc.create_api_key("ro-t", read_only=True)
    for user in ("reader", "search"):  # a user named "search" must not make DELETE /v1/users/search pass
        r = await client.post(f"/v1/users/{user}/messages", headers={"X-API-Key": rw},
                              json={"messages": [{"content": "readable zq000000bbbb"}]})  # fmt: skip
        assert r.status_code == 201, r.text
    mid = r.json()["memories"][0]["id"]
    before = [memory_to_dict(m) async for m in svc.export("ro-t", "search")]
    h = {"X-API-Key": ro}
    assert (await client.post("/v1/users/search/search", headers=h, json={"query": "readable"})).status_code == 200
    assert (await client.get("/v1/users/search/memories", headers=h)).status_code == 200
    assert (await client.get(f"/v1/users/search/memories/{mid}", headers=h)).status_code == 200
    assert (await client.get(f"/v1/users/search/memories/{mid}/history", headers=h)).status_code == 200
    writes = [
        client.post("/v1/users/search/messages", headers=h, json={"messages": [{"content": "x"}]}),
        client.patch(f"/v1/users/search/memories/{mid}", headers=h, json={"content": "changed"}),
        client.delete(f"/v1/users/search/memories/{mid}", headers=h),
        client.delete("/v1/users/search", headers=h),
        client.delete("/v1/users/reader", headers=h),
    ]
    for w in writes:
        r = await w
        assert r.status_code == 403, r.text
        assert r.json()["error"]["code"] == "forbidden"
    assert [memory_to_dict(m) async for m in svc.export("ro-t", "search")] == before


async def test_by_id_access_to_another_owner_is_404_and_changes_nothing(api):
    """Another tenant (same user id) and another user (same tenant): both are strangers."""
    _, svc, client = api
    k1, k2 = await svc.create_api_key("byid-1"), await svc.create_api_key("byid-2")
    owned = await svc.add_messages("byid-1", "alice", [MessageBody(content="alice private zq000000cccc", speaker="A")])
    mid = owned.raw_memories[0].id
    await svc.update_memory("byid-1", "alice", mid, content="alice private v2 zq000000cccc")
    job = Job(tenant_id="byid-1", user_id="alice", message_ids=[owned.messages[0].id])
    await svc.stores.jobs.enqueue_job(job)
    job_id = job.id
    before = [memory_to_dict(m) async for m in svc.export("byid-1", "alice")]
    strangers = [(k2, "alice"), (k1, "bob"), (k1, "Alice"), (k1, "alice ")]
    for key, user in strangers:
        h = {"X-API-Key": key}
        calls = [
            ("GET", f"/memories/{mid}", None),
            ("GET", f"/memories/{mid}/history", None),
            ("PATCH", f"/memories/{mid}", {"content": "stolen"}),
            ("DELETE", f"/memories/{mid}", None),
            ("GET", f"/jobs/{job_id}", None),
        ]
        for method, path, body in calls:
            r = await client.request(method, f"/v1/users/{seg(user)}{path}", headers=h, json=body)
            assert r.status_code in (404, 422), (key == k2, user, method, path, r.status_code, r.text)
            assert "zq000000cccc" not in r.text and "alice private" not in r.text
            if r.status_code == 404:  # no oracle: a foreign id reads exactly like an id that does not exist
                fake = "0" * 32
                r2 = await client.request(method, f"/v1/users/{seg(user)}{path.replace(mid, fake).replace(job_id, fake)}",
                                          headers=h, json=body)  # fmt: skip
                assert r2.status_code == 404
                assert (
                    r.json()["error"]["message"].replace(mid, fake).replace(job_id, fake)
                    == r2.json()["error"]["message"]
                )
        r = await client.delete(f"/v1/users/{seg(user)}", headers=h)  # forgetting the stranger's namesake
        assert r.status_code in (200, 422)
    assert [memory_to_dict(m) async for m in svc.export("byid-1", "alice")] == before
    assert (await svc.get_job("byid-1", "alice", job_id)).id == job_id


# -- COGNIS_API_KEYS across restarts: the documented rotation, durable revocation ------------------------
@asynccontextmanager
async def process(
    handle: StoreHandle, embedder, api_keys: str | None
) -> AsyncIterator[tuple[MemoryService, httpx.AsyncClient]]:
    """One run of the service: its own store object and COGNIS_API_KEYS, the HTTP app in front."""
    svc = make_service(reopen(handle, embedder.dim).store, embedder, api_keys=api_keys)
    await svc.start()
    try:
        app = create_app(svc, manage_lifecycle=False)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://keys.test") as client:
            yield svc, client
    finally:
        await svc.close()


async def status_with(client: httpx.AsyncClient, key: str, *, write: bool = False) -> int:
    h = {"Authorization": f"Bearer {key}"}
    if write:
        body = {"messages": [{"content": "rotation probe zq00000000dd"}]}
        return (await client.post("/v1/users/u/messages", headers=h, json=body)).status_code
    return (await client.post("/v1/users/u/search", headers=h, json={"query": "rotation probe"})).status_code


async def test_the_documented_rotation_leaves_the_old_key_401(any_store, embedder):
    """docs/deploy.md: the new key replaces the old one in COGNIS_API_KEYS, the tasks restart. Before the fix
    the old key had been copied into the store at the first start and stayed valid for good."""
    run = uuid.uuid4().hex[:8]
    tenant, old, new = f"rot-{run}", f"old-key-{run}", f"new-key-{run}"
    async with process(any_store, embedder, f"{old}={tenant}") as (svc, client):
        created = await svc.create_api_key(tenant, name="ops")
        assert await status_with(client, old, write=True) == 201
        assert await status_with(client, new) == 401
    # an earlier version's start-up copy of a listed key: a row named "bootstrap"
    legacy = f"legacy-key-{run}"
    await any_store.store.roles().api_keys.put_api_key(ApiKeyRecord(sha(legacy), tenant, name="bootstrap"))

    async with process(any_store, embedder, f"{new}={tenant}") as (svc, client):
        assert await status_with(client, old) == 401 and await status_with(client, old, write=True) == 401
        assert await status_with(client, legacy) == 401
        assert await status_with(client, new) == 200
        assert "zq00000000dd" in (await svc.export(tenant, "u").__anext__()).content
        assert await status_with(client, created, write=True) == 201  # keys of `api-key create`: not the list's

    async with process(any_store, embedder, None) as (_, client):  # the list emptied
        assert [await status_with(client, k) for k in (old, new, legacy, created)] == [401, 401, 401, 200]


async def test_a_revoked_listed_key_stays_revoked_after_restarts(any_store, embedder):
    """Before the fix `api-key revoke` deleted the row, and the next start wrote it again from the list."""
    run = uuid.uuid4().hex[:8]
    tenant, kept, revoked, later = f"rev-{run}", f"kept-{run}", f"revoked-{run}", f"later-{run}"
    keys = f"{kept}={tenant},{revoked}={tenant}:read,{later}={tenant}"
    async with process(any_store, embedder, keys) as (svc, client):
        assert await status_with(client, revoked) == 200
        assert await svc.revoke_api_key(revoked) is True  # what `cognis-memory api-key revoke --key` runs
        assert await status_with(client, revoked) == 401  # at once, without a restart
        assert await svc.revoke_api_key(revoked) is False  # revoked already

    async with process(any_store, embedder, keys) as (_, client):
        assert await status_with(client, revoked) == 401
        assert await status_with(client, kept) == 200 and await status_with(client, later) == 200

    # `api-key revoke` run where the list is not set (an operator's machine): recorded all the same
    async with process(any_store, embedder, None) as (svc, _):
        assert await svc.revoke_api_key(later) is False  # not a key this process knows

    async with process(any_store, embedder, keys) as (_, client):
        assert [await status_with(client, k) for k in (kept, revoked, later)] == [200, 401, 401]


# -- the tenant's job list ------------------------------------------------------------------------------
async def test_dead_jobs_are_listed_per_tenant_and_paged(api):
    _, svc, client = api
    run = uuid.uuid4().hex[:8]
    ta, tb = f"jobs-a-{run}", f"jobs-b-{run}"
    ka, kb = await svc.create_api_key(ta), await svc.create_api_key(tb)
    ro = await svc.create_api_key(ta, read_only=True)
    plan = [(ta, "u1", JobStatus.DEAD), (ta, "u2", JobStatus.DEAD), (ta, "u1", JobStatus.DONE),
            (ta, "u2", JobStatus.FAILED), (ta, "u2", JobStatus.DEAD), (tb, "u1", JobStatus.DEAD),
            (tb, "u1", JobStatus.QUEUED)]  # fmt: skip
    jobs = []
    for i, (tenant, user, status) in enumerate(plan):
        job = Job(tenant, user, [f"m{i}"], status=status, attempts=3, max_attempts=3, last_error=f"{tenant} error {i}")
        await svc.stores.jobs.enqueue_job(job)
        jobs.append(job)
    dead_a = sorted((j for j in jobs if j.tenant_id == ta and j.status is JobStatus.DEAD), key=lambda j: j.id)

    r = await client.get("/v1/jobs", params={"status": "dead"}, headers={"X-API-Key": ka})
    assert r.status_code == 200, r.text
    listed = r.json()["jobs"]
    assert [j["id"] for j in listed] == [j.id for j in dead_a] and r.json()["next_after"] is None
    assert [(j["user_id"], j["status"], j["attempts"], j["last_error"]) for j in listed] == [
        (j.user_id, "dead", 3, j.last_error) for j in dead_a
    ]
    assert tb not in r.text

    first = (await client.get("/v1/jobs", params={"status": "dead", "limit": 2}, headers={"X-API-Key": ro})).json()
    assert [j["id"] for j in first["jobs"]] == [j.id for j in dead_a[:2]] and first["next_after"] == dead_a[1].id
    rest = await client.get(
        "/v1/jobs", params={"status": "dead", "limit": 2, "after": first["next_after"]}, headers={"X-API-Key": ka}
    )
    assert [j["id"] for j in rest.json()["jobs"]] == [dead_a[2].id] and rest.json()["next_after"] is None

    every = (await client.get("/v1/jobs", headers={"X-API-Key": ka})).json()["jobs"]
    assert sorted(j["id"] for j in every) == sorted(j.id for j in jobs if j.tenant_id == ta)
    theirs = (await client.get("/v1/jobs", params={"status": "dead"}, headers={"X-API-Key": kb})).json()["jobs"]
    assert [j["last_error"] for j in theirs] == [f"{tb} error 5"]

    for params, field in (({"status": "DEAD"}, "status"), ({"status": "zombie"}, "status"), ({"limit": 0}, "limit"),
                          ({"limit": 1001}, "limit"), ({"after": "a\u0007b"}, "after")):  # fmt: skip
        bad = await client.get("/v1/jobs", params=params, headers={"X-API-Key": ka})
        assert bad.status_code == 422 and bad.json()["error"]["field"] == field, (params, bad.text)
    assert (await client.get("/v1/jobs", params={"status": "dead"})).status_code == 401

    transport = httpx.ASGITransport(app=create_app(svc, manage_lifecycle=False))
    async with AsyncMemoryClient("http://keys.test", api_key=ka, transport=transport) as mem:
        page = await mem.list_jobs(status="dead", limit=1)
        assert [j.id for j in page.jobs] == [dead_a[0].id] and page.next_after == dead_a[0].id
        assert [j.id async for j in mem.iter_jobs(status="dead", page_size=2)] == [j.id for j in dead_a]


# -- a real `cognis-memory serve`, restarted ---------------------------------------------------------------
def failing_llm(schema: str, body: dict[str, Any]) -> dict[str, Any]:
    raise Reply(500, '{"error": "model down"}')


def probe(url: str, key: str) -> int:
    r = httpx.post(f"{url}/v1/users/u/search", headers={"X-API-Key": key}, json={"query": "x"}, timeout=30)
    return r.status_code


def test_real_serve_rotation_revocation_and_dead_letters(tmp_path, monkeypatch, capsys):
    """Two runs of `cognis-memory serve` on one data directory: a job dead-lettered in the first is listed
    in the second; the rotation and a revocation by the CLI (while the first runs) hold across the restart."""
    from cognis_memory.cli import main

    tenant, old, new, spare = "acme", "old-serve-key", "new-serve-key", "spare-serve-key"
    data = str(tmp_path / "data")
    for name in ("COGNIS_STORE", "COGNIS_LLM", "COGNIS_RERANKER", "COGNIS_RECIPE"):  # the CLI below: this data dir
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COGNIS_DATA_DIR", data)
    with ScriptedLLMServer(failing_llm) as llm:
        env = {"COGNIS_DATA_DIR": data, "COGNIS_LLM": "openai", "COGNIS_OPENAI_BASE_URL": llm.base_url,
               "COGNIS_OPENAI_MODEL": "scripted", "COGNIS_JOB_MAX_ATTEMPTS": "1",
               "COGNIS_JOB_MAX_WAIT_S": "0"}  # an outage dead-letters at once  # fmt: skip
        first_keys, second_keys = f"{old}={tenant},{spare}={tenant}", f"{new}={tenant},{spare}={tenant}"
        first = ServeProcess({**env, "COGNIS_API_KEYS": first_keys}, log_path=tmp_path / "a.log")
        try:
            first.start()
            with MemoryClient(first.url, api_key=old) as mem:
                job = mem.add("dana", "I got a dog", mode="async").job
                assert job is not None and mem.wait_for_job("dana", job.id, timeout_s=60).status == "dead"
            monkeypatch.setenv("COGNIS_API_KEYS", first_keys)
            assert main(["api-key", "revoke", "--key", spare]) == 0
            assert json.loads(capsys.readouterr().out) == {"revoked": True}
            assert probe(first.url, spare) == 401  # at once
        finally:
            first.stop()

        second = ServeProcess({**env, "COGNIS_API_KEYS": second_keys}, log_path=tmp_path / "b.log")
        try:
            second.start()
            assert [probe(second.url, key) for key in (old, spare, new)] == [401, 401, 200]
            with MemoryClient(second.url, api_key=new) as mem:
                (dead,) = mem.list_jobs(status="dead").jobs
                assert (dead.id, dead.user_id, dead.attempts) == (job.id, "dana", 1) and "llm" in dead.last_error
                assert [j.id for j in mem.iter_jobs(status="dead", page_size=1)] == [job.id]
                assert mem.list_jobs(status="done").jobs == []
        finally:
            second.stop()


def test_serve_refuses_a_malformed_key_list_without_echoing_the_key(tmp_path):
    secret = "s3cret-serve-key-0123456789"
    proc = ServeProcess(
        {"COGNIS_DATA_DIR": str(tmp_path / "data"), "COGNIS_API_KEYS": f"ok-key=acme,{secret}=acme:READ"},
        log_path=tmp_path / "serve.log",
    )
    try:
        with pytest.raises(RuntimeError, match="serve exited with 2"):
            proc.start()
    finally:
        proc.stop()
    log = (tmp_path / "serve.log").read_text()
    assert "entry 2 of 2 (key 's3cr…' (27 characters)): unknown mode 'READ'" in log, log
    assert secret not in log
