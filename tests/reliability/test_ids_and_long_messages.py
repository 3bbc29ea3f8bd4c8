"""Server-owned ids and long messages, on every store (issue 11, items 1 and 12).

* A caller could choose a memory's primary key through ``metadata.raw_memory_id``: an id like
  ``../../etc/passwd x`` (then unreachable), another user's memory id (201, the message silently
  lost), another tenant's id (a 500 from the UNIQUE constraint: an existence oracle across
  tenants). Reserved metadata keys are now refused with a 422 naming them, and every id is the
  server's.
* A chat turn longer than the per-message limit (32 KB before) failed the whole request, so that
  history never reached memory. Messages up to ``max_message_bytes`` are accepted; one longer than
  ``memory_max_bytes`` is stored as several memories (parts), each pointing to the message, all
  found by search and removed by forget.
"""

from __future__ import annotations

import re

import httpx
import pytest
import pytest_asyncio

from cognis_memory.api.app import create_app
from cognis_memory.service import MessageBody
from tests.reliability.helpers import make_service

pytestmark = pytest.mark.integration

TENANT, OTHER = "ids", "ids-other"


@pytest_asyncio.fixture
async def env(any_store, embedder):
    svc = make_service(any_store.store, embedder)
    rw = await svc.create_api_key(TENANT)
    other = await svc.create_api_key(OTHER)
    app = create_app(svc, manage_lifecycle=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://ids.test") as client:
        yield svc, client, {"rw": rw, "other": other}


def _user(request) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", request.node.name)[-60:].strip("-")


async def _export(svc, tenant: str, user: str) -> list:
    return [m.id async for m in svc.export(tenant, user)]


async def test_callers_cannot_choose_ids_through_metadata(env, request) -> None:
    svc, client, keys = env
    user = _user(request)
    r = await client.post(f"/v1/users/{user}/messages", json={"messages": [{"content": "my own note"}]},
                          headers={"X-API-Key": keys["rw"]})  # fmt: skip
    assert r.status_code == 201, r.text
    mine = r.json()["memories"][0]["id"]
    r = await client.post(f"/v1/users/{user}/messages", json={"messages": [{"content": "theirs"}]},
                          headers={"X-API-Key": keys["other"]})  # fmt: skip
    theirs = r.json()["memories"][0]["id"]
    before = {t: await _export(svc, t, user) for t in (TENANT, OTHER)}
    for chosen in ("../../etc/passwd x", mine, theirs, "a" * 32):
        for key in ("raw_memory_id", "scope", "role", "part", "parts"):
            r = await client.post(
                f"/v1/users/{user}/messages",
                json={"messages": [{"content": "hostile", "client_message_id": "c-1", "metadata": {key: chosen}}]},
                headers={"X-API-Key": keys["rw"]},
            )
            assert r.status_code == 422, r.text
            assert r.json()["error"]["field"] == f"messages[0].metadata.{key}"
    assert {t: await _export(svc, t, user) for t in (TENANT, OTHER)} == before  # nothing stored, nothing lost
    # the refused client message id is still free, and the ids of what is stored are the server's
    r = await client.post(
        f"/v1/users/{user}/messages",
        json={"messages": [{"content": "hostile no more", "client_message_id": "c-1", "metadata": {"k": "v"}}]},
        headers={"X-API-Key": keys["rw"]},
    )
    assert r.status_code == 201 and r.json()["messages"][0]["created"] is True, r.text
    memory = r.json()["memories"][0]
    assert re.fullmatch(r"[0-9a-f]{32}", memory["id"]) and memory["id"] not in (mine, theirs)
    assert memory["metadata"] == {"k": "v", "role": "user"}
    again = await client.post(
        f"/v1/users/{user}/messages",
        json={"messages": [{"content": "hostile no more", "client_message_id": "c-1"}]},
        headers={"X-API-Key": keys["rw"]},
    )
    assert again.status_code == 201 and again.json()["messages"][0]["created"] is False
    assert (await client.get(f"/v1/users/{user}/memories/{memory['id']}", headers={"X-API-Key": keys["rw"]})).is_success


def _long_message() -> str:
    """About 42 KB in paragraphs, as a long assistant answer; a distinct token opens the first and the last."""
    filler = "The itinerary continues along the coast with stops at small fishing villages and markets. "
    paragraphs = [f"Paragraph {i}. " + filler * 5 for i in range(93)]
    paragraphs[0] = "zqfirstpara opens the plan. " + paragraphs[0]
    paragraphs[-1] = "zqlastpara closes the plan. " + paragraphs[-1]
    return "\n\n".join(paragraphs)


async def test_a_long_message_is_stored_as_parts_found_by_search_and_forgotten(env, request) -> None:
    svc, client, keys = env
    user = _user(request)
    text = _long_message()
    assert 40_000 < len(text.encode()) < 48_000
    r = await client.post(
        f"/v1/users/{user}/messages",
        json={
            "messages": [
                {"content": text, "role": "assistant", "client_message_id": "long-1"},
                {"content": "a short one"},
            ]
        },  # fmt: skip
        headers={"X-API-Key": keys["rw"]},
    )
    assert r.status_code == 201, r.text[:300]
    body = r.json()
    message_id = body["messages"][0]["id"]
    parts = [m for m in body["memories"] if m["source_message_ids"] == [message_id]]
    assert len(parts) == 2 and len(body["memories"]) == 3
    assert [(m["metadata"]["part"], m["metadata"]["parts"]) for m in parts] == [(1, 2), (2, 2)]
    assert all(len(m["content"].encode()) <= svc.settings.ingest.memory_max_bytes for m in parts)  # as said
    rebuilt = "".join(m["content"] for m in parts)
    assert rebuilt.replace("\n", "").replace(" ", "") == text.replace("\n", "").replace(" ", "")
    for token, part in (("zqfirstpara", parts[0]), ("zqlastpara", parts[1])):
        for recipe in ("default", "bm25"):
            found = await client.post(f"/v1/users/{user}/search", json={"query": token, "recipe": recipe},
                                      headers={"X-API-Key": keys["rw"]})  # fmt: skip
            assert found.json()["results"][0]["memory"]["id"] == part["id"], (token, recipe)
    retry = await client.post(
        f"/v1/users/{user}/messages",
        json={"messages": [{"content": text, "role": "assistant", "client_message_id": "long-1"}]},
        headers={"X-API-Key": keys["rw"]},
    )
    assert retry.json()["messages"][0]["created"] is False and retry.json()["memories"] == []
    assert len(await _export(svc, TENANT, user)) == 3
    forgot = await client.delete(f"/v1/users/{user}", headers={"X-API-Key": keys["rw"]})
    assert forgot.status_code == 200 and forgot.json()["deleted"]["memories"] == 3
    assert await _export(svc, TENANT, user) == []


async def test_a_message_over_the_per_message_limit_is_refused_naming_it(any_store, embedder, request) -> None:
    svc = make_service(any_store.store, embedder, max_message_bytes=2048, memory_max_bytes=512)
    user = _user(request)
    result = await svc.add_messages(TENANT, user, [MessageBody(content="word " * 400)])  # 2000 bytes: 4 parts
    assert len(result.raw_memories) == 4
    with pytest.raises(Exception) as e:
        await svc.add_messages(TENANT, user, [MessageBody(content="fine"), MessageBody(content="word " * 410)])
    assert getattr(e.value, "field", None) == "messages[1].content"
    assert len(await _export(svc, TENANT, user)) == 4
