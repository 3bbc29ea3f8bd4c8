"""Lists in time order with cursors, through the HTTP API (ASGI in-process, embedded store): a user's
memories oldest first by when they were said, a session's messages as they were sent, opaque cursors
(a garbled one is a 422 naming ``cursor``), and the deprecated ``after`` still paging.

The same order on every store kind is the store contract's (tests/stores/test_contract.py)."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest

from cognis_memory.paging import Listing, encode_cursor
from cognis_memory.stores.values import PagePosition
from tests.api.conftest import KEY_A_READ, KEY_B, add

#: out of time order on purpose; two share a timestamp
SAID = [
    ("the third thing", "2025-01-03T10:00:00Z"),
    ("the first thing", "2025-01-01T10:00:00Z"),
    ("the fifth thing", "2025-01-05T10:00:00Z"),
    ("a second thing", "2025-01-02T10:00:00Z"),
    ("another second thing", "2025-01-02T10:00:00Z"),
    ("the fourth thing", "2025-01-04T10:00:00.000001Z"),
    ("the fourth thing, a microsecond earlier", "2025-01-04T10:00:00Z"),
]


async def _pages(c: httpx.AsyncClient, path: str, items: str, limit: int, **params: Any) -> list[list[dict]]:
    pages, paging = [], {}
    while True:
        r = await c.get(path, params={"limit": limit, **params, **paging})
        assert r.status_code == 200, r.text
        body = r.json()
        pages.append(body[items])
        if body["next_cursor"] is None:
            return pages
        paging = {"cursor": body["next_cursor"]}


def _in_time_order(rows: list[dict], time_field: str) -> list[str]:
    """Ids in (time, id) order, the times compared as instants."""
    from datetime import datetime

    return [r["id"] for r in sorted(rows, key=lambda r: (datetime.fromisoformat(r[time_field]), r["id"]))]


async def test_memories_are_listed_oldest_first_by_when_said_with_cursor_paging(api_env):
    user = "order-user"
    async with api_env.client() as c:
        for content, ts in SAID:  # one request each, so that their creation order is not their time order
            await add(c, user, {"content": content, "timestamp": ts})
        pages = await _pages(c, f"/v1/users/{user}/memories", "memories", 2)
        assert [len(p) for p in pages] == [2, 2, 2, 1]
        listed = [m for p in pages for m in p]
        assert len({m["id"] for m in listed}) == len(SAID)
        assert [m["id"] for m in listed] == _in_time_order(listed, "message_time")
        said = [m["content"].split(": ", 1)[-1] for m in listed]  # the stored text has the speaker in front
        assert said[0] == "the first thing" and set(said[1:3]) == {"a second thing", "another second thing"}
        assert said[3:] == ["the third thing", "the fourth thing, a microsecond earlier", "the fourth thing",
                            "the fifth thing"]  # fmt: skip

        # A page that ends exactly at the end still says so with the next (empty) page.
        r = await c.get(f"/v1/users/{user}/memories", params={"limit": len(SAID)})
        assert r.json()["next_cursor"] is not None
        last = await c.get(f"/v1/users/{user}/memories", params={"limit": 2, "cursor": r.json()["next_cursor"]})
        assert last.json() == {"memories": [], "next_cursor": None, "next_after": None}

        # The deprecated `after` (a memory id: the page's next_after) pages through the same order.
        seen, after = [], None
        while True:
            params: dict[str, Any] = {"limit": 3} | ({"after": after} if after else {})
            page = (await c.get(f"/v1/users/{user}/memories", params=params)).json()
            seen += [m["id"] for m in page["memories"]]
            after = page["next_after"]
            if after is None:
                break
        assert seen == [m["id"] for m in listed]

        # export walks the same order
        exported = [m.id async for m in api_env.service.export("tenant-a", user)]
        assert exported == seen


async def test_the_openapi_document_describes_cursor_and_deprecates_after(api_env):
    async with api_env.client() as c:
        spec = (await c.get("/openapi.json")).json()
    params = {p["name"]: p for p in spec["paths"]["/v1/users/{user_id}/memories"]["get"]["parameters"]}
    assert params["after"].get("deprecated") is True and "cursor" in params
    messages = spec["paths"]["/v1/users/{user_id}/sessions/{session_id}/messages"]["get"]
    assert "timestamp" in messages["description"] and "cursor" in {p["name"] for p in messages["parameters"]}


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


GARBLED = [
    "",
    "x",
    "not a cursor!",
    "%00",
    "A" * 401,
    _b64(b"not json"),
    _b64(b"\xff\xfe"),
    _b64(b"[1, 2]"),
    _b64(json.dumps({"l": "memories", "t": 1}).encode()),
    _b64(json.dumps({"l": "memories", "t": "1", "id": "abc"}).encode()),
    _b64(json.dumps({"l": "memories", "t": True, "id": "abc"}).encode()),
    _b64(json.dumps({"l": "memories", "t": 10**30, "id": "abc"}).encode()),
    _b64(json.dumps({"l": "memories", "t": 1, "id": "' OR 1=1 --"}).encode()),
    _b64(json.dumps({"l": "memories", "t": 1, "id": "abc", "x": 1}).encode()),
    encode_cursor(Listing.MESSAGES, PagePosition(__import__("datetime").datetime(2025, 1, 1), "abc")),
]


@pytest.mark.parametrize("cursor", GARBLED)
async def test_a_garbled_or_foreign_cursor_is_a_422_naming_cursor(api_env, cursor):
    async with api_env.client() as c:
        await add(c, "garbled-user", "something to list")
        r = await c.get("/v1/users/garbled-user/memories", params={"cursor": cursor})
        assert r.status_code == 422, r.text
        assert r.json()["error"]["field"] == "cursor"
        r = await c.get("/v1/users/garbled-user/sessions/s1/messages", params={"cursor": cursor})
        if cursor == GARBLED[-1]:  # a messages cursor is one there
            assert r.status_code == 200, r.text
        else:
            assert r.status_code == 422 and r.json()["error"]["field"] == "cursor", r.text


async def test_after_must_be_a_memory_of_the_user_and_not_given_with_cursor(api_env):
    async with api_env.client() as c:
        first = (await add(c, "after-user", "one", "two"))["memories"][0]["id"]
        theirs = (await add(c, "after-other", "three"))["memories"][0]["id"]
        page = (await c.get("/v1/users/after-user/memories", params={"limit": 1})).json()
        for params in ({"after": theirs}, {"after": "no-such-id"}, {"after": first, "cursor": page["next_cursor"]}):
            r = await c.get("/v1/users/after-user/memories", params=params)
            assert r.status_code == 422 and r.json()["error"]["field"] == "after", (params, r.text)


async def test_a_sessions_messages_come_back_as_sent_in_timestamp_order(api_env):
    user, path = "session-user", "/v1/users/session-user/sessions/chat-1/messages"
    sent = [
        {"content": f"[{i}] {content}", "timestamp": ts, "speaker": "Maya" if i % 2 else "Bot",
         "role": "assistant" if i % 2 == 0 else "user", "session_id": "chat-1", "client_message_id": f"m{i}"}
        for i, (content, ts) in enumerate(SAID)
    ]  # fmt: skip
    async with api_env.client() as c:
        await add(c, user, *sent[:3])
        await add(c, user, {"content": "in another session", "session_id": "chat-2"})
        await add(c, user, {"content": "in no session"})
        await add(c, "someone-else", {"content": "same session id, another user", "session_id": "chat-1"})
        async with api_env.client(KEY_B) as other_tenant:
            await add(other_tenant, user, {"content": "same user and session, another tenant", "session_id": "chat-1"})
        await add(c, user, *sent[3:])

        async with api_env.client(KEY_A_READ) as reader:  # a read-only key reads them
            pages = await _pages(reader, path, "messages", 3)
        got = [m for p in pages for m in p]
        assert [len(p) for p in pages] == [3, 3, 1]
        assert [m["id"] for m in got] == _in_time_order(got, "timestamp")
        # as they were sent: the text unchanged (no speaker prefix, no date note), with speaker, role and ids
        by_client = {m["client_message_id"]: m for m in got}
        assert set(by_client) == {s["client_message_id"] for s in sent}
        for s in sent:
            m = by_client[s["client_message_id"]]
            assert (m["content"], m["speaker"], m["role"], m["session_id"]) == (
                s["content"], s["speaker"], s["role"], "chat-1"
            )  # fmt: skip
        assert [m["content"][:3] for m in got][:1] == ["[1]"] and got[-1]["content"].startswith("[2]")
        same_time = [m for m in got if m["timestamp"].startswith("2025-01-02T10:00:00")]
        assert [m["id"] for m in same_time] == sorted(m["id"] for m in same_time) and len(same_time) == 2

        assert (await c.get("/v1/users/session-user/sessions/no-such-session/messages")).json() == {
            "messages": [],
            "next_cursor": None,
        }
        r = await c.get("/v1/users/session-user/sessions/bad session/messages")
        assert r.status_code == 422 and r.json()["error"]["field"] == "session_id"
        r = await c.get(path, params={"limit": 0})
        assert r.status_code == 422 and r.json()["error"]["field"] == "limit"
