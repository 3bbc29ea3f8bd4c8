"""End to end through the HTTP API (ASGI in-process) on the embedded store with the real MiniLM model.

Each test uses its own user ids on the module's shared service.
"""

from __future__ import annotations

import re

import pytest

from cognis_memory.domain import JobStatus
from cognis_memory.providers.llms import OpenAICompatibleLLM
from tests.api.conftest import KEY_A, KEY_A_READ, KEY_B, TENANT_A, add, build_env, listing, search
from tests.llm_server import ScriptedLLMServer

ROUTES = {
    "/health",
    "/ready",
    "/v1/users/{user_id}/messages",
    "/v1/users/{user_id}/sessions/{session_id}/messages",
    "/v1/users/{user_id}/search",
    "/v1/users/{user_id}/memories",
    "/v1/users/{user_id}/memories/{memory_id}",
    "/v1/users/{user_id}/memories/{memory_id}/history",
    "/v1/users/{user_id}",
    "/v1/users/{user_id}/jobs/{job_id}",
    "/v1/jobs",
    "/v1/users/{user_id}/context",
    "/v1/users",
    "/v1/key",
}


# -- open endpoints ------------------------------------------------------------------------
async def test_health_ready_docs_and_openapi_need_no_key(api_env):
    async with api_env.client(key=None) as c:
        r = await c.get("/health")
        assert (r.status_code, r.json()) == (200, {"status": "ok"})
        r = await c.get("/ready")
        assert r.status_code == 200
        assert r.json() == {"ready": True, "checks": {"sqlite": True}}
        r = await c.get("/docs")
        assert r.status_code == 200 and "swagger-ui" in r.text.lower()
        r = await c.get("/openapi.json")
        assert r.status_code == 200
        spec = r.json()
        assert spec["openapi"].startswith("3.")
        assert set(spec["paths"]) == ROUTES
        # the documented error shape is the one the API answers with
        assert set(spec["components"]["schemas"]["ErrorDetail"]["properties"]) == {"code", "message", "field"}
        # the jobs filter the inspector offers comes from here: every job status, and pending
        statuses = set(spec["components"]["schemas"]["JobStatusFilter"]["enum"])
        assert statuses == {s.value for s in JobStatus} | {"pending"}


async def test_ready_answers_503_when_the_store_is_down(tmp_path, embedder):
    env = await build_env(tmp_path, embedder)
    await env.service.stores.close()
    try:
        async with env.client(key=None) as c:
            r = await c.get("/ready")
    finally:
        await env.service.close()
    assert r.status_code == 503
    assert r.json() == {"ready": False, "checks": {"sqlite": False}}


# -- auth ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer nope"}, {"X-API-Key": "nope"}, {"Authorization": "Basic a2V5LWE6"}],
    ids=["no-key", "unknown-bearer", "unknown-x-api-key", "basic-auth"],
)
async def test_missing_or_unknown_key_is_401(api_env, headers):
    async with api_env.client(key=None) as c:
        for method, path, body in [
            ("GET", "/v1/users/auth-user/memories", None),
            ("POST", "/v1/users/auth-user/search", {"query": "anything"}),
            ("POST", "/v1/users/auth-user/messages", {"messages": [{"content": "hello"}]}),
            ("DELETE", "/v1/users/auth-user", None),
        ]:
            r = await c.request(method, path, json=body, headers=headers)
            assert r.status_code == 401, (method, path, r.text)
            assert r.json()["error"]["code"] == "unauthorized"
            assert r.headers["WWW-Authenticate"] == "Bearer"
    assert api_env.count("messages", TENANT_A, "auth-user") == 0


async def test_both_key_headers_are_accepted(api_env):
    async with api_env.client(key=None) as c:
        r1 = await c.get("/v1/users/auth-user/memories", headers={"Authorization": f"Bearer {KEY_A}"})
        r2 = await c.get("/v1/users/auth-user/memories", headers={"X-API-Key": KEY_A})
    assert r1.status_code == r2.status_code == 200


async def test_read_only_key_reads_and_searches_but_cannot_write(api_env):
    user = "ro-user"
    async with api_env.client(KEY_A) as writer, api_env.client(KEY_A_READ) as reader:
        mem = (await add(writer, user, "I keep bees on my balcony"))["memories"][0]
        before = await listing(writer, user)

        assert (await reader.get(f"/v1/users/{user}/memories")).status_code == 200
        assert (await reader.get(f"/v1/users/{user}/memories/{mem['id']}")).json()["content"] == mem["content"]
        assert (await reader.get(f"/v1/users/{user}/memories/{mem['id']}/history")).status_code == 200
        found = await search(reader, user, "bees")
        assert [h["memory"]["id"] for h in found["results"]] == [mem["id"]]

        writes = [
            ("POST", f"/v1/users/{user}/messages", {"messages": [{"content": "I sold the bees"}]}),
            ("PATCH", f"/v1/users/{user}/memories/{mem['id']}", {"content": "no more bees"}),
            ("DELETE", f"/v1/users/{user}/memories/{mem['id']}", None),
            ("DELETE", f"/v1/users/{user}", None),
            ("DELETE", "/v1/users/search", None),  # a user named "search" is not the search route
        ]
        for method, path, body in writes:
            r = await reader.request(method, path, json=body)
            assert r.status_code == 403, (method, path, r.text)
            assert r.json()["error"]["code"] == "forbidden"
        assert await listing(writer, user) == before
        assert api_env.count("messages", TENANT_A, user) == 1


async def test_keys_map_to_tenants_and_other_tenants_ids_are_404(api_env):
    user = "shared-user"  # the same user id in two tenants: two different people
    async with api_env.client(KEY_A) as a, api_env.client(KEY_B) as b:
        mem = (await add(a, user, "My locker code is 4711"))["memories"][0]
        before = await listing(a, user)

        assert await listing(b, user) == []
        assert (await search(b, user, "locker code"))["results"] == []
        for method, path, body in [
            ("GET", f"/v1/users/{user}/memories/{mem['id']}", None),
            ("GET", f"/v1/users/{user}/memories/{mem['id']}/history", None),
            ("PATCH", f"/v1/users/{user}/memories/{mem['id']}", {"content": "hijacked"}),
            ("DELETE", f"/v1/users/{user}/memories/{mem['id']}", None),
        ]:
            r = await b.request(method, path, json=body)
            assert r.status_code == 404, (method, path, r.text)
            assert r.json()["error"]["code"] == "not_found"
        # the same id under another user of the right tenant is not found either
        assert (await a.get(f"/v1/users/someone-else/memories/{mem['id']}")).status_code == 404

        # tenant B writes its own data for the same user id; neither side sees the other's
        mem_b = (await add(b, user, "My locker code is 1234"))["memories"][0]
        assert [m["id"] for m in await listing(b, user)] == [mem_b["id"]]
        assert await listing(a, user) == before
        assert [h["memory"]["id"] for h in (await search(a, user, "locker code"))["results"]] == [mem["id"]]
        assert (await b.delete(f"/v1/users/{user}")).status_code == 200
        assert await listing(a, user) == before


# -- ingest ---------------------------------------------------------------------------------
async def test_add_messages_sync_stores_searchable_raw_memories(api_env):
    user = "sync-user"
    async with api_env.client() as c:
        r = await c.post(
            f"/v1/users/{user}/messages",
            json={
                "messages": [
                    {
                        "content": "I adopted a tabby cat called Miso yesterday",
                        "speaker": "Rui",
                        "timestamp": "2025-03-10T09:00:00Z",
                        "session_id": "s-1",
                    },
                    {"content": "Miso is scared of the vacuum cleaner", "speaker": "Rui", "role": "user"},
                ]
            },
        )
        assert r.status_code == 201, r.text
        body = r.json()
        assert body["job"] is None
        assert [m["created"] for m in body["messages"]] == [True, True]
        first = body["memories"][0]
        assert first["content"] == "I adopted a tabby cat called Miso yesterday"  # as said
        assert [(e["text"], e["date"], e["granularity"]) for e in first["time_expressions"]] == [
            ("yesterday", "9 March 2025", "day")
        ]
        assert (first["kind"], first["scope"], first["version"], first["is_current"]) == ("raw", "USER", 1, True)
        assert first["speaker"] == "Rui" and first["session_id"] == "s-1"
        assert first["event_time"] == "2025-03-09T12:00:00Z"  # "yesterday", resolved against the message time
        assert first["message_time"] == "2025-03-10T09:00:00Z"
        assert first["source_message_ids"] == [body["messages"][0]["id"]]

        got = await c.get(f"/v1/users/{user}/memories/{first['id']}")
        assert got.status_code == 200 and got.json() == first
        found = await search(c, user, "What is the name of the cat?")
        assert {h["memory"]["id"] for h in found["results"]} == {m["id"] for m in body["memories"]}


async def test_same_client_message_id_twice_stores_one_message_and_one_memory(api_env):
    user = "idem-user"
    msg = {"content": "I started learning the cello", "client_message_id": "turn-0001", "speaker": "Ana"}
    async with api_env.client() as c:
        first = await add(c, user, msg)
        second = await add(c, user, msg)
        assert first["messages"][0]["created"] is True
        assert second["messages"][0]["created"] is False
        assert second["messages"][0]["id"] == first["messages"][0]["id"]
        assert second["memories"] == []
        assert [m["id"] for m in await listing(c, user)] == [first["memories"][0]["id"]]
        # a batch mixing a repeat and a new message stores only the new one
        third = await add(c, user, msg, {"content": "The cello teacher is called Ines", "client_message_id": "turn-2"})
        assert [m["created"] for m in third["messages"]] == [False, True]
        assert len(third["memories"]) == 1
        # the client id is per user: another user may use the same one
        other = await add(c, "idem-other", msg)
        assert other["messages"][0]["created"] is True
    assert api_env.count("messages", TENANT_A, user) == 2
    assert api_env.count("memories", TENANT_A, user) == 2


async def test_async_mode_without_llm_answers_201_and_no_job(api_env):
    async with api_env.client() as c:
        r = await c.post("/v1/users/async-nollm/messages", json={"messages": [{"content": "hi"}], "mode": "async"})
    assert r.status_code == 201
    assert r.json()["job"] is None and len(r.json()["memories"]) == 1
    assert api_env.count("jobs") == 0


def _llm_responder(schema_name, request):
    if schema_name == "extracted_facts":
        return {
            "facts": [
                {"content": "Rui works as a baker in Braga.", "category": "professional", "scope": "USER",
                 "event_date": None, "sources": [1]}
            ]
        }  # fmt: skip
    return {"decisions": [{"fact": 0, "action": "ADD", "target": None, "content": None, "category": None}]}


async def test_async_mode_with_llm_answers_202_with_a_job_done_after_drain(tmp_path, embedder):
    with ScriptedLLMServer(_llm_responder) as server:
        llm = OpenAICompatibleLLM(base_url=server.base_url, model="test")
        env = await build_env(tmp_path, embedder, llm=llm)
        user = "async-user"
        try:
            async with env.client(KEY_A) as c, env.client(KEY_B) as other:
                r = await c.post(
                    f"/v1/users/{user}/messages",
                    json={"messages": [{"content": "I work as a baker in Braga", "speaker": "Rui"}], "mode": "async"},
                )
                assert r.status_code == 202, r.text
                body = r.json()
                job = body["job"]
                assert job["status"] == "queued" and job["attempts"] == 0
                assert len(body["memories"]) == 1  # the raw message is searchable at once
                assert server.requests == []  # nothing extracted yet

                r = await c.get(f"/v1/users/{user}/jobs/{job['id']}")
                assert r.status_code == 200 and r.json()["status"] == "queued"
                assert (await other.get(f"/v1/users/{user}/jobs/{job['id']}")).status_code == 404
                assert (await c.get(f"/v1/users/someone-else/jobs/{job['id']}")).status_code == 404

                assert await env.service.worker.drain() == 1
                r = await c.get(f"/v1/users/{user}/jobs/{job['id']}")
                done = r.json()
                assert done["status"] == "done" and done["attempts"] == 1 and done["last_error"] is None
                assert done["result"]["ADD"] == 1
                assert len(server.requests) == 1  # extract; the user had no fact to decide against yet
                assert done["result"]["answers"]["valid"] == 1

                facts = await search(c, user, "What is Rui's job?", kinds=["fact"])
                assert [h["memory"]["content"] for h in facts["results"]] == ["Rui works as a baker in Braga."]
                assert facts["results"][0]["memory"]["category"] == "professional"

                # a repeated async post with the same client id makes no second job
                msg = {"content": "I also bake on Sundays", "client_message_id": "m-1"}
                r1 = await c.post(f"/v1/users/{user}/messages", json={"messages": [msg], "mode": "async"})
                r2 = await c.post(f"/v1/users/{user}/messages", json={"messages": [msg], "mode": "async"})
                assert (r1.status_code, r2.status_code) == (202, 201)
                assert r2.json()["job"] is None

                # sync mode with an LLM extracts before answering; its intent job (kept in case the process
                # died during the LLM calls) is done, and the answer names no job
                r = await c.post(f"/v1/users/{user}/messages", json={"messages": [{"content": "I love rye bread"}]})
                assert r.status_code == 201 and r.json()["job"] is None and r.json()["facts"] == "extracted"
                assert r.json()["extraction"]["ADD"] == 1
                listed = (await c.get("/v1/jobs", params={"status": "pending"})).json()["jobs"]
                assert [j["id"] for j in listed] == [r1.json()["job"]["id"]]  # the async one, not drained yet

                # forgetting the user removes its jobs too (two async, one sync)
                assert (await c.delete(f"/v1/users/{user}")).json()["deleted"]["jobs"] == 3
                assert (await c.get(f"/v1/users/{user}/jobs/{job['id']}")).status_code == 404
        finally:
            await env.service.close()
            await llm.aclose()


# -- search filters --------------------------------------------------------------------------
FILTER_USER = "filter-user"
FILTER_MESSAGES = {
    "veg": {"content": "I am vegetarian and I love lentil soup", "timestamp": "2025-01-10T10:00:00Z"},
    "ctx1": {"content": "Sprint demo planning notes for the mobile app", "scope": "CONTEXT", "session_id": "s1",
             "timestamp": "2025-02-01T10:00:00Z"},
    "ctx2": {"content": "Whiteboard notes about the database migration", "scope": "CONTEXT", "session_id": "s2",
             "timestamp": "2025-02-02T10:00:00Z"},
    "trip": {"content": "I booked a flight to Tokyo for my vacation", "timestamp": "2025-03-05T10:00:00Z"},
    "code": {"content": "My favourite programming language is Python", "timestamp": "2025-04-01T10:00:00Z"},
}  # fmt: skip


@pytest.fixture(scope="module")
def filter_ids():
    return {}


async def _filter_data(api_env, filter_ids):
    if not filter_ids:
        async with api_env.client() as c:
            body = await add(c, FILTER_USER, *FILTER_MESSAGES.values())
        for name, mem in zip(FILTER_MESSAGES, body["memories"], strict=True):
            filter_ids[name] = mem
    return filter_ids


async def _result_names(c, filter_ids, query, **body):
    by_id = {m["id"]: name for name, m in filter_ids.items()}
    found = await search(c, FILTER_USER, query, **body)
    for h in found["results"]:
        assert h["memory"]["user_id"] == FILTER_USER
    return {by_id[h["memory"]["id"]] for h in found["results"]}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({}, {"veg", "ctx1", "ctx2", "trip", "code"}),  # no session: CONTEXT memories of every session
        ({"scopes": ["CONTEXT"]}, {"ctx1", "ctx2"}),
        ({"scopes": ["USER"]}, {"veg", "trip", "code"}),
        ({"scopes": ["USER", "CONTEXT"]}, {"veg", "ctx1", "ctx2", "trip", "code"}),
        ({"session_id": "s1"}, {"veg", "ctx1", "trip", "code"}),  # USER memories stay visible
        ({"session_id": "s1", "scopes": ["CONTEXT"]}, {"ctx1"}),
        ({"session_id": "unknown-session"}, {"veg", "trip", "code"}),
        ({"time_from": "2025-02-01T00:00:00Z", "time_to": "2025-03-05T10:00:00Z"}, {"ctx1", "ctx2", "trip"}),
        ({"time_from": "2025-03-06T00:00:00Z"}, {"code"}),
        ({"time_to": "2025-01-31T00:00:00+02:00"}, {"veg"}),
        ({"time_from": "2026-01-01T00:00:00Z"}, set()),
        ({"kinds": ["raw"]}, {"veg", "ctx1", "ctx2", "trip", "code"}),
        ({"kinds": ["fact"]}, set()),
    ],
    ids=lambda v: str(v) if isinstance(v, dict) else None,
)
async def test_search_filters(api_env, filter_ids, body, expected):
    ids = await _filter_data(api_env, filter_ids)
    async with api_env.client() as c:
        assert await _result_names(c, ids, "notes about food, travel and code", **body) == expected


async def test_search_category_filter(api_env, filter_ids):
    ids = await _filter_data(api_env, filter_ids)
    assert ids["veg"]["category"] == "dietary" and ids["trip"]["category"] == "travel"
    in_category = {c: {name for name, m in ids.items() if m["category"] == c} for c in ("dietary", "travel")}
    async with api_env.client() as c:
        for wanted in (["dietary"], ["travel"], ["dietary", "travel"], ["financial"]):
            expected = {name for name, m in ids.items() if m["category"] in wanted}
            assert await _result_names(c, ids, "what do I like", categories=wanted) == expected
    assert "veg" in in_category["dietary"] and "trip" in in_category["travel"]
    assert len(in_category["dietary"]) < len(ids)  # the filter really narrows the answer


async def test_search_limit_and_ranking(api_env, filter_ids):
    ids = await _filter_data(api_env, filter_ids)
    async with api_env.client() as c:
        found = await search(c, FILTER_USER, "Which programming language do I like?", limit=2)
        assert len(found["results"]) == 2
        assert found["results"][0]["memory"]["id"] == ids["code"]["id"]
        scores = [h["score"] for h in found["results"]]
        assert scores == sorted(scores, reverse=True)
        found = await search(c, FILTER_USER, "flight to Tokyo", limit=1)
        assert [h["memory"]["id"] for h in found["results"]] == [ids["trip"]["id"]]


async def test_search_explain_gives_per_stage_scores_and_timings(api_env, filter_ids):
    ids = await _filter_data(api_env, filter_ids)
    async with api_env.client() as c:
        plain = await search(c, FILTER_USER, "flight to Tokyo")
        assert plain["explain"] is None
        assert all(h["scores"] is None and h["moves"] is None for h in plain["results"])

        found = await search(c, FILTER_USER, "flight to Tokyo", explain=True)
    top = found["results"][0]
    assert top["memory"]["id"] == ids["trip"]["id"]
    assert {"vector", "vector_rank", "bm25", "bm25_rank", "rrf"} <= set(top["scores"])
    assert top["scores"]["vector_rank"] == 1 and top["scores"]["bm25_rank"] == 1
    # weighted RRF (ARCHITECTURE §5): w_vector / (k + rank_vector) + w_bm25 / (k + rank_bm25), with the
    # weights and k of the recipe the search used (reported in explain mode)
    cfg = found["explain"]["config"]
    for h in found["results"]:
        sc = h["scores"]
        assert "vector" in sc and "rrf" in sc
        expected = cfg["weight_vector"] / (cfg["rrf_k"] + sc["vector_rank"])
        if "bm25_rank" in sc:
            expected += cfg["weight_bm25"] / (cfg["rrf_k"] + sc["bm25_rank"])
        assert sc["rrf"] == pytest.approx(expected)
    assert any("bm25_rank" not in h["scores"] for h in found["results"])  # both kinds of hit were checked
    timings = found["explain"]["stage_durations"]
    assert {
        "query_analysis_ms", "embed_query_ms", "vector_short_ms", "vector_full_ms", "bm25_ms", "rrf_fusion_ms",
        "dedup_ms",
    } <= set(timings)  # fmt: skip
    assert all(isinstance(v, float) and v >= 0 for v in timings.values())
    assert found["explain"]["config"]["rrf_k"] == 10
    assert found["explain"]["candidates"]["candidates_short"] >= 1
    assert found["query_analysis"]["temporal"] == "none"
    # every stage that moved a hit, with both places: they lead from the fused place to the answer's
    for place, h in enumerate(found["results"], start=1):
        rank = h["scores"]["rrf_rank"]
        for m in h["moves"]:
            assert set(m) == {"stage", "score_before", "score_after", "rank_before", "rank_after"}
            assert m["stage"] + "_ms" in timings and m["rank_before"] == rank
            rank = m["rank_after"]
        assert rank == place


async def test_temporal_query_is_analysed_against_now(api_env, filter_ids):
    ids = await _filter_data(api_env, filter_ids)
    async with api_env.client() as c:
        found = await search(c, FILTER_USER, "what did I book last month?", now="2025-04-10T12:00:00Z", explain=True)
    qa = found["query_analysis"]
    assert qa["temporal"] == "explicit" and qa["expressions"] == ["last month"]
    assert qa["target_start"].startswith("2025-03-01") and qa["target_end"].startswith("2025-04-01")
    assert "temporal_boost_ms" in found["explain"]["stage_durations"]
    assert found["results"][0]["memory"]["id"] == ids["trip"]["id"]
    assert "temporal" in found["results"][0]["scores"]


# -- versions ---------------------------------------------------------------------------------
async def test_a_memory_keeps_its_id_across_update_and_delete(api_env):
    user = "chain-user"
    async with api_env.client() as c:
        other = (await add(c, user, "I have two sisters"))["memories"][0]
        v1 = (await add(c, user, "I work at Ribeira Logistics as a data analyst"))["memories"][0]
        mid = v1["id"]
        assert v1["version_id"] == mid and v1["version"] == 1  # a first version's id is the memory's

        r = await c.patch(
            f"/v1/users/{user}/memories/{mid}",
            json={"content": "Maya works at Tidewater Labs as a product manager", "category": "professional"},
        )
        assert r.status_code == 200, r.text
        v2 = r.json()
        assert (v2["id"], v2["version"], v2["is_current"], v2["replaces_id"], v2["deleted"]) == (
            mid,
            2,
            True,
            mid,
            False,
        )
        assert v2["version_id"] != mid and v2["kind"] == "fact" and v2["category"] == "professional"
        for any_id in (mid, v2["version_id"]):  # the memory's id and any version's name the current version
            got = (await c.get(f"/v1/users/{user}/memories/{any_id}")).json()
            assert (got["id"], got["version_id"], got["is_current"]) == (mid, v2["version_id"], True)

        found = await search(c, user, "Where does Maya work?", include_history=True)
        hit = next(h for h in found["results"] if h["memory"]["id"] == mid)
        assert hit["memory"]["version_id"] == v2["version_id"]
        assert [(v["id"], v["version_id"]) for v in hit["history"]] == [(mid, mid)]
        found = await search(c, user, "Where did Maya work before?")  # history intent in the query
        hit = next(h for h in found["results"] if h["memory"]["id"] == mid)
        assert [v["version"] for v in hit["history"]] == [1]
        assert {m["id"] for m in await listing(c, user, include_history=False)} == {other["id"], mid}

        # an id held from before the edit edits the current version: no 409 for an id that is simply older
        r = await c.patch(f"/v1/users/{user}/memories/{mid}", json={"content": "Maya works at Tidewater Labs"})
        assert r.status_code == 200, r.text
        v3 = r.json()
        assert (v3["id"], v3["version"], v3["replaces_id"]) == (mid, 3, v2["version_id"])

        r = await c.delete(f"/v1/users/{user}/memories/{v2['version_id']}")  # an older version's id deletes it
        assert r.status_code == 200, r.text
        tomb = r.json()
        assert (tomb["id"], tomb["version"], tomb["is_current"], tomb["deleted"], tomb["replaces_id"]) == (
            mid, 4, False, True, v3["version_id"]
        )  # fmt: skip
        for any_id in (mid, v2["version_id"], tomb["version_id"]):  # deleting again: the same answer, no 409
            r = await c.delete(f"/v1/users/{user}/memories/{any_id}")
            assert (r.status_code, r.json()) == (200, tomb)

        ids = [mid, v2["version_id"], v3["version_id"], tomb["version_id"]]
        for any_id in ids:
            r = await c.get(f"/v1/users/{user}/memories/{any_id}/history")
            versions = r.json()["versions"]
            assert [v["version_id"] for v in versions] == ids and {v["id"] for v in versions} == {mid}
            assert [v["version"] for v in versions] == [1, 2, 3, 4]
            assert not any(v["is_current"] for v in versions)
            # a deleted memory is gone for reads and edits (404), and its history stays
            r = await c.get(f"/v1/users/{user}/memories/{any_id}")
            assert r.status_code == 404 and "deleted" in r.json()["error"]["message"]
            r = await c.patch(f"/v1/users/{user}/memories/{any_id}", json={"content": "x"})
            assert r.status_code == 404

        for query in ("Where does Maya work?", "Tidewater Labs product manager", "Ribeira Logistics"):
            found = await search(c, user, query, include_history=True)
            assert [h["memory"]["id"] for h in found["results"]] == [other["id"]]
        assert [m["id"] for m in await listing(c, user, include_history=False)] == [other["id"]]
        everything = await listing(c, user)
        assert sorted(m["version_id"] for m in everything) == sorted([other["id"], *ids])
        assert {m["id"] for m in everything} == {other["id"], mid}
        for method in ("GET", "DELETE"):  # 404 only for an id that never named a memory of this user
            assert (await c.request(method, f"/v1/users/{user}/memories/no-such-id")).status_code == 404
        for any_id in ids:  # another user's (another owner's) ids are unknown here, never a leak
            for method in ("GET", "DELETE"):
                assert (await c.request(method, f"/v1/users/other-{user}/memories/{any_id}")).status_code == 404
            assert (await c.get(f"/v1/users/other-{user}/memories/{any_id}/history")).status_code == 404
            r = await c.patch(f"/v1/users/other-{user}/memories/{any_id}", json={"content": "x"})
            assert r.status_code == 404
        assert (await listing(c, f"other-{user}")) == []


async def test_context_takes_query_as_search_does_and_message_as_its_deprecated_name(api_env):
    user = "context-query-user"
    async with api_env.client() as c:
        mem = (await add(c, user, "My cat Miso sees Dr. Alvarez at the Harbour vet clinic"))["memories"][0]
        answers = []
        for body in ({"query": "Where should I take my cat?"}, {"message": "Where should I take my cat?"},
                     {"query": "Where should I take my cat?", "message": "Where should I take my cat?"}):  # fmt: skip
            r = await c.post(f"/v1/users/{user}/context", json={**body, "with_ids": True})
            assert r.status_code == 200, r.text
            answers.append(r.json())
        assert all(a["text"] == answers[0]["text"] for a in answers) and "Harbour vet clinic" in answers[0]["text"]
        assert f"(id {mem['id']})" in answers[0]["text"] and answers[0]["memories"][0]["memory"]["id"] == mem["id"]

        r = await c.post(f"/v1/users/{user}/context", json={"query": "my cat", "message": "my dog"})
        assert r.status_code == 422 and r.json()["error"]["field"] == "message", r.text
        r = await c.post(f"/v1/users/{user}/context", json={"max_tokens": 500})
        assert r.status_code == 422 and r.json()["error"]["field"] == "query", r.text
        r = await c.post(f"/v1/users/{user}/context", json={"query": "   "})
        assert r.status_code == 422 and r.json()["error"]["field"] == "query", r.text

        spec = (await c.get("/openapi.json")).json()["components"]["schemas"]["ContextBody"]["properties"]
        assert spec["message"].get("deprecated") is True and not spec["query"].get("deprecated")


async def test_patch_category_and_event_time_only(api_env):
    user = "patch-user"
    async with api_env.client() as c:
        v1 = (await add(c, user, "I run five kilometres every morning"))["memories"][0]
        r = await c.patch(
            f"/v1/users/{user}/memories/{v1['id']}",
            json={"category": "behavioral_patterns", "event_time": "2025-01-01T07:00:00Z"},
        )
        v2 = r.json()
        assert r.status_code == 200
        assert (v2["version"], v2["category"], v2["event_time"]) == (2, "behavioral_patterns", "2025-01-01T07:00:00Z")
        assert v2["content"] == v1["content"] and v2["kind"] == "raw"  # content unchanged: still the raw message


# -- forget -----------------------------------------------------------------------------------
async def test_forget_user_removes_everything_and_keeps_other_users(api_env):
    async with api_env.client(KEY_A) as a, api_env.client(KEY_B) as b:
        gone = await add(a, "forget-me", "My passport number is X123", "I live at 5 Elm Street")
        mem_id = gone["memories"][0]["id"]
        await a.patch(f"/v1/users/forget-me/memories/{mem_id}", json={"content": "Passport renewed"})
        kept_same_tenant = await add(a, "keep-me", "My passport is in the drawer")
        kept_other_tenant = await add(b, "forget-me", "My passport is blue")
        before_keep = await listing(a, "keep-me")
        before_other = await listing(b, "forget-me")

        r = await a.delete("/v1/users/forget-me")
        assert r.status_code == 200
        deleted = r.json()["deleted"]
        assert (deleted["memories"], deleted["messages"]) == (3, 2)
        assert deleted["index_documents"] == 2  # the FTS rows of the current versions

        assert await listing(a, "forget-me") == []
        assert (await search(a, "forget-me", "passport"))["results"] == []
        assert (await a.get(f"/v1/users/forget-me/memories/{mem_id}")).status_code == 404
        assert (await a.get(f"/v1/users/forget-me/memories/{mem_id}/history")).status_code == 404
        assert api_env.count("messages", TENANT_A, "forget-me") == 0
        assert api_env.count("memories", TENANT_A, "forget-me") == 0

        assert await listing(a, "keep-me") == before_keep
        assert await listing(b, "forget-me") == before_other
        found = await search(b, "forget-me", "passport")
        assert [h["memory"]["id"] for h in found["results"]] == [kept_other_tenant["memories"][0]["id"]]
        found = await search(a, "keep-me", "passport")
        assert [h["memory"]["id"] for h in found["results"]] == [kept_same_tenant["memories"][0]["id"]]

        # forgetting again is harmless; the user can start over
        r = await a.delete("/v1/users/forget-me")
        assert r.status_code == 200 and r.json()["deleted"]["memories"] == 0
        assert (await add(a, "forget-me", "fresh start"))["messages"][0]["created"] is True


# -- request ids ------------------------------------------------------------------------------
async def test_request_ids_are_the_servers_and_a_clients_id_is_kept_apart(api_env):
    """The request id is always generated by the server; a client's X-Request-Id is only kept, when it is a
    well-formed id, as the separate client_request_id (header X-Client-Request-Id and the log line)."""
    async with api_env.client() as c:
        ingest = await c.post(
            "/v1/users/rid-user/messages",
            json={"messages": [{"content": "I like jazz"}]},
            headers={"X-Request-Id": "req-ingest-42"},
        )
        search = await c.post("/v1/users/rid-user/search", json={"query": "jazz"}, headers={"X-Request-Id": "a b"})
        plain = await c.post("/v1/users/rid-user/search", json={"query": "music"})
        too_long = await c.get("/v1/users/rid-user/memories", headers={"X-Request-Id": "x" * 200})
        error = await c.post("/v1/users/rid-user/search", json={"query": ""}, headers={"X-Request-Id": "req-bad-1"})

    for r in (ingest, search, plain, too_long, error):
        assert re.fullmatch(r"[0-9a-f]{32}", r.headers["X-Request-Id"]), r.headers["X-Request-Id"]
    assert len({r.headers["X-Request-Id"] for r in (ingest, search, plain, too_long, error)}) == 5
    assert ingest.headers["X-Client-Request-Id"] == "req-ingest-42"
    assert error.status_code == 422 and error.headers["X-Client-Request-Id"] == "req-bad-1"
    for r in (search, plain, too_long):  # a malformed or absent client id is not kept
        assert "X-Client-Request-Id" not in r.headers

    ingest_logs = [r for r in api_env.log_lines("memory_ingest") if r["user_id"] == "rid-user"]
    retrieval = [r for r in api_env.log_lines("memory_retrieval") if r["user_id"] == "rid-user"]
    assert [(r["request_id"], r.get("client_request_id")) for r in ingest_logs] == [
        (ingest.headers["X-Request-Id"], "req-ingest-42")
    ]
    assert [(r["request_id"], r.get("client_request_id")) for r in retrieval] == [
        (search.headers["X-Request-Id"], None),
        (plain.headers["X-Request-Id"], None),
    ]
    assert all(r["tenant_id"] == TENANT_A for r in ingest_logs + retrieval)


async def test_every_response_carries_the_security_headers(api_env):
    async with api_env.client() as c:
        responses = [
            await c.post("/v1/users/hdr-user/messages", json={"messages": [{"content": "I like tea"}]}),
            await c.post("/v1/users/hdr-user/search", json={"query": "tea"}),
            await c.get("/v1/users/hdr-user/memories"),
            await c.post("/v1/users/hdr-user/search", json={"query": ""}),
            await c.get("/health"),
        ]
        async with api_env.client(None) as anonymous:
            responses.append(await anonymous.get("/v1/users/hdr-user/memories"))
    for r in responses:
        assert r.headers["X-Content-Type-Options"] == "nosniff", r.url
        assert r.headers["Cache-Control"] == "no-store", r.url


async def test_unknown_route_and_method_use_the_error_shape(api_env):
    async with api_env.client() as c:
        r = await c.get("/v1/nothing-here")
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
        r = await c.put("/v1/users/u/search", json={"query": "x"})
        assert r.status_code == 405 and r.json()["error"]["code"] == "method_not_allowed"


async def test_paging_through_memories(api_env):
    user = "page-user"
    async with api_env.client() as c:
        await add(c, user, *[f"note number {i}" for i in range(5)])
        seen, cursor = [], None
        while True:
            params = {"limit": 2} | ({"cursor": cursor} if cursor else {})
            page = (await c.get(f"/v1/users/{user}/memories", params=params)).json()
            seen += [m for m in page["memories"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
    # one request: the same message time, so by id (the order of tests/api/test_listing_order.py)
    assert len({m["id"] for m in seen}) == 5 and [m["id"] for m in seen] == sorted(m["id"] for m in seen)
