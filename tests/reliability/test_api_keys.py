"""API keys and by-id access across owners, on every store (issue #6, part 1).

* Keys are stored hashed: the row holds sha256(key), and the plaintext is nowhere in the
  backend (SQLite file and WAL bytes, every PostgreSQL api_keys column, every OpenSearch
  api-key document).
* A key maps to exactly one tenant; a read-only key may search and read, never write.
* get / update / delete / history / job by id of another tenant's or another user's record
  answers 404, with a body that says no more than for an id that does not exist, and changes
  nothing.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import httpx
import pytest
import pytest_asyncio

from cognis_memory.api.app import create_app
from cognis_memory.config import Settings
from cognis_memory.domain import Job
from cognis_memory.serialization import memory_to_dict
from cognis_memory.service import MemoryService, MessageIn
from tests.reliability.helpers import make_service, os_client, pg_rows, quiet_telemetry, seg, sqlite_rows

pytestmark = pytest.mark.integration


async def stored_key_rows(handle, key: str) -> list[dict[str, Any]]:
    """Every stored API-key record, read directly from the backend; asserts the plaintext is absent."""
    needle = key.encode()
    if handle.kind == "embedded":
        for suffix in ("", "-wal"):
            path = handle.sqlite_path.with_name(handle.sqlite_path.name + suffix)
            if path.exists():
                assert needle not in path.read_bytes(), f"plaintext key found in {path}"
        rows = sqlite_rows(handle.sqlite_path, "SELECT key_hash, tenant_id, read_only FROM api_keys")
        return [{"key_hash": r[0], "tenant_id": r[1], "read_only": bool(r[2])} for r in rows]
    if handle.kind == "dual":
        leaked = await pg_rows(handle.pg_dsn, "SELECT count(*) FROM api_keys t WHERE strpos(t::text, %s) > 0", (key,))
        assert leaked[0][0] == 0, "plaintext key found in api_keys"
        rows = await pg_rows(handle.pg_dsn, "SELECT key_hash, tenant_id, read_only FROM api_keys")
        return [{"key_hash": r[0], "tenant_id": r[1], "read_only": r[2]} for r in rows]
    client = os_client(handle.os_url)
    try:
        index = handle.store.apikeys
        client.indices.refresh(index=index)
        hits = client.search(index=index, body={"size": 1000, "query": {"match_all": {}}})["hits"]["hits"]
    finally:
        client.close()
    assert key not in json.dumps(hits), "plaintext key found in the api-key index"
    assert all(h["_id"] == h["_source"]["key_hash"] for h in hits)
    return [dict(h["_source"]) for h in hits]


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

    # bootstrap keys from the settings are hashed too
    boot = MemoryService(
        Settings(api_keys="boot-key-123=tenant-b,boot-read-456=tenant-b:read", run_worker=False, metrics_enabled=False),
        store=handle.store, embedder=embedder, telemetry=quiet_telemetry(),
    )  # fmt: skip
    await boot._bootstrap_api_keys()
    rows = {r["key_hash"]: r for r in await stored_key_rows(handle, "boot-key-123")}
    await stored_key_rows(handle, "boot-read-456")
    assert rows[sha("boot-key-123")]["tenant_id"] == "tenant-b" and not rows[sha("boot-key-123")]["read_only"]
    assert rows[sha("boot-read-456")]["read_only"]

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
    owned = await svc.add_messages("byid-1", "alice", [MessageIn("alice private zq000000cccc", speaker="A")])
    mid = owned.raw_memories[0].id
    await svc.update_memory("byid-1", "alice", mid, content="alice private v2 zq000000cccc")
    job = Job(tenant_id="byid-1", user_id="alice", message_ids=[owned.messages[0].id])
    await svc.store.enqueue_job(job)
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
