"""The Python client and the Bedrock tool handler, against the real app over HTTP (ASGI transport)."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest
import uvicorn

from cognis_memory.api.app import create_app
from cognis_memory.client import BEDROCK_TOOLS, MemoryAPIError, MemoryClient


@pytest.fixture
async def server(make_service, tmp_path):
    svc = await make_service(api_keys="ck=acme,ro=acme:read")
    config = uvicorn.Config(create_app(svc, manage_lifecycle=False), host="127.0.0.1", port=0, log_level="warning")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    # the service lives on the test loop; uvicorn runs its own loop in the thread, so the
    # store (thread-safe SQLite) is shared but the service's async objects are created lazily
    thread.start()
    while not srv.started:
        await asyncio.sleep(0.05)
    port = srv.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=10)


async def test_client_round_trip_and_tools(server) -> None:
    def run() -> None:
        with MemoryClient(server, "ck") as mem:
            added = mem.add("zoe", "I started a pottery class last week", speaker="Zoe")
            mid = added["memories"][0]["id"]
            assert mem.search("zoe", "pottery")["results"][0]["memory"]["id"] == mid
            mem.update("zoe", mid, content="Zoe takes a pottery class on Tuesdays")
            assert [v["version"] for v in mem.history("zoe", mid)] == [1, 2]
            result = mem.handle_tool_use("zoe", {"toolUseId": "t1", "name": "search_memory", "input": {"query": "class"}})
            assert result["toolResult"]["toolUseId"] == "t1"
            assert "pottery" in result["toolResult"]["content"][0]["json"]["memories"][0]["content"]
            saved = mem.handle_tool_use("zoe", {"toolUseId": "t2", "name": "save_memory", "input": {"content": "I like jazz"}})
            assert saved["toolResult"]["content"] == [{"text": "saved"}]
            bad = mem.handle_tool_use("zoe", {"toolUseId": "t3", "name": "nope", "input": {}})
            assert bad["toolResult"]["status"] == "error"
        with MemoryClient(server, "ro") as ro, pytest.raises(MemoryAPIError) as err:
            ro.add("zoe", "read-only keys cannot write")
        assert err.value.status == 403

    await asyncio.to_thread(run)


def test_bedrock_tool_specs_are_valid_json_schema_objects() -> None:
    names = [t["toolSpec"]["name"] for t in BEDROCK_TOOLS]
    assert names == ["search_memory", "save_memory"]
    for t in BEDROCK_TOOLS:
        schema = t["toolSpec"]["inputSchema"]["json"]
        assert schema["type"] == "object" and set(schema["required"]) <= set(schema["properties"])
