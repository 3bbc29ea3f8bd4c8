"""``GET /v1/users`` (the key's tenant's users, paged) and ``GET /v1/key`` (what the calling key may do):
the routes the inspector uses to pick a user and to decide whether to offer edits."""

from __future__ import annotations

from tests.api.conftest import KEY_A, KEY_A_READ, KEY_B, TENANT_A, TENANT_B, add


async def test_users_are_the_keys_tenants_paged_by_user_id(api_env):
    async with api_env.client(KEY_A) as a, api_env.client(KEY_B) as b:
        for user in ("lu-carla", "lu-alba", "lu-bea"):
            await add(a, user, f"{user} likes figs")
        await add(a, "lu-alba", "and plums")
        await add(b, "lu-other-tenant", "secret of tenant b")

        r = await a.get("/v1/users", params={"limit": 1000})
        assert r.status_code == 200, r.text
        page = r.json()
        mine = [u for u in page["users"] if u["user_id"].startswith("lu-")]
        assert [u["user_id"] for u in mine] == ["lu-alba", "lu-bea", "lu-carla"]
        assert [u["current_memories"] for u in mine] == [2, 1, 1]
        assert all(u["last_memory_at"] for u in mine) and page["next_after"] is None

        seen, after = [], None
        while True:
            params = {"limit": 2, **({"after": after} if after else {})}
            body = (await a.get("/v1/users", params=params)).json()
            assert len(body["users"]) <= 2
            seen += [u["user_id"] for u in body["users"]]
            after = body["next_after"]
            if after is None:
                break
        assert seen == [u["user_id"] for u in page["users"]]

        r = await b.get("/v1/users")
        assert [u["user_id"] for u in r.json()["users"]] == ["lu-other-tenant"]


async def test_a_read_only_key_lists_users_and_unknown_keys_cannot(api_env):
    async with api_env.client(KEY_A_READ) as ro, api_env.client("no-such-key") as bad, api_env.client(None) as anon:
        assert (await ro.get("/v1/users")).status_code == 200
        assert (await bad.get("/v1/users")).status_code == 401
        assert (await anon.get("/v1/users")).status_code == 401
        assert (await anon.get("/v1/key")).status_code == 401


async def test_bad_paging_input_is_refused_naming_the_field(api_env):
    async with api_env.client(KEY_A) as a:
        for params, field in [({"limit": 0}, "limit"), ({"limit": 1001}, "limit"), ({"limit": "x"}, "limit"),
                              ({"after": "a\u0000b"}, "after"), ({"after": "x" * 200}, "after")]:  # fmt: skip
            r = await a.get("/v1/users", params=params)
            assert r.status_code == 422, (params, r.text)
            assert r.json()["error"]["field"] == field


async def test_the_key_route_says_tenant_and_read_only(api_env):
    async with api_env.client(KEY_A) as a, api_env.client(KEY_A_READ) as ro, api_env.client(KEY_B) as b:
        assert (await a.get("/v1/key")).json() == {"tenant_id": TENANT_A, "read_only": False}
        assert (await ro.get("/v1/key")).json() == {"tenant_id": TENANT_A, "read_only": True}
        assert (await b.get("/v1/key")).json() == {"tenant_id": TENANT_B, "read_only": False}
