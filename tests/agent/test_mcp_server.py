"""``cognis-memory mcp``: the memory tools over MCP, driven by the official SDK's own client.

Real processes throughout: the MCP server over stdio (in-process store, and a remote
``cognis-memory serve``) and over streamable HTTP. Every stdio session also checks that the
server's stdout carried nothing but the protocol (the SDK client skips a stray line with a log
message; the session's message handler sees it) and that its stderr has no traceback.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx
import pytest
from cognis_dev.processes import free_port, stop, wait_for_http

from cognis_memory.agent_tools import TOOLS, AsyncMemoryToolbox, input_schema
from cognis_memory.client import NO_RETRIES, AsyncMemoryClient

try:
    from mcp import Client
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client
except ImportError:
    pytest.skip("needs the MCP SDK: pip install 'cognis-memory[mcp]'", allow_module_level=True)

CLI = Path(sys.executable).with_name("cognis-memory")
STARTUP_S = 120  # MiniLM loads in a few seconds, far slower on a busy 2-core machine
FACT = "My sister Ines lives in Porto and teaches piano."
QUESTION = "Where does my sister live?"
ID_RE = re.compile(r"\(id ([^)\s]+)\)")


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    for name in ("COGNIS_MCP_USER", "COGNIS_API_KEY", "COGNIS_API_KEYS", "COGNIS_DATA_DIR", "COGNIS_STORE"):
        env.pop(name, None)
    return env | extra


def _text(result) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


def _no_traceback(log: Path) -> None:
    text = log.read_text(encoding="utf-8", errors="replace")
    assert "Traceback" not in text, text[-3000:]


@contextlib.asynccontextmanager
async def stdio_session(args: list[str], log: Path, env: dict[str, str]) -> AsyncIterator[ClientSession]:
    """An initialized SDK client session with ``cognis-memory mcp ARGS`` over stdio; stderr to ``log``."""
    params = StdioServerParameters(command=str(CLI), args=["mcp", *args], env=env, cwd=str(log.parent))
    stray: list[Exception] = []  # stdout lines that are not JSON-RPC (the SDK client logs and skips them)

    async def on_message(message) -> None:
        if isinstance(message, Exception):
            stray.append(message)

    with open(log, "w", encoding="utf-8") as errlog:
        with anyio.fail_after(STARTUP_S + 60):
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write, message_handler=on_message) as session,
            ):
                await session.initialize()
                yield session
    assert stray == [], "the server wrote something other than the protocol to stdout"


@contextlib.contextmanager
def background(cmd: list[str], log: Path, env: dict[str, str]):
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=log.parent)
        try:
            yield proc
        finally:
            stop(proc, timeout_s=15)


def _assert_same_tools(tools) -> None:
    assert [t.name for t in tools] == [t.name for t in TOOLS]
    for listed, defined in zip(tools, TOOLS, strict=True):
        assert listed.description == defined.description
        assert listed.input_schema == input_schema(defined)


# -- in-process: the builder on the SDK's in-memory transport ---------------------------------
async def test_builder_in_process_reports_backend_failures_as_tool_errors():
    from cognis_memory.mcp_server import build_mcp_server

    down = AsyncMemoryClient(f"http://127.0.0.1:{free_port()}", retry=NO_RETRIES, timeout_s=5)
    server = build_mcp_server(AsyncMemoryToolbox(down, "u0"))
    async with Client(server) as client:
        _assert_same_tools((await client.list_tools()).tools)
        result = await client.call_tool("recall", {"query": QUESTION})
        assert result.is_error and "ConnectError" in _text(result)
        assert result.structured_content["code"] == "connection_error"
        result = await client.call_tool("remember", {})
        assert result.is_error and "content" in _text(result)
        result = await client.call_tool("nope", {"x": 1})
        assert result.is_error and "unknown tool" in _text(result)
    await down.aclose()


async def test_in_process_backend_writes_to_the_chosen_tenant(tmp_path):
    """In-process, requests carry no key; they belong to --tenant (here a tenant the CLI imported into)."""
    from cognis_memory.config import Settings
    from cognis_memory.mcp_server import McpOptions, build_mcp_server, open_toolbox
    from cognis_memory.service import MemoryService, MessageBody

    settings = Settings(data_dir=tmp_path, run_worker=False, metrics_enabled=False)
    async with MemoryService.from_settings(settings) as svc:
        await svc.add_messages(
            "acme", "ines", [MessageBody(content="I keep bees on my roof in Porto.", speaker="Ines")]
        )
    options = McpOptions(user_id="ines", settings=settings, tenant="acme")
    async with open_toolbox(options) as toolbox, Client(build_mcp_server(toolbox)) as client:
        assert "bees" in _text(await client.call_tool("recall", {"query": "What does Ines keep on her roof?"}))
        await client.call_tool("remember", {"content": "Ines sells honey at the Saturday market."})
    async with MemoryService.from_settings(settings) as svc:
        assert any(["honey" in m.content async for m in svc.export("acme", "ines")])
        assert [m async for m in svc.export("default", "ines")] == []


# -- stdio, in-process store -------------------------------------------------------------------
async def test_stdio_remember_recall_forget(tmp_path):
    log = tmp_path / "mcp-stdio.err"
    args = ["--user", "u1", "--data-dir", str(tmp_path / "data")]
    async with stdio_session(args, log, _env()) as session:
        _assert_same_tools((await session.list_tools()).tools)

        result = await session.call_tool("remember", {"content": FACT})
        assert not result.is_error, _text(result)
        assert _text(result) == "Remembered."
        assert result.structured_content["stored"] == 1

        result = await session.call_tool("recall", {"query": QUESTION})
        assert not result.is_error, _text(result)
        line = next(line for line in _text(result).splitlines() if "Porto" in line)
        memory_id = ID_RE.search(line).group(1)

        result = await session.call_tool("forget", {"memory_id": memory_id})
        assert not result.is_error, _text(result)
        assert memory_id in _text(result)
        result = await session.call_tool("recall", {"query": QUESTION})
        assert not result.is_error and memory_id not in _text(result) and "Porto" not in _text(result)

        result = await session.call_tool("forget", {"memory_id": "no-such-memory"})
        assert result.is_error and "not found" in _text(result)
        result = await session.call_tool("recall", {"query": QUESTION, "bogus": 1})
        assert result.is_error and "bogus" in _text(result)
        result = await session.call_tool("recall", {"query": QUESTION, "limit": 500})
        assert result.is_error and "limit" in _text(result)
    assert (tmp_path / "data" / "memory.db").exists()  # --data-dir chose the store
    _no_traceback(log)


# -- streamable HTTP ---------------------------------------------------------------------------
async def test_streamable_http(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    log = tmp_path / "mcp-http.log"
    cmd = [str(CLI), "mcp", "--transport", "http", "--port", str(port), "--user", "u2"]
    with background([*cmd, "--data-dir", str(tmp_path / "data")], log, _env()) as proc:
        wait_for_http(proc, url, log, timeout_s=STARTUP_S, healthy=False)  # any answer: it is listening
        with anyio.fail_after(60):
            async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                _assert_same_tools((await session.list_tools()).tools)
                result = await session.call_tool("remember", {"content": FACT})
                assert not result.is_error, _text(result)
                result = await session.call_tool("recall", {"query": QUESTION})
                assert not result.is_error and "Porto" in _text(result), _text(result)
        proc.terminate()
        assert proc.wait(timeout=30) == 0, log.read_text()[-3000:]
    assert url in log.read_text()
    _no_traceback(log)


# -- remote backend: a real `cognis-memory serve` --------------------------------------------
async def test_remote_backend_and_user_isolation(tmp_path):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = _env(COGNIS_DATA_DIR=str(tmp_path / "data"), COGNIS_API_KEYS="mcp-key=acme")
    with background([str(CLI), "serve", "--port", str(port)], tmp_path / "serve.log", env) as proc:
        wait_for_http(proc, f"{base}/health", tmp_path / "serve.log", timeout_s=STARTUP_S)

        client_env = _env(COGNIS_API_KEY="mcp-key")  # the key from the environment
        alice, bob = tmp_path / "alice.err", tmp_path / "bob.err"
        async with stdio_session(["--user", "alice", "--url", base], alice, client_env) as session:
            result = await session.call_tool("remember", {"content": FACT})
            assert not result.is_error, _text(result)
            result = await session.call_tool("recall", {"query": QUESTION})
            assert not result.is_error and "Porto" in _text(result), _text(result)
        async with stdio_session(["--user", "bob", "--url", base, "--api-key", "mcp-key"], bob, _env()) as session:
            result = await session.call_tool("recall", {"query": QUESTION})
            assert not result.is_error, _text(result)
            assert "Porto" not in _text(result)
        _no_traceback(alice)
        _no_traceback(bob)

        # stored through the server, for the key's tenant and the bound user
        async with httpx.AsyncClient(base_url=base, headers={"X-API-Key": "mcp-key"}, timeout=30) as http:
            r = await http.get("/v1/users/alice/memories")
        assert [FACT in m["content"] for m in r.json()["memories"]] == [True]

        # a wrong key fails at startup with the API's message, not on every tool call
        with anyio.fail_after(60):
            run = await anyio.run_process(
                [str(CLI), "mcp", "--user", "alice", "--url", base, "--api-key", "wrong"],
                stdin=subprocess.DEVNULL, env=_env(), check=False,
            )  # fmt: skip
        stderr = run.stderr.decode()
        assert run.returncode == 1 and run.stdout == b""
        assert "API key" in stderr and "Traceback" not in stderr


# -- command line ----------------------------------------------------------------------------
def test_user_is_required(monkeypatch, capsys):
    from cognis_memory.cli import main

    monkeypatch.delenv("COGNIS_MCP_USER", raising=False)
    assert main(["mcp"]) == 2
    assert "--user" in capsys.readouterr().err


def test_missing_sdk_names_the_extra(monkeypatch, capsys):
    import cognis_memory
    from cognis_memory.cli import main

    monkeypatch.delitem(sys.modules, "cognis_memory.mcp_server", raising=False)
    monkeypatch.delattr(cognis_memory, "mcp_server", raising=False)
    monkeypatch.setitem(sys.modules, "mcp", None)  # `import mcp` now fails as if it were not installed
    assert main(["mcp", "--user", "u"]) == 2
    assert "pip install 'cognis-memory[mcp]'" in capsys.readouterr().err
