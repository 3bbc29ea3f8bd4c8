"""Bad input on every store, through the API and the CLI (issue #6, part 2).

Injection strings for SQL, FTS5 and OpenSearch query syntax, control characters, invalid
Unicode, extreme timestamps, unknown enum values, deep JSON and foreign or wildcard ids, on
the embedded, dual and OpenSearch-only stores. Every case answers a 4xx with an error naming
the problem (or a 200 for a search with strange text, whose results are only the caller's);
never a 5xx; and the data of every user (the caller's, a same-tenant victim's and another
tenant's) is exactly unchanged afterwards (export before == export after), except for the
writes that were accepted, which come back verbatim.

The targeted validation of single API fields lives in tests/api; this module is about the
stores behind it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from cognis_memory.api.app import create_app
from cognis_memory.serialization import memory_to_dict
from cognis_memory.service import MessageBody
from tests.reliability.helpers import make_service, seg
from tests.store_kinds import KINDS

pytestmark = pytest.mark.integration

TENANT, OTHER = "bad", "other"
SQL = [
    "'; DROP TABLE memories; --",
    "x' OR '1'='1",
    "1; DELETE FROM messages WHERE 1=1",
    '" OR tenant_id IS NOT NULL --',
    "%' UNION SELECT key_hash, tenant_id FROM api_keys --",
    "honey'); UPDATE memories SET user_id='attacker' WHERE ('1'='1",
]
FTS5 = [
    "owner : * OR content : bees",
    "NEAR(bees lisbon, 5)",
    '"unbalanced quote',
    "content:bees",
    "bees* OR ^lisbon",
    "- bees AND OR NOT NOT",
    "{owner content}: bees",
    'memory_id : "x" OR owner : ownabc',
]
OPENSEARCH = [
    "*:*",
    "tenant_id:* OR user_id:victim",
    '{"match_all": {}}',
    '"}}, {"match_all": {}}, {"term": {"user_id": "victim"}}',
    "bees~2 AND /.*/ AND _exists_:content",
    "((((((((((((((((",
    "user_id:victim^100 OR tenant_id:other",
]
WEIRD = ["ü ℌ ﷽ 𝕏 🐝", "\u202e\u200b bees \u2066", "\x01\x07\x1b[31m bees", "a" * 4096, "   bees   ", "ñ" * 2000]
ATTACK_QUERIES = SQL + FTS5 + OPENSEARCH + WEIRD
WILDCARD_IDS = ["*", "victim*", "%", "_", "' OR '1'='1", "victim' --", "..", "victim\\", "[a-z]*"]


def raw(body: Any) -> bytes:
    """JSON with every non-ASCII character escaped, so lone surrogates survive encoding."""
    return json.dumps(body).encode()


class Env:
    def __init__(self, handle, svc, client: httpx.AsyncClient, key: str) -> None:
        self.handle, self.svc, self.client, self.key = handle, svc, client, key
        self.added: list[str] = []  # contents of accepted attacker writes

    async def exports(self) -> dict[str, list[dict[str, Any]]]:
        out = {}
        for tenant, user in [(TENANT, "attacker"), (TENANT, "victim"), (OTHER, "victim")]:
            out[f"{tenant}/{user}"] = [memory_to_dict(m) async for m in self.svc.export(tenant, user)]
        return out

    async def call(self, method: str, path: str, body: Any = None, *, content: bytes | None = None,
                   params: dict[str, Any] | None = None) -> httpx.Response:  # fmt: skip
        headers = {"X-API-Key": self.key}
        if body is not None:
            content = raw(body)
        if content is not None:
            headers["content-type"] = "application/json"
        return await self.client.request(method, path, content=content, params=params, headers=headers)


def assert_clear_error(r: httpx.Response, what: str) -> None:
    assert 400 <= r.status_code < 500, f"{what}: {r.status_code} {r.text[:300]}"
    err = r.json()["error"]
    assert err["code"] and err["message"], f"{what}: unclear error {err}"
    if r.status_code == 422:
        assert err["field"], f"{what}: a 422 must name the field: {err}"
        assert err["field"].split("[")[0].split(".")[0] in err["message"], (
            f"{what}: message does not name the field: {err}"
        )


@pytest_asyncio.fixture(scope="module")
async def env(any_store, embedder):
    svc = make_service(any_store.store, embedder)
    await svc.add_messages(TENANT, "victim", [MessageBody(content="I keep bees in Lisbon zq00000000b1", speaker="Vic")])
    await svc.add_messages(OTHER, "victim", [MessageBody(content="I keep bees in Porto zq00000000b2", speaker="Oth")])
    await svc.add_messages(TENANT, "attacker", [MessageBody(content="I like honey zq00000000a1", speaker="Att")])
    key = await svc.create_api_key(TENANT)
    app = create_app(svc, manage_lifecycle=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bad.test") as client:
        yield Env(any_store, svc, client, key)


async def test_injection_queries_find_only_the_callers_data(env):
    before = await env.exports()
    for q in ATTACK_QUERIES:
        for recipe in (None, "bm25"):
            body = {"query": q, "limit": 50, "include_history": True, "explain": True}
            if recipe:
                body["recipe"] = recipe
            r = await env.call("POST", "/v1/users/attacker/search", body)
            assert r.status_code == 200, f"{env.handle.kind} search {q[:60]!r}: {r.status_code} {r.text[:300]}"
            text = r.text
            assert "zq00000000b1" not in text and "zq00000000b2" not in text, (
                f"{env.handle.kind}: {q!r} leaked: {text[:400]}"
            )
            assert all(h["memory"]["user_id"] == "attacker" for h in r.json()["results"])
    assert await env.exports() == before


async def test_injection_in_filters_and_ids_is_rejected_or_harmless(env):
    before = await env.exports()
    searches = [
        ({"query": "bees", "session_id": "' OR 1=1 --"}, 422),  # not an id (docs/design-notes.md)
        ({"query": "bees", "agent_id": "*"}, 422),
        ({"query": "bees", "agent_id": "victim' OR '1'='1"}, 422),
        ({"query": "bees", "session_id": "s1' OR '1'='1"}, 422),
        ({"query": "bees", "agent_id": "a1|victim"}, 200),  # a valid id, matched as a whole
        ({"query": "bees", "categories": ["health' OR '1'='1"]}, 422),
        ({"query": "bees", "categories": ["travel", "unknown_category"]}, 422),
        ({"query": "bees", "kinds": ["raw OR 1"]}, 422),
        ({"query": "bees", "scopes": ["USER'"]}, 422),
        ({"query": "bees", "session_id": "s\x00"}, 422),
        ({"query": "bees", "session_id": "s\u202e"}, 422),
        ({"query": "bees", "agent_id": "a\ud800"}, 422),
        ({"query": "bees", "recipe": "'; DROP TABLE memories; --"}, 422),
        ({"query": "bees", "time_from": "0001-01-01T00:00:00Z"}, 422),
        ({"query": "bees", "time_to": "9999-12-31T23:59:59Z"}, 422),
        ({"query": "bees", "time_from": "1899-12-31T23:59:59Z"}, 422),
        ({"query": "bees", "time_from": "2024-02-30T00:00:00Z"}, 422),
        ({"query": "bees", "time_from": "2024-06-01T00:00:00Z", "time_to": "2024-01-01T00:00:00Z"}, 422),
        ({"query": "bees", "time_from": 1e20}, 422),
        ({"query": "bees", "time_from": "1970-01-01T00:00:00Z", "time_to": "2199-12-31T23:59:59+14:00"}, 200),
        ({"query": "bees", "now": "2199-12-31T00:00:00-12:00"}, 200),
        ({"query": "bees", "now": "10000-01-01T00:00:00Z"}, 422),
        ({"query": "bees\x00"}, 422),
        ({"query": "bees \ud800"}, 422),
        ({"query": "b" * 5000}, 422),
        ({"query": "   "}, 422),
        ({"query": "bees", "limit": 0}, 422),
        ({"query": "bees", "limit": 10**30}, 422),
    ]
    for body, expected in searches:
        r = await env.call("POST", "/v1/users/attacker/search", body)
        what = f"{env.handle.kind} search {str(body)[:120]}"
        if expected == 200:
            assert r.status_code == 200, f"{what}: {r.status_code} {r.text[:300]}"
            assert "zq00000000b" not in r.text
        else:
            assert_clear_error(r, what)
    for mid in WILDCARD_IDS + ["x" * 129, "a\x00", "\u202e"]:
        for method, suffix, body in [("GET", "", None), ("GET", "/history", None), ("PATCH", "", {"content": "pwned"}),
                                     ("DELETE", "", None)]:  # fmt: skip
            r = await env.call(method, f"/v1/users/attacker/memories/{seg(mid)}{suffix}", body)
            assert r.status_code in (404, 422), (
                f"{env.handle.kind} {method} memory {mid!r}: {r.status_code} {r.text[:200]}"
            )
            assert_clear_error(r, f"{method} {mid!r}")
        r = await env.call("GET", f"/v1/users/attacker/jobs/{seg(mid)}")
        assert r.status_code in (404, 422), r.text
    for after in ["' OR '1'='1", "%", "\x00"]:
        r = await env.call("GET", "/v1/users/attacker/memories", params={"after": after, "include_history": "true"})
        assert r.status_code in (200, 422), f"{env.handle.kind} list after={after!r}: {r.status_code} {r.text[:200]}"
        if r.status_code == 200:
            assert all(m["user_id"] == "attacker" for m in r.json()["memories"])
    for cursor in ["' OR '1'='1", "%", "\x00", "eyJsIjoibWVtb3JpZXMiLCJ0IjowLCJpZCI6IioifQ"]:  # the last: id "*"
        for path in ("/v1/users/attacker/memories", "/v1/users/attacker/sessions/s/messages"):
            r = await env.call("GET", path, params={"cursor": cursor})
            assert r.status_code == 422 and r.json()["error"]["field"] == "cursor", (
                f"{env.handle.kind} {path} {cursor!r}"
            )
    for user in WILDCARD_IDS + ["VICTIM", "victim ", " victim", "vict\u0131m"]:  # forget must never reach the victims
        r = await env.call("DELETE", f"/v1/users/{seg(user)}")
        assert r.status_code in (200, 422, 404), f"{env.handle.kind} forget {user!r}: {r.status_code} {r.text[:200]}"
    assert await env.exports() == before


async def test_bad_writes_are_refused_and_change_nothing(env):
    mine = [m async for m in env.svc.export(TENANT, "attacker")]
    target = mine[0].id
    cases: list[tuple[str, str, Any, bytes | None]] = [
        ("POST", "/messages", {"messages": [{"content": "bad\x00nul"}]}, None),
        ("POST", "/messages", {"messages": [{"content": "bad \ud800 surrogate"}]}, None),
        ("POST", "/messages", {"messages": [{"content": "x", "speaker": "a\x00"}]}, None),
        ("POST", "/messages", {"messages": [{"content": "x", "timestamp": "0001-01-01T00:00:00Z"}]}, None),
        ("POST", "/messages", {"messages": [{"content": "x", "timestamp": "2200-01-02T00:00:00Z"}]}, None),
        ("POST", "/messages", {"messages": [{"content": "x", "timestamp": "1899-12-31T23:59:59Z"}]}, None),
        ("POST", "/messages", {"messages": [{"content": "x", "timestamp": "2024-01-01T00:00:00+25:00"}]}, None),
        ("POST", "/messages", {"messages": [{"content": "x", "timestamp": -1e300}]}, None),
        ("POST", "/messages", {"messages": [{"content": "x", "scope": "GLOBAL"}]}, None),
        ("POST", "/messages", {"messages": [{"content": "x", "scope": "CONTEXT"}]}, None),  # no session
        ("POST", "/messages", {"messages": [{"content": "x", "role": "admin"}]}, None),
        ("POST", "/messages", {"messages": [{"content": "x", "client_message_id": "c\x1f"}]}, None),
        ("POST", "/messages", {"messages": [{"content": "x", "session_id": " s"}]}, None),
        ("POST", "/messages", {"messages": [{"content": "x", "agent_id": "a" * 129}]}, None),
        ("POST", "/messages", {"messages": [{"content": "x" * (512 * 1024 + 1)}]}, None),
        ("POST", "/messages", {"messages": [{"content": "x", "metadata": {"raw_memory_id": target}}]}, None),
        ("POST", "/messages", {"messages": [{"content": "x", "speaker": "Vic\u202e"}]}, None),
        ("POST", "/messages", {"messages": [{"content": "x", "metadata": _deep(20)}]}, None),
        ("POST", "/messages", {"messages": [{"content": "x", "metadata": {"k": "v" * 9000}}]}, None),
        ("POST", "/messages", {"messages": [{"content": "ok"}] * 501}, None),
        ("POST", "/messages", {"messages": []}, None),
        ("POST", "/messages", {"messages": [{"content": "x", "tenant_id": OTHER}]}, None),
        ("POST", "/messages", None, b'{"messages": [{"content": "\xff\xfe invalid utf-8"}]}'),
        (
            "POST",
            "/messages",
            None,
            b'{"messages": [{"content": "x", "metadata": ' + b'{"a":' * 3000 + b"1" + b"}" * 3000 + b"}]}",
        ),
        ("POST", "/messages", None, b'{"messages": [{"content": "truncated'),
        # JSON has no NaN or Infinity (Python's parser takes them; PostgreSQL's jsonb and OpenSearch refuse them)
        ("POST", "/messages", None, b'{"messages": [{"content": "x", "metadata": {"n": NaN}}]}'),
        ("POST", "/messages", None, b'{"messages": [{"content": "x", "metadata": {"n": [1, {"m": -Infinity}]}}]}'),
        ("PATCH", f"/memories/{target}", {"content": "bad\x00"}, None),
        ("PATCH", f"/memories/{target}", {"content": "\ud800"}, None),
        ("PATCH", f"/memories/{target}", {"category": "nope"}, None),
        ("PATCH", f"/memories/{target}", {"category": "health' OR '1'='1"}, None),
        ("PATCH", f"/memories/{target}", {"event_time": "0001-01-01T00:00:00Z"}, None),
        ("PATCH", f"/memories/{target}", {}, None),
        ("PATCH", f"/memories/{target}", {"content": "x", "user_id": "victim"}, None),
    ]
    before = await env.exports()
    for method, path, body, content in cases:
        r = await env.call(method, "/v1/users/attacker" + path, body, content=content)
        assert_clear_error(r, f"{env.handle.kind} {method} {path} {str(body or content)[:100]}")
        assert await env.exports() == before, f"{env.handle.kind}: {method} {path} {str(body)[:80]} changed data"


async def test_metadata_with_nul_or_surrogates_is_stored_or_refused_never_500(env):
    """JSON metadata is stored per store (SQLite text, PostgreSQL jsonb, OpenSearch object)."""
    for meta in [{"k": "nul\x00inside"}, {"nul\x00key": 1}, {"k": "\ud800"}, {"\udfff": "x"}, {"k": "\x01\x1f"}]:
        before = await env.exports()
        r = await env.call(
            "POST", "/v1/users/attacker/messages", {"messages": [{"content": "meta zq00000000a1", "metadata": meta}]}
        )
        what = f"{env.handle.kind} metadata {meta!r}"
        assert r.status_code in (201, 422), f"{what}: {r.status_code} {r.text[:300]}"
        if r.status_code == 422:
            assert_clear_error(r, what)
            assert await env.exports() == before, f"{what}: a refused write changed data"


async def test_injection_content_is_stored_verbatim_and_isolated(env):
    before = await env.exports()
    texts = [f"{t} zq00000000a1" for t in SQL[:3] + FTS5[:3] + OPENSEARCH[:3] + ["\x01\x07 control", "ü ℌ 🐝"]]
    r = await env.call("POST", "/v1/users/attacker/messages",
                       {"messages": [{"content": t, "speaker": "Att", "client_message_id": f"inj-{i}"} for i, t in enumerate(texts)]})  # fmt: skip
    assert r.status_code == 201, r.text
    after = await env.exports()
    for k in before:
        if k != f"{TENANT}/attacker":
            assert after[k] == before[k], f"{env.handle.kind}: an attacker write changed {k}"
    new = [m for m in after[f"{TENANT}/attacker"] if m["id"] not in {b["id"] for b in before[f"{TENANT}/attacker"]}]
    assert sorted(m["content"] for m in new) == sorted(texts)  # stored as said
    assert {m["speaker"] for m in new} == {"Att"}
    r = await env.call("POST", "/v1/users/attacker/search", {"query": SQL[0], "limit": 50, "recipe": "bm25"})
    assert r.status_code == 200 and "zq00000000b" not in r.text


def _deep(n: int) -> dict[str, Any]:
    d: dict[str, Any] = {"leaf": 1}
    for _ in range(n):
        d = {"a": d}
    return d


# -- the CLI, on the same stores ------------------------------------------------------------------
CLI_CASES = [
    ("not json at all", ".json", 2),
    ('{"user_id": "attacker", "messages": [{"content": "x", "role": "root"}]}', ".json", 2),
    ('{"user_id": "attacker", "messages": [{"content": "x", "scope": "FOO"}]}', ".json", 2),
    ('{"user_id": "attacker", "messages": [{"content": "x", "timestamp": "0001-01-01T00:00:00Z"}]}', ".json", 2),
    ('{"user_id": "attacker", "messages": [{"content": "x", "timestamp": 12345}]}', ".json", 2),
    ('{"user_id": "attacker", "messages": [{"content": "nul\\u0000"}]}', ".json", 2),
    ('{"user_id": "attacker", "messages": [{"content": "\\ud800"}]}', ".json", 2),
    ('{"user_id": "atta\\u0007cker", "messages": [{"content": "x"}]}', ".json", 2),
    ('{"user_id": "attacker", "messages": [{"content": "x", "metadata": [1, 2]}]}', ".json", 2),
    ('{"user_id": "attacker", "messages": [{"content": "x", "speaker": 7}]}', ".json", 2),
    ('{"user_id": "attacker", "messages": [{"content": "x", "tenant_id": "other"}]}', ".json", 2),
    ('{"content": "ok"}\n{"content": "broken', ".jsonl", 2),
    ('{"content": "ok"}\n[1, 2]', ".jsonl", 2),
]


def _cli_env(monkeypatch, handle) -> None:
    """The CLI's settings for ``handle``'s store; it builds its own default embedder (the same offline model
    as the ``embedder`` fixture), as a user's CLI does."""
    for name, value in KINDS[handle.kind].environment(handle).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("COGNIS_METRICS_ENABLED", "false")
    monkeypatch.setenv("COGNIS_LOG_LEVEL", "WARNING")


def _run_cli(argv: list[str]) -> int:
    """``cognis-memory`` in a worker thread (it calls asyncio.run, and this test's loop is running)."""
    from cognis_memory.cli import main

    return main(argv)


async def test_cli_bad_files_and_queries_exit_cleanly_and_change_nothing(env, monkeypatch, tmp_path, capfd):
    _cli_env(monkeypatch, env.handle)
    before = await env.exports()
    for i, (text, suffix, code) in enumerate(CLI_CASES):
        f = Path(tmp_path) / f"case{i}{suffix}"
        f.write_text(text, encoding="utf-8")
        rc = await asyncio.to_thread(
            _run_cli, ["import", str(f), "--tenant", TENANT, "--user", "attacker", "--quiet", "--no-extract"]
        )
        err = capfd.readouterr().err
        assert rc == code, f"{env.handle.kind} CLI import {text[:80]!r}: exit {rc}, stderr {err[-500:]}"
        assert "Traceback" not in err and "error:" in err, f"{env.handle.kind}: {err[-500:]}"
        assert await env.exports() == before, f"{env.handle.kind}: a refused import changed data: {text[:80]!r}"
    bad = Path(tmp_path) / "latin1.json"
    bad.write_bytes(b'{"user_id": "attacker", "messages": [{"content": "caf\xe9"}]}')
    rc = await asyncio.to_thread(_run_cli, ["import", str(bad), "--tenant", TENANT, "--quiet", "--no-extract"])
    err = capfd.readouterr().err
    assert rc in (1, 2) and "Traceback" not in err, err[-500:]
    for q in SQL[:2] + FTS5[:2] + OPENSEARCH[:2]:
        rc = await asyncio.to_thread(_run_cli, ["search", q, "--tenant", TENANT, "--user", "attacker", "--limit", "50"])
        out = capfd.readouterr()
        assert rc == 0, f"{env.handle.kind} CLI search {q!r}: {out.err[-500:]}"
        assert "zq00000000b" not in out.out
        assert all(r["user_id"] == "attacker" for r in json.loads(out.out)["results"])
    for argv in (["add", "x", "--user", "a\x00"], ["add", "x", "--user", "attacker", "--timestamp", "0001-01-01"],
                 ["search", "\x00", "--user", "attacker"], ["forget-user", "--user", "*", "--yes"],
                 ["export", "--user", "victim*", "--tenant", TENANT]):  # fmt: skip
        rc = await asyncio.to_thread(_run_cli, argv)
        out = capfd.readouterr()
        assert "Traceback" not in out.err, out.err[-500:]
        assert "zq00000000b" not in out.out
    assert await env.exports() == before


# -- the Python client ----------------------------------------------------------------------------
def test_python_client_cannot_be_steered_to_another_route_by_an_id(tmp_path, embedder):
    """Found here: the client put ids into URLs unencoded, so ``delete("alice", "..")`` was sent as
    ``DELETE /v1/users/alice`` (HTTP clients resolve dot segments) and forgot alice, and
    ``forget_user("../users/bob")`` forgot bob. Ids are now encoded as single path segments."""
    from starlette.testclient import TestClient

    from cognis_memory.client import MemoryAPIError, MemoryClient
    from tests.reliability.helpers import DIM_SHORT
    from tests.store_kinds import build_embedded

    handle = build_embedded(tmp_path / "client.db", embedder.dim, DIM_SHORT)
    svc = make_service(handle.store, embedder)

    async def setup() -> str:
        await svc.start(run_worker=False)
        for user in ("alice", "bob"):
            await svc.add_messages(TENANT, user, [MessageBody(content=f"I am {user} zq00000000c1", speaker=user)])
        return await svc.create_api_key(TENANT)

    async def export(user: str) -> list[dict[str, Any]]:
        return [memory_to_dict(m) async for m in svc.export(TENANT, user)]

    key = asyncio.run(setup())
    before = {u: asyncio.run(export(u)) for u in ("alice", "bob")}
    alice_id = before["alice"][0]["id"]
    try:
        with TestClient(create_app(svc, manage_lifecycle=False), base_url="http://client.test") as http:
            mem = MemoryClient("http://client.test", key, http_client=http)
            attempts = [
                lambda: mem.delete("alice", ".."),
                lambda: mem.delete("alice", "."),
                lambda: mem.get("alice", "."),
                lambda: mem.update("alice", "..", content="pwned"),
                lambda: mem.forget_user("../users/bob"),
                lambda: mem.forget_user("x/.."),
                lambda: mem.forget_user(f"bob/memories/{alice_id}"),
                lambda: mem.history("bob/../alice", alice_id),
                lambda: mem.delete("bob/../alice", alice_id),
                lambda: mem.job("alice", "../../bob"),
            ]
            for i, attempt in enumerate(attempts):
                with pytest.raises(MemoryAPIError) as e:
                    attempt()
                assert e.value.status in (404, 405, 422), f"attempt {i}: {e.value}"
                assert {u: asyncio.run(export(u)) for u in ("alice", "bob")} == before, f"attempt {i} changed data"
            assert mem.get("alice", alice_id).id == alice_id  # the ordinary path still works
    finally:
        asyncio.run(svc.close())
