"""Two ways of driving the same operations: in-process (MemoryService) and over HTTP (the ASGI app).

Both return plain JSON-like dicts (memories as the API/serialiser shapes them) and raise
:class:`NotFound` / :class:`Conflict` / :class:`Forbidden`, so the isolation program and its
checks are written once. Writes always go through the *cached* service (so the Redis cache is
invalidated); reads pick cached or uncached per call.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import httpx

from cognis_memory.api.app import create_app
from cognis_memory.domain import Owner, Scope
from cognis_memory.errors import ConflictError, NotFoundError
from cognis_memory.search_filter import FILTER_NAMES
from cognis_memory.serialization import memory_to_dict
from cognis_memory.service import MemoryFilter, MemoryService, MessageBody
from tests.reliability.helpers import seg


class NotFound(Exception):
    pass


class Conflict(Exception):
    pass


class Forbidden(Exception):
    pass


def _job(j: Any) -> dict[str, Any]:
    return {
        "id": j.id, "status": j.status.value, "attempts": j.attempts, "last_error": j.last_error, "result": j.result,
        "tenant_id": j.tenant_id, "user_id": j.user_id, "message_ids": list(j.message_ids),
    }  # fmt: skip


def _hit(h: Any) -> dict[str, Any]:
    return {
        "memory": memory_to_dict(h.memory),
        "score": h.score,
        "scores": h.scores,
        "history": [memory_to_dict(v) for v in h.history],
    }


class ServiceExecutor:
    name = "service"

    def __init__(self, cached: MemoryService, plain: MemoryService) -> None:
        self.cached, self.plain = cached, plain
        self.stores = cached.stores

    async def add(self, owner: Owner, messages: list[dict[str, Any]], background: bool) -> dict[str, Any]:
        res = await self.cached.add_messages(
            owner.tenant_id,
            owner.user_id,
            [
                MessageBody(
                    content=m["content"],
                    speaker=m.get("speaker"),
                    timestamp=m.get("timestamp"),
                    session_id=m.get("session_id"),
                    agent_id=m.get("agent_id"),
                    client_message_id=m.get("client_message_id"),
                    scope=Scope(m.get("scope", "USER")),
                )  # fmt: skip
                for m in messages
            ],
            background=background,
        )
        return {
            "messages": [
                {
                    "id": m.id,
                    "created": c,
                    "content": m.content,
                    "tenant_id": m.tenant_id,
                    "user_id": m.user_id,
                    "client_message_id": m.client_message_id,
                }  # fmt: skip
                for m, c in zip(res.messages, res.created, strict=True)
            ],
            "memories": [memory_to_dict(m) for m in res.raw_memories],
            "job": _job(res.job) if res.job else None,
            "extraction": res.extraction,
        }

    async def search(self, owner: Owner, body: dict[str, Any], *, cached: bool) -> dict[str, Any]:
        svc = self.cached if cached else self.plain
        filters = {name: body[name] for name in FILTER_NAMES if name in body}  # as the route splits the body
        options = {name: value for name, value in body.items() if name not in filters}
        res = await svc.search(owner.tenant_id, owner.user_id, filter=MemoryFilter(**filters), **options)
        return {
            "results": [_hit(h) for h in res.hits],
            "degraded": res.degraded,
            "explain": res.explain,
            "query_analysis": res.analysis.to_dict(),
        }

    async def _call(self, fn, *args, **kwargs):
        try:
            return await fn(*args, **kwargs)
        except NotFoundError as e:
            raise NotFound(str(e)) from e
        except ConflictError as e:
            raise Conflict(str(e)) from e

    async def update(self, owner: Owner, mid: str, content: str | None, category: str | None) -> dict[str, Any]:
        m = await self._call(
            self.cached.update_memory, owner.tenant_id, owner.user_id, mid, content=content, category=category
        )
        return memory_to_dict(m)

    async def delete(self, owner: Owner, mid: str) -> dict[str, Any]:
        return memory_to_dict(await self._call(self.cached.delete_memory, owner.tenant_id, owner.user_id, mid))

    async def get(self, owner: Owner, mid: str, *, cached: bool = False) -> dict[str, Any]:
        svc = self.cached if cached else self.plain
        return memory_to_dict(await self._call(svc.get_memory, owner.tenant_id, owner.user_id, mid))

    async def history(self, owner: Owner, mid: str) -> list[dict[str, Any]]:
        return [memory_to_dict(m) for m in await self._call(self.plain.history, owner.tenant_id, owner.user_id, mid)]

    async def export(self, owner: Owner, include_history: bool = True) -> list[dict[str, Any]]:
        return [
            memory_to_dict(m)
            async for m in self.plain.export(owner.tenant_id, owner.user_id, include_history=include_history)
        ]

    async def list_page(
        self, owner: Owner, include_history: bool, limit: int, after: str | None
    ) -> list[dict[str, Any]]:
        page = await self.plain.list_memories(
            owner.tenant_id, owner.user_id, include_history=include_history, limit=limit, after=after
        )
        return [memory_to_dict(m) for m in page]

    async def job(self, owner: Owner, jid: str) -> dict[str, Any]:
        return _job(await self._call(self.plain.get_job, owner.tenant_id, owner.user_id, jid))

    async def forget(self, owner: Owner) -> dict[str, int]:
        return await self.cached.forget_user(owner.tenant_id, owner.user_id)

    async def drain(self) -> int:
        return await self.cached.worker.drain(timeout_s=60)


class HttpExecutor:
    """The same operations through the FastAPI app (in-process ASGI), with one API key per tenant."""

    name = "http"

    def __init__(self, cached: MemoryService, plain: MemoryService) -> None:
        self.cached, self.plain = cached, plain
        self.stores = cached.stores
        self._clients = {
            True: httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(cached, manage_lifecycle=False)),
                                    base_url="http://cognis.test"),
            False: httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(plain, manage_lifecycle=False)),
                                     base_url="http://cognis.test"),
        }  # fmt: skip
        self.keys: dict[str, str] = {}
        self.read_keys: dict[str, str] = {}
        #: Every response body seen, for the isolation checks of error messages.
        self.last_error: dict[str, Any] | None = None

    async def close(self) -> None:
        for c in self._clients.values():
            await c.aclose()

    async def key(self, tenant: str, *, read_only: bool = False) -> str:
        table = self.read_keys if read_only else self.keys
        if tenant not in table:
            table[tenant] = await self.cached.create_api_key(tenant, read_only=read_only, name="reliability")
        return table[tenant]

    async def request(self, method: str, owner: Owner, path: str, *, cached: bool = False, read_only: bool = False,
                      json: Any = None, params: dict[str, Any] | None = None) -> Any:  # fmt: skip
        key = await self.key(owner.tenant_id, read_only=read_only)
        url = f"/v1/users/{seg(owner.user_id)}{path}"
        r = await self._clients[cached].request(method, url, json=json, params=params, headers={"X-API-Key": key})
        body = r.json()
        if r.status_code == 404:
            self.last_error = body
            raise NotFound(body["error"]["message"])
        if r.status_code == 409:
            self.last_error = body
            raise Conflict(body["error"]["message"])
        if r.status_code == 403:
            self.last_error = body
            raise Forbidden(body["error"]["message"])
        assert r.status_code < 300, f"{method} {url}: {r.status_code} {body}"
        return body

    @staticmethod
    def _mem(owner: Owner, m: dict[str, Any]) -> dict[str, Any]:
        return {**m, "tenant_id": owner.tenant_id}  # the API never returns the tenant: it is the key's

    async def add(self, owner: Owner, messages: list[dict[str, Any]], background: bool) -> dict[str, Any]:
        msgs = []
        for m in messages:
            body = {k: v for k, v in m.items() if v is not None}
            if isinstance(body.get("timestamp"), datetime):
                body["timestamp"] = body["timestamp"].isoformat()
            msgs.append(body)
        out = await self.request("POST", owner, "/messages", cached=True,
                                 json={"messages": msgs, "mode": "async" if background else "sync"})  # fmt: skip
        return {
            "messages": out["messages"],
            "memories": [self._mem(owner, m) for m in out["memories"]],
            "job": out["job"],
            "extraction": out["extraction"],
        }

    async def search(self, owner: Owner, body: dict[str, Any], *, cached: bool) -> dict[str, Any]:
        payload = {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in body.items() if v is not None}
        for k in ("scopes", "categories", "kinds"):
            if k in payload:
                payload[k] = sorted(payload[k])
        out = await self.request("POST", owner, "/search", cached=cached, json=payload)
        for h in out["results"]:
            h["memory"] = self._mem(owner, h["memory"])
            h["history"] = [self._mem(owner, v) for v in h["history"]]
        return out

    async def update(self, owner: Owner, mid: str, content: str | None, category: str | None) -> dict[str, Any]:
        body = {k: v for k, v in {"content": content, "category": category}.items() if v is not None}
        return self._mem(owner, await self.request("PATCH", owner, f"/memories/{seg(mid)}", cached=True, json=body))

    async def delete(self, owner: Owner, mid: str) -> dict[str, Any]:
        return self._mem(owner, await self.request("DELETE", owner, f"/memories/{seg(mid)}", cached=True))

    async def get(self, owner: Owner, mid: str, *, cached: bool = False) -> dict[str, Any]:
        return self._mem(owner, await self.request("GET", owner, f"/memories/{seg(mid)}", cached=cached))

    async def history(self, owner: Owner, mid: str) -> list[dict[str, Any]]:
        out = await self.request("GET", owner, f"/memories/{seg(mid)}/history")
        return [self._mem(owner, m) for m in out["versions"]]

    async def list_page(
        self, owner: Owner, include_history: bool, limit: int, after: str | None
    ) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"include_history": str(include_history).lower(), "limit": limit}
        if after is not None:
            params["after"] = after
        out = await self.request("GET", owner, "/memories", params=params)
        return [self._mem(owner, m) for m in out["memories"]]

    async def export(self, owner: Owner, include_history: bool = True) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        after = None
        while True:
            page = await self.list_page(owner, include_history, 200, after)
            out += page
            if len(page) < 200:
                return out
            after = page[-1]["version_id"]  # rows are listed by version (a memory's versions share its id)

    async def job(self, owner: Owner, jid: str) -> dict[str, Any]:
        return await self.request("GET", owner, f"/jobs/{seg(jid)}")

    async def forget(self, owner: Owner) -> dict[str, int]:
        return (await self.request("DELETE", owner, "", cached=True))["deleted"]

    async def read_only_write(self, owner: Owner, mid: str | None) -> None:
        """Every write with the tenant's read-only key must answer 403."""
        attempts = [
            ("POST", "/messages", {"messages": [{"content": "read only zq0000000000"}]}),
        ]
        if mid is not None:
            attempts += [("PATCH", f"/memories/{mid}", {"content": "x"}), ("DELETE", f"/memories/{mid}", None)]
        attempts.append(("DELETE", "", None))
        for method, path, body in attempts:
            try:
                await self.request(method, owner, path, read_only=True, json=body)
            except Forbidden:
                continue
            raise AssertionError(f"read-only key was allowed to {method} {path}")

    async def drain(self) -> int:
        return await self.cached.worker.drain(timeout_s=60)
