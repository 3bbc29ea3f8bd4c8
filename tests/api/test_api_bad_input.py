"""Bad input through the HTTP API: each case is a 4xx that names the problem, and nothing stored changes.

The module's service holds seeded data of two tenants; after every case the listing of
every seeded user and the row counts of every table are compared with the state before.
"""

from __future__ import annotations

from typing import Any

import pytest
import pytest_asyncio

from tests.api.conftest import KEY_A, KEY_B, add, build_env, listing, search

USER = "victim"
SEEDED = [("key-a", "victim"), ("key-a", "bystander"), ("key-b", "victim")]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def seeded(api_env) -> dict[str, Any]:
    async with api_env.client(KEY_A) as a, api_env.client(KEY_B) as b:
        mine = await add(a, USER, "I am allergic to peanuts", "I play the trumpet in a brass band")
        await add(a, "bystander", "foo OR bar; DROP TABLE memories; -- tenant_id:other content:*")
        theirs = await add(b, USER, "other tenant secret: tenant_id other content NEAR the vault")
    return {"memory_id": mine["memories"][0]["id"], "theirs": {m["id"] for m in theirs["memories"]}}


async def _state(api_env) -> tuple[Any, ...]:
    lists = []
    for key, user in SEEDED:
        async with api_env.client(key) as c:
            lists.append(await listing(c, user))
    return (lists, api_env.table_counts())


def _msg(**fields: Any) -> dict[str, Any]:
    return {"messages": [{"content": "hello", **fields}]}


def _nested(depth: int) -> bytes:
    return b'{"messages":[{"content":"x","metadata":' + b'{"a":' * depth + b"1" + b"}" * depth + b"}]}"


MSGS = f"/v1/users/{USER}/messages"
SEARCH = f"/v1/users/{USER}/search"
MEMORY = f"/v1/users/{USER}/memories/{{memory_id}}"
CONTEXT = f"/v1/users/{USER}/context"

# (id, method, path, json body or raw bytes, status, field named in the error)
CASES: list[tuple[str, str, str, Any, int, str]] = [
    ("empty-content", "POST", MSGS, _msg(content=""), 422, "messages[0].content"),
    ("whitespace-content", "POST", MSGS, _msg(content=" \n\t  "), 422, "messages[0].content"),
    ("oversized-content", "POST", MSGS, _msg(content="a" * (512 * 1024 + 1)), 422, "messages[0].content"),
    ("oversized-multibyte", "POST", MSGS, _msg(content="é" * (256 * 1024 + 1)), 422, "messages[0].content"),
    ("nul-in-content", "POST", MSGS, _msg(content="a\x00b"), 422, "messages[0].content"),
    ("lone-surrogate", "POST", MSGS, b'{"messages":[{"content":"\\ud800 x"}]}', 422, "messages[0].content"),
    (
        "surrogate-speaker",
        "POST",
        MSGS,
        b'{"messages":[{"content":"x","speaker":"\\udfff"}]}',
        422,
        "messages[0].speaker",
    ),
    ("unknown-top-level-field", "POST", MSGS, {"messages": [{"content": "x"}], "bogus": 1}, 422, "bogus"),
    ("unknown-nested-field", "POST", MSGS, _msg(colour="red"), 422, "messages[0].colour"),
    ("unknown-search-field", "POST", SEARCH, {"query": "x", "top_k": 5}, 422, "top_k"),
    ("unknown-patch-field", "PATCH", MEMORY, {"content": "x", "version": 7}, 422, "version"),
    ("user-id-too-long", "POST", f"/v1/users/{'u' * 129}/messages", _msg(), 422, "user_id"),
    ("user-id-control-char", "POST", "/v1/users/vic%07tim/messages", _msg(), 422, "user_id"),
    ("user-id-surrounding-space", "POST", "/v1/users/%20victim/messages", _msg(), 422, "user_id"),
    ("session-id-control-char", "POST", MSGS, _msg(session_id="s\x1b[31m"), 422, "messages[0].session_id"),
    ("client-id-too-long", "POST", MSGS, _msg(client_message_id="c" * 129), 422, "messages[0].client_message_id"),
    ("agent-id-empty", "POST", MSGS, _msg(agent_id=""), 422, "messages[0].agent_id"),
    ("memory-id-too-long", "GET", f"/v1/users/{USER}/memories/{'m' * 129}", None, 422, "memory_id"),
    ("job-id-control-char", "GET", f"/v1/users/{USER}/jobs/j%0Aob", None, 422, "job_id"),
    ("search-session-too-long", "POST", SEARCH, {"query": "x", "session_id": "s" * 129}, 422, "session_id"),
    ("timestamp-not-a-date", "POST", MSGS, _msg(timestamp="yesterday"), 422, "messages[0].timestamp"),
    ("timestamp-bad-month", "POST", MSGS, _msg(timestamp="2024-13-45T25:00:00Z"), 422, "messages[0].timestamp"),
    ("timestamp-number-overflow", "POST", MSGS, _msg(timestamp=1e300), 422, "messages[0].timestamp"),
    ("timestamp-year-1", "POST", MSGS, _msg(timestamp="0001-01-01T00:00:00Z"), 422, "messages[0].timestamp"),
    ("timestamp-year-9999", "POST", MSGS, _msg(timestamp="9999-12-31T23:59:59Z"), 422, "messages[0].timestamp"),
    ("search-time-from-year-1", "POST", SEARCH, {"query": "x", "time_from": "0001-01-01T00:00:00Z"}, 422, "time_from"),
    ("search-now-year-9999", "POST", SEARCH, {"query": "x", "now": "9999-12-31T00:00:00Z"}, 422, "now"),
    ("patch-event-time-year-9999", "PATCH", MEMORY, {"event_time": "9999-01-01T00:00:00Z"}, 422, "event_time"),
    ("unknown-scope", "POST", MSGS, _msg(scope="GLOBAL"), 422, "messages[0].scope"),
    ("unknown-role", "POST", MSGS, _msg(role="god"), 422, "messages[0].role"),
    ("unknown-mode", "POST", MSGS, {"messages": [{"content": "x"}], "mode": "later"}, 422, "mode"),
    ("unknown-category", "POST", SEARCH, {"query": "x", "categories": ["gossip"]}, 422, "categories[0]"),
    ("unknown-search-scope", "POST", SEARCH, {"query": "x", "scopes": ["USER", "WORLD"]}, 422, "scopes[1]"),
    ("unknown-kind", "POST", SEARCH, {"query": "x", "kinds": ["summary"]}, 422, "kinds[0]"),
    ("unknown-patch-category", "PATCH", MEMORY, {"category": "gossip"}, 422, "category"),
    ("unknown-recipe", "POST", SEARCH, {"query": "x", "recipe": "magic"}, 422, "recipe"),
    ("search-limit-0", "POST", SEARCH, {"query": "x", "limit": 0}, 422, "limit"),
    ("search-limit-101", "POST", SEARCH, {"query": "x", "limit": 101}, 422, "limit"),
    ("search-limit-string", "POST", SEARCH, {"query": "x", "limit": "ten"}, 422, "limit"),
    ("list-limit-0", "GET", f"/v1/users/{USER}/memories?limit=0", None, 422, "limit"),
    ("list-limit-1001", "GET", f"/v1/users/{USER}/memories?limit=1001", None, 422, "limit"),
    ("empty-query", "POST", SEARCH, {"query": "   "}, 422, "query"),
    ("query-too-long", "POST", SEARCH, {"query": "word " * 1000}, 422, "query"),
    ("query-surrogate", "POST", SEARCH, b'{"query":"where \\ud83d is it"}', 422, "query"),
    ("missing-query", "POST", SEARCH, {"limit": 3}, 422, "query"),
    ("no-messages", "POST", MSGS, {"messages": []}, 422, "messages"),
    ("too-many-messages", "POST", MSGS, {"messages": [{"content": f"m{i}"} for i in range(501)]}, 422, "messages"),
    ("context-without-session", "POST", MSGS, _msg(scope="CONTEXT"), 422, "messages[0].session_id"),
    (
        "time-from-after-time-to",
        "POST",
        SEARCH,
        {"query": "x", "time_from": "2025-02-01T00:00:00Z", "time_to": "2025-01-01T00:00:00Z"},
        422,
        "time_from",
    ),
    ("metadata-not-object", "POST", MSGS, _msg(metadata=[1, 2]), 422, "messages[0].metadata"),
    ("metadata-too-large", "POST", MSGS, _msg(metadata={"k": "v" * 9000}), 422, "messages[0].metadata"),
    ("metadata-nested-deep", "POST", MSGS, _nested(40), 422, "messages[0].metadata"),
    ("body-nested-very-deep", "POST", MSGS, _nested(5000), 422, "messages[0].metadata"),
    ("invalid-utf8", "POST", MSGS, b'{"messages":[{"content":"caf\xe9 \xff\xfe"}]}', 400, "body"),
    ("not-json", "POST", MSGS, b"messages=hello", 422, "body"),
    ("truncated-json", "POST", MSGS, b'{"messages":[{"content":"x"', 422, "body"),
    ("body-is-a-list", "POST", SEARCH, b'["query"]', 422, "body"),
    ("content-wrong-type", "POST", MSGS, _msg(content=["a", "b"]), 422, "messages[0].content"),
    ("patch-nothing", "PATCH", MEMORY, {}, 422, "body"),
    ("patch-empty-content", "PATCH", MEMORY, {"content": "  "}, 422, "content"),
    # -- issue 11: reserved metadata keys (the server owns ids), strict types, speakers, identifiers, context
    (
        "metadata-raw-memory-id",
        "POST",
        MSGS,
        _msg(metadata={"raw_memory_id": "../../etc/passwd x"}),
        422,
        "messages[0].metadata.raw_memory_id",
    ),
    ("metadata-scope", "POST", MSGS, _msg(metadata={"scope": "CONTEXT"}), 422, "messages[0].metadata.scope"),
    ("metadata-role", "POST", MSGS, _msg(metadata={"role": "system"}), 422, "messages[0].metadata.role"),
    ("metadata-part", "POST", MSGS, _msg(metadata={"part": 1, "parts": 9}), 422, "messages[0].metadata.part"),
    ("search-limit-true", "POST", SEARCH, {"query": "x", "limit": True}, 422, "limit"),
    ("search-limit-numeric-string", "POST", SEARCH, {"query": "x", "limit": "5"}, 422, "limit"),
    ("search-limit-float", "POST", SEARCH, {"query": "x", "limit": 5.0}, 422, "limit"),
    ("search-explain-string", "POST", SEARCH, {"query": "x", "explain": "yes"}, 422, "explain"),
    ("search-history-number", "POST", SEARCH, {"query": "x", "include_history": 1}, 422, "include_history"),
    ("search-query-number", "POST", SEARCH, {"query": 42}, 422, "query"),
    ("context-with-ids-string", "POST", CONTEXT, {"message": "x", "with_ids": "yes"}, 422, "with_ids"),
    ("context-max-tokens-string", "POST", CONTEXT, {"message": "x", "max_tokens": "500"}, 422, "max_tokens"),
    ("context-empty-message", "POST", CONTEXT, {"message": "  "}, 422, "message"),
    ("context-message-too-long", "POST", CONTEXT, {"message": "word " * 1000}, 422, "message"),
    ("context-no-query", "POST", CONTEXT, {"max_tokens": 500}, 422, "query"),
    ("context-query-number", "POST", CONTEXT, {"query": 42}, 422, "query"),
    ("context-empty-query", "POST", CONTEXT, {"query": "  ", "message": "  "}, 422, "query"),
    ("context-query-too-long", "POST", CONTEXT, {"query": "word " * 1000}, 422, "query"),
    ("context-query-and-message-differ", "POST", CONTEXT, {"query": "x", "message": "y"}, 422, "message"),
    ("timestamp-unix-seconds", "POST", MSGS, _msg(timestamp=1_700_000_000), 422, "messages[0].timestamp"),
    ("speaker-number", "POST", MSGS, _msg(speaker=7), 422, "messages[0].speaker"),
    ("speaker-bidi-override", "POST", MSGS, _msg(speaker="Ma\u202eya"), 422, "messages[0].speaker"),
    ("speaker-zero-width", "POST", MSGS, _msg(speaker="\u200bMaya"), 422, "messages[0].speaker"),
    ("speaker-newline", "POST", MSGS, _msg(speaker="Maya\nSystem"), 422, "messages[0].speaker"),
    ("speaker-surrounding-space", "POST", MSGS, _msg(speaker=" Maya"), 422, "messages[0].speaker"),
    ("user-id-cyrillic-lookalike", "POST", "/v1/users/%D0%B0lice/messages", _msg(), 422, "user_id"),
    ("user-id-accented", "POST", "/v1/users/%C3%A0lice/messages", _msg(), 422, "user_id"),
    ("user-id-inner-space", "POST", "/v1/users/al%20ice/messages", _msg(), 422, "user_id"),
    ("session-id-fullwidth", "POST", MSGS, _msg(session_id="ｓ1"), 422, "messages[0].session_id"),
    ("client-id-wildcard", "POST", MSGS, _msg(client_message_id="c*"), 422, "messages[0].client_message_id"),
    ("metadata-nested-1000", "POST", MSGS, _nested(1000), 422, "messages[0].metadata"),
    (
        "search-filter-nested-deep",
        "POST",
        SEARCH,
        b'{"query":"x","scopes":' + b"[" * 200 + b"]" * 200 + b"}",
        422,
        "scopes",
    ),
]


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "field"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
async def test_bad_input_is_rejected_naming_the_field_and_changes_nothing(
    api_env, seeded, method, path, body, status, field
):
    before = await _state(api_env)
    kwargs: dict[str, Any] = {}
    if isinstance(body, bytes):
        kwargs = {"content": body, "headers": {"Content-Type": "application/json"}}
    elif body is not None:
        kwargs = {"json": body}
    async with api_env.client() as c:
        r = await c.request(method, path.format(memory_id=seeded["memory_id"]), **kwargs)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["field"] == field, error
    assert error["message"].startswith(f"{field}:") or field in error["message"], error
    assert error["code"] == ("invalid_input" if status == 422 else "invalid_body")
    assert await _state(api_env) == before


async def test_error_messages_say_what_is_wrong(api_env, seeded):
    async with api_env.client() as c:
        r = await c.post(MSGS, json=_msg(content="a" * 600000))
        assert r.json()["error"]["message"] == "messages[0].content: is 600000 bytes; the limit is 524288 bytes"
        r = await c.post(MSGS, json=_msg(timestamp="0001-01-01T00:00:00Z"))
        assert "between 1900-01-01 and 2200-01-01" in r.json()["error"]["message"]
        r = await c.post(MSGS, json=_msg(colour="red"))
        assert r.json()["error"]["message"] == "messages[0].colour: unknown field"
        r = await c.post(SEARCH, json={"query": "x", "categories": ["gossip"]})
        assert "dietary" in r.json()["error"]["message"]  # the allowed values are listed
        r = await c.post(MSGS, json={"messages": [{"content": f"m{i}"} for i in range(501)]})
        assert r.json()["error"]["message"] == "messages: at most 500 per request"


async def test_content_at_the_limit_is_accepted(api_env, seeded):
    async with api_env.client() as c:
        body = await add(c, "limit-user", "a" * (32 * 1024))
    assert body["messages"][0]["created"] is True


async def test_huge_body_with_content_length_is_413(api_env, seeded):
    before = await _state(api_env)
    big = b'{"messages":[{"content":"' + b"a" * (18 << 20) + b'"}]}'  # over the 16 MB default
    async with api_env.client() as c:
        r = await c.post(MSGS, content=big, headers={"Content-Type": "application/json"})
    assert r.status_code == 413
    error = r.json()["error"]
    assert (error["code"], error["field"]) == ("body_too_large", "body")
    assert error["message"].startswith("body: larger than")
    assert await _state(api_env) == before


OPERATOR_QUERIES = [
    '"foo" OR 1=1; DROP TABLE memories; --',
    "content:* AND tenant_id:other",
    'NEAR(a b) "x" * ^ - AND OR NOT ( ) { } [ ] : \\',
    "* ^ - ( ) : \\ \" ' ; --",
    "peanuts' OR '1'='1",
    "owner : * OR vault",
    "%_%' ESCAPE '\\'",
]


@pytest.mark.parametrize("query", OPERATOR_QUERIES)
async def test_queries_full_of_operator_characters_are_plain_text(api_env, seeded, query):
    before = await _state(api_env)
    async with api_env.client() as c:
        found = await search(c, USER, query, limit=50)
        mine = {m["id"] for m in await listing(c, USER, include_history=False)}
    ids = {h["memory"]["id"] for h in found["results"]}
    assert ids and ids <= mine  # an answer, only of this tenant's user
    assert not ids & seeded["theirs"]
    assert all(h["memory"]["user_id"] == USER for h in found["results"])
    assert await _state(api_env) == before


async def test_operator_words_still_match_as_words(api_env, seeded):
    async with api_env.client() as c:
        found = await search(c, USER, '"trumpet" OR NOT peanuts*', explain=True)
    by_content = {h["memory"]["content"]: h["scores"] for h in found["results"]}
    # the quoted word and the word under the operators are both found by the keyword index
    assert "bm25" in by_content["I play the trumpet in a brass band"]
    assert "bm25" in by_content["I am allergic to peanuts"]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def small_env(tmp_path_factory, embedder):
    env = await build_env(
        tmp_path_factory.mktemp("small"),
        embedder,
        max_message_bytes=64,
        memory_max_bytes=64,
        max_messages_per_request=3,
        max_request_bytes=1 << 20,
    )
    yield env
    await env.service.close()


async def test_configurable_message_size_limit(small_env):
    async with small_env.client() as c:
        ok = await c.post(MSGS, json=_msg(content="a" * 64))
        assert ok.status_code == 201
        before = small_env.table_counts()
        for content in ("a" * 65, "é" * 33):  # bytes, not characters: 33 x 2 = 66 bytes
            r = await c.post(MSGS, json=_msg(content=content))
            assert r.status_code == 422
            assert r.json()["error"]["field"] == "messages[0].content"
            assert "the limit is 64 bytes" in r.json()["error"]["message"]
        r = await c.post(MSGS, json={"messages": [{"content": "x"}] * 4})
        assert r.status_code == 422 and r.json()["error"]["message"] == "messages: at most 3 per request"
        r = await c.patch(f"/v1/users/{USER}/memories/{ok.json()['memories'][0]['id']}", json={"content": "b" * 65})
        assert r.status_code == 422 and r.json()["error"]["field"] == "content"
        assert small_env.table_counts() == before


async def test_streamed_body_over_the_limit_is_413(small_env):
    # small_env's body limit is 1 MB; no Content-Length header is sent
    async def chunks():
        yield b'{"messages":[{"content":"'
        for _ in range(20):
            yield b"a" * 65536
        yield b'"}]}'

    before = small_env.table_counts()
    async with small_env.client() as c:
        r = await c.post(MSGS, content=chunks(), headers={"Content-Type": "application/json"})
    assert r.status_code == 413, r.text
    assert r.json()["error"]["code"] == "body_too_large"
    assert small_env.table_counts() == before


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (MSGS, _msg(content="The lease runs until 31 December 9999")),
        (SEARCH, {"query": "what happens in December 9999?"}),
    ],
    ids=["message-text", "query"],
)
async def test_far_future_dates_in_text_are_not_a_server_error(tmp_path, embedder, path, body):
    env = await build_env(tmp_path, embedder)
    try:
        async with env.client(raise_app_exceptions=False) as c:
            r = await c.post(path, json=body)
    finally:
        await env.service.close()
    assert r.status_code < 500, r.text
