"""The memory tools (``remember``, ``recall``, ``forget``) as an MCP server, on the official MCP Python SDK.

    cognis-memory mcp --user alice                                   # stdio, in-process store (./.cognis)
    cognis-memory mcp --user alice --transport http --port 8765      # streamable HTTP at /mcp
    cognis-memory mcp --user alice --url http://127.0.0.1:8080 --api-key KEY   # a running API

The tools are the ones of :mod:`cognis_memory.agent_tools`: same names, descriptions and input
schemas (generated from the API models), run by :class:`~cognis_memory.agent_tools.AsyncMemoryToolbox`.
A failed call (bad input, an API error) comes back as a tool result with ``isError`` and the
message, so the model can correct itself.

The user is bound per server process: the model never names whose memory it reads or writes.

Backends: with a URL, an :class:`~cognis_memory.client.AsyncMemoryClient` to a running
``cognis-memory serve``; without one, the service runs in this process and the client talks to
the same FastAPI app through ``httpx.ASGITransport``, so the API's validation and error mapping
apply either way. In-process, auth is disabled (the process is local and bound to one user) and
requests belong to the tenant ``--tenant`` (default ``default``, as for the other CLI commands).

Over stdio nothing but the protocol is written to stdout: the service's logs and EMF metrics go
to stderr, and fd 1 points at stderr while the service starts and (the SDK does it) while it
serves, so stray prints miss the wire.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import httpx
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from .agent_tools import TOOLS, AsyncMemoryToolbox, input_schema
from .client import AsyncMemoryClient, MemoryAPIError
from .config import Settings
from .errors import CognisError

__all__ = ["DEFAULT_PORT", "HTTP_PATH", "McpOptions", "build_mcp_server", "mcp_tools", "open_toolbox", "run"]

logger = logging.getLogger(__name__)

SERVER_NAME = "cognis-memory"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
HTTP_PATH = "/mcp"  # the SDK's default streamable-HTTP path
# Per attempt; a remember with LLM extraction can take most of the LLM timeout (30 s by default).
CLIENT_TIMEOUT_S = 60.0
INTERNAL_ERROR = "internal error in the memory server; see its log"

INSTRUCTIONS = (
    "Long-term memory of the user across conversations. Use recall before answering anything about the "
    "user's life, preferences, plans or past events; remember new facts worth keeping; forget a memory "
    "when the user asks or it is wrong."
)

_ANNOTATIONS: dict[str, types.ToolAnnotations] = {
    "remember": types.ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False),
    "recall": types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
    "forget": types.ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False),
}


def _version() -> str:
    try:
        return version("cognis-memory")
    except PackageNotFoundError:  # running from a source tree
        return "0"


def mcp_tools() -> list[types.Tool]:
    """The MCP tool definitions: the agent tools' names, descriptions and input schemas."""
    return [
        types.Tool(
            name=t.name, description=t.description, input_schema=input_schema(t), annotations=_ANNOTATIONS.get(t.name)
        )
        for t in TOOLS
    ]


def build_mcp_server(toolbox: AsyncMemoryToolbox) -> Server[Any]:
    """An SDK (low-level) server whose tools are run by ``toolbox``; serve it over any transport.

    The low-level server takes the tools' JSON schemas as they are; the toolbox checks the input
    (unknown and required fields, bounds) and the API checks the rest.
    """
    tools = mcp_tools()
    schemas = {t.name: t.input_schema for t in tools}

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            outcome = await toolbox.run(params.name, params.arguments or {})
        except Exception:  # not the model's mistake: keep the details in the server's log
            logger.exception("tool %r failed unexpectedly", params.name)
            return types.CallToolResult(content=[types.TextContent(text=INTERNAL_ERROR)], is_error=True)
        return types.CallToolResult(
            content=[types.TextContent(text=outcome.text)],
            structured_content=outcome.data or None,
            is_error=outcome.is_error,
        )

    return Server(
        SERVER_NAME,
        version=_version(),
        instructions=INSTRUCTIONS,
        get_tool_input_schema=schemas.get,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


@dataclass(slots=True)
class McpOptions:
    """What ``cognis-memory mcp`` was asked for."""

    user_id: str
    session_id: str | None = None
    agent_id: str | None = None
    transport: str = "stdio"  # or "http" (streamable HTTP)
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    url: str | None = None  # a running API; None: the service in this process
    api_key: str | None = None
    settings: Settings | None = None  # the in-process service's settings
    tenant: str = "default"  # the in-process service's tenant (with a URL, the API key decides)


class StartupError(CognisError):
    """The backend refused the configuration (unreachable, bad key, invalid user); ``status`` as the API's."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


def _telemetry(settings: Settings) -> Any:
    from .telemetry.emitter import Telemetry

    # stdout belongs to the protocol (stdio): logs and metrics go to stderr.
    return Telemetry.from_settings(settings.telemetry, stream=sys.stderr)


@asynccontextmanager
async def _client(options: McpOptions) -> AsyncIterator[AsyncMemoryClient]:
    if options.url:
        async with AsyncMemoryClient(options.url, options.api_key, timeout_s=CLIENT_TIMEOUT_S) as client:
            yield client
        return

    from .api.app import create_app
    from .service import MemoryService

    settings = options.settings or Settings()
    service = MemoryService.from_settings(
        settings, telemetry=_telemetry(settings), auth_disabled=True, auth_disabled_tenant=options.tenant
    )
    await service.start()
    try:
        app = create_app(service, manage_lifecycle=False)
        # raise_app_exceptions=False: an unexpected error answers 500 like the real server does.
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with AsyncMemoryClient(
            "http://cognis-memory.local", transport=transport, timeout_s=CLIENT_TIMEOUT_S
        ) as c:
            yield c
    finally:
        await service.close()


@asynccontextmanager
async def open_toolbox(options: McpOptions) -> AsyncIterator[AsyncMemoryToolbox]:
    """The toolbox on the chosen backend, bound to the user, checked with one read (so a wrong URL,
    key or user id fails at startup, not on every tool call); the backend is closed on exit."""
    async with _client(options) as client:
        try:
            await client.list_memories(options.user_id, limit=1)
        except MemoryAPIError as exc:
            where = options.url or "the in-process service"
            raise StartupError(f"cannot use {where} as user {options.user_id!r}: {exc}", exc.status) from None
        yield AsyncMemoryToolbox(client, options.user_id, session_id=options.session_id, agent_id=options.agent_id)


@contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Point fd 1 (and so ``print``, C extensions, child processes) at stderr for the block."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no usable fd 1 or 2: nothing to protect
        yield
        return
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


async def serve_stdio(options: McpOptions) -> None:
    async with AsyncExitStack() as stack:
        # The service and the model load before the protocol starts, with stdout diverted; while it
        # serves, the SDK's stdio_server diverts fd 1 itself and keeps a private copy for the wire.
        with _stdout_to_stderr():
            toolbox = await stack.enter_async_context(open_toolbox(options))
        server = build_mcp_server(toolbox)
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())


async def serve_http(options: McpOptions) -> None:
    import uvicorn

    async with open_toolbox(options) as toolbox:
        server = build_mcp_server(toolbox)
        # For a loopback host the SDK turns on DNS-rebinding protection (Host and Origin checks).
        app = server.streamable_http_app(streamable_http_path=HTTP_PATH, host=options.host)
        config = uvicorn.Config(
            app, host=options.host, port=options.port, log_level="warning", access_log=False, server_header=False
        )
        print(
            f"cognis-memory MCP server for user {options.user_id!r} at "
            f"http://{options.host}:{options.port}{HTTP_PATH} (streamable HTTP)",
            file=sys.stderr,
            flush=True,
        )
        await uvicorn.Server(config).serve()


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(0)


async def run(options: McpOptions) -> None:
    """Serve until the client closes stdin (stdio) or the process is stopped (HTTP)."""
    if options.transport != "http":
        # SIGTERM keeps its default action here: the SDK's stdin reader is a thread that only
        # ends at EOF, so a graceful exit on SIGTERM would wait for a client that may never close.
        await serve_stdio(options)
        return
    # uvicorn handles SIGTERM (graceful shutdown), then raises it again once it is done: exit
    # cleanly then (status 0, backend closed) rather than by the signal's default action.
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        await serve_http(options)
    finally:
        signal.signal(signal.SIGTERM, previous)
