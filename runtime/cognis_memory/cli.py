"""The ``cognis-memory`` command line.

Configuration comes from flags, then ``COGNIS_*`` environment variables, then defaults
(see :class:`cognis_memory.config.Settings`). Every command works on the configured store;
by default the embedded SQLite store under ``./.cognis``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from .config import Settings
from .domain import JobStatus, Scope
from .errors import CognisError, InvalidInputError
from .providers.embedding_models import EMBEDDING_MODELS
from .providers.registry import EMBEDDERS, LLMS, RERANKERS
from .serialization import memory_to_dict as _memory_json
from .stores.registry import STORES

IMPORT_BATCH = 128


def _settings(args: argparse.Namespace) -> Settings:
    overrides: dict[str, Any] = {}
    names = ("store", "data_dir", "recipe", "host", "port", "llm", "reranker", "embedder", "embedder_path", "telemetry")
    for name in names:
        value = getattr(args, name, None)
        if value is not None:
            overrides[name] = value
    return Settings(**overrides)


def _parse_time(field: str, value: Any) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)):
        raise InvalidInputError(field, "use an ISO 8601 string, e.g. 2024-05-01T10:00:00Z")
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInputError(field, f"not an ISO 8601 time: {str(value)[:40]!r}") from None


_MESSAGE_FIELDS = {
    "content", "text", "speaker", "role", "timestamp", "session_id", "agent_id", "client_message_id", "scope",
    "metadata", "user_id",
}  # fmt: skip


def read_conversation(path: Path, default_user: str | None) -> Iterator[tuple[str, dict[str, Any]]]:
    """(user_id, message dict) pairs from a JSON or JSONL file.

    Accepted shapes: JSONL with one message object per line; a JSON list of messages; or a
    JSON object ``{"user_id": ..., "messages": [...]}``. A message has ``content`` (or
    ``text``) and optionally speaker, role, timestamp (ISO 8601), session_id, agent_id,
    client_message_id, scope, metadata, user_id (else ``--user``).
    """
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if path.suffix == ".jsonl" or (stripped and stripped[0] == "{" and "\n{" in stripped):
        items: list[Any] = []
        for n, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    items.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise InvalidInputError(f"line {n}", f"not valid JSON ({exc.msg}, column {exc.colno})") from None
        user = default_user
    else:
        doc = json.loads(text)
        if isinstance(doc, dict):
            user = doc.get("user_id", default_user)
            items = doc.get("messages", [])
        else:
            user, items = default_user, doc
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise InvalidInputError(f"messages[{i}]", "must be an object")
        unknown = set(item) - _MESSAGE_FIELDS
        if unknown:
            raise InvalidInputError(f"messages[{i}].{sorted(unknown)[0]}", "unknown field")
        uid = item.get("user_id", user)
        if not uid:
            raise InvalidInputError(f"messages[{i}].user_id", "missing: give user_id in the file or --user")
        yield uid, item


_ROLES = ("user", "assistant", "system", "tool")


def _message_in(i: int, item: dict[str, Any]):
    from .service import MessageIn

    if item.get("role", "user") not in _ROLES:
        raise InvalidInputError(f"messages[{i}].role", f"must be one of {', '.join(_ROLES)}")
    if item.get("scope", "USER") not in tuple(Scope):
        raise InvalidInputError(f"messages[{i}].scope", f"must be one of {', '.join(Scope)}")
    return MessageIn(
        content=item.get("content", item.get("text", "")),
        speaker=item.get("speaker"),
        role=item.get("role", "user"),
        timestamp=_parse_time(f"messages[{i}].timestamp", item.get("timestamp")),
        session_id=item.get("session_id"),
        agent_id=item.get("agent_id"),
        client_message_id=item.get("client_message_id"),
        scope=Scope(item.get("scope", "USER")),
        metadata=item.get("metadata") or {},
    )


async def _with_service(args: argparse.Namespace, fn, *, run_worker: bool = False, settings: Settings | None = None):
    from .service import MemoryService
    from .telemetry.emitter import Telemetry

    settings = settings or _settings(args)
    # Logs and metrics go to stderr: stdout carries the command's own output (JSON, JSONL).
    telemetry = Telemetry.from_settings(settings, stream=sys.stderr)
    svc = MemoryService.from_settings(settings, telemetry=telemetry)
    await svc.start(run_worker=run_worker)
    try:
        return await fn(svc)
    finally:
        await svc.close()


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from .api.app import create_app
    from .service import MemoryService

    settings = _settings(args)
    app = create_app(MemoryService.from_settings(settings))
    base = f"http://{settings.api.host}:{settings.api.port}"
    inspector = f", inspector {base}/ui/" if settings.api.inspector else ""
    print(f"cognis-memory: serving {base} (API docs {base}/docs{inspector})", file=sys.stderr, flush=True)
    uvicorn.run(
        app, host=settings.api.host, port=settings.api.port, log_level="warning", access_log=False, server_header=False
    )
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    from .service import MessageIn

    async def run(svc):
        msg = MessageIn(
            content=args.content,
            speaker=args.speaker,
            timestamp=_parse_time("timestamp", args.timestamp),
            session_id=args.session,
            client_message_id=args.client_id,
        )
        res = await svc.add_messages(args.tenant, args.user, [msg], background=False)
        if res.job is not None:
            await svc.worker.drain()
        return {"messages": [m.id for m in res.messages], "memories": [_memory_json(m) for m in res.raw_memories]}

    print(json.dumps(asyncio.run(_with_service(args, run)), indent=2))
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    async def run(svc):
        res = await svc.search(
            args.tenant,
            args.user,
            args.query,
            limit=args.limit,
            session_id=args.session,
            include_history=args.history,
            explain=args.explain,
            now=_parse_time("now", args.now),
            recipe=args.recipe_name,
        )
        return {
            "results": [
                {"score": round(h.score, 4), **_memory_json(h.memory), "history": [_memory_json(v) for v in h.history]}
                | ({"scores": h.scores} if args.explain else {})
                for h in res.hits
            ],
            "degraded": res.degraded,
            "query_analysis": res.analysis.to_dict(),
        } | ({"explain": res.explain} if args.explain else {})

    print(json.dumps(asyncio.run(_with_service(args, run)), indent=2, default=str))
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    pairs = list(read_conversation(Path(args.file), args.user))
    messages = [_message_in(i, item) for i, (_, item) in enumerate(pairs)]

    async def run(svc):
        from .domain import utcnow
        from .validation import check_message, check_owner

        now = utcnow()
        for i, ((uid, _), m) in enumerate(zip(pairs, messages, strict=True)):
            # The service's own checks, for the whole file before anything is stored, so a bad
            # message names its index in the file and an import is all or nothing.
            check_message(check_owner(args.tenant, uid), i, m, now, max_bytes=svc.settings.ingest.max_message_bytes)
        created = 0
        batch: list[tuple[int, str, dict[str, Any]]] = []
        bar = tqdm(total=len(pairs), unit="msg", disable=args.quiet, file=sys.stderr)

        async def flush() -> None:
            nonlocal created
            by_user: dict[str, list] = {}
            for i, uid, _item in batch:
                by_user.setdefault(uid, []).append(messages[i])
            for uid, msgs in by_user.items():
                res = await svc.add_messages(args.tenant, uid, msgs, background=True)
                created += sum(res.created)
            bar.update(len(batch))
            batch.clear()

        for i, (uid, item) in enumerate(pairs):
            batch.append((i, uid, item))
            if len(batch) >= IMPORT_BATCH:
                await flush()
        if batch:
            await flush()
        bar.close()
        jobs = await svc.worker.drain(timeout_s=3600) if not args.no_extract else 0
        return {"messages": len(pairs), "created": created, "extraction_jobs_run": jobs}

    print(json.dumps(asyncio.run(_with_service(args, run, settings=_import_settings(args)))))
    return 0


def _import_settings(args: argparse.Namespace) -> Settings:
    """An import is the only work of its process: both (all) cores embed unless told otherwise."""
    settings = _settings(args)
    if args.workers is not None:
        return settings.replace(embedding_workers=args.workers)
    if "workers" not in settings.encoder.model_fields_set:  # not set by COGNIS_EMBEDDING_WORKERS
        return settings.replace(embedding_workers=os.cpu_count() or 1)
    return settings


def cmd_export(args: argparse.Namespace) -> int:
    async def run(svc):
        with contextlib.ExitStack() as stack:
            out = stack.enter_context(open(args.output, "w", encoding="utf-8")) if args.output else sys.stdout
            n = 0
            async for m in svc.export(args.tenant, args.user, include_history=not args.current_only):
                out.write(json.dumps(_memory_json(m)) + "\n")
                n += 1
        return n

    n = asyncio.run(_with_service(args, run))
    print(f"exported {n} memories", file=sys.stderr)
    return 0


def cmd_forget_user(args: argparse.Namespace) -> int:
    if not args.yes:
        print("forget-user deletes every message, memory, version and job of this user; add --yes", file=sys.stderr)
        return 2

    async def run(svc):
        return await svc.forget_user(args.tenant, args.user)

    print(json.dumps(asyncio.run(_with_service(args, run))))
    return 0


def cmd_api_key(args: argparse.Namespace) -> int:
    if args.action == "revoke" and not args.key:
        raise InvalidInputError("--key", "give the key to revoke")

    async def run(svc):
        if args.action == "create":
            key = await svc.create_api_key(args.tenant, read_only=args.read_only, name=args.name or "")
            return {"api_key": key, "tenant_id": args.tenant, "read_only": args.read_only}
        if await svc.revoke_api_key(args.key):
            return {"revoked": True}
        return {"revoked": False, "note": REVOKE_UNKNOWN_NOTE}

    print(json.dumps(asyncio.run(_with_service(args, run))))
    return 0


REVOKE_UNKNOWN_NOTE = (
    "not a key this store or this process's COGNIS_API_KEYS knows as valid; it is recorded as revoked all the same "
    "(a COGNIS_API_KEYS key of another process is refused from now on)"
)


def cmd_jobs(args: argparse.Namespace) -> int:
    from .api.schemas import JobOut

    if args.limit is not None and args.limit < 1:
        raise InvalidInputError("--limit", "must be at least 1")

    async def run(svc):
        n, after = 0, None
        while args.limit is None or n < args.limit:
            page_size = 500 if args.limit is None else min(500, args.limit - n)
            page = await svc.list_jobs(args.tenant, status=args.status, limit=page_size, after=after)
            for job in page:
                print(JobOut.of(job).model_dump_json())
            n += len(page)
            if len(page) < page_size:
                break
            after = page[-1].id
        return n

    n = asyncio.run(_with_service(args, run))
    print(f"listed {n} jobs", file=sys.stderr)
    return 0


def cmd_recipes(args: argparse.Namespace) -> int:
    from .retrieval.config import RECIPE_DESCRIPTIONS, RECIPES

    for name, cfg in RECIPES.items():
        print(f"{name:28s} {RECIPE_DESCRIPTIONS.get(name, '')}")
        if args.verbose:
            print("    " + json.dumps(cfg.model_dump()))
    return 0


def cmd_fetch_model(args: argparse.Namespace) -> int:
    print(f"fetching {args.model} ...", file=sys.stderr)
    directory = EMBEDDING_MODELS[args.model].fetch()
    print(f"{args.model}: {directory} (use it with COGNIS_EMBEDDING_MODEL={args.model})")
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    from .stores.migrate import migrate_postgres

    applied = asyncio.run(migrate_postgres(_settings(args)))
    print(json.dumps({"applied": applied}))
    return 0


def cmd_reconcile(args: argparse.Namespace) -> int:
    async def run(svc):
        from .stores.reconcile import reconcile

        if svc.stores.name != "dual":
            raise InvalidInputError(
                "store", f"reconcile compares the dual store's indexes; this is {svc.stores.name!r}"
            )
        report = await reconcile(svc.stores.backend, repair=args.repair, tenant_id=args.tenant_filter)
        return report.to_dict()

    report = asyncio.run(_with_service(args, run))
    print(json.dumps(report, indent=2))
    drift = report.get("drift", 0)
    return 1 if drift and not args.repair else 0


MCP_INSTALL_HINT = "the MCP server needs the MCP Python SDK: pip install 'cognis-memory[mcp]'"


def cmd_mcp(args: argparse.Namespace) -> int:
    user = args.user or os.environ.get("COGNIS_MCP_USER")
    if not user:
        print("error: give the user whose memory this server serves: --user USER (or COGNIS_MCP_USER)", file=sys.stderr)
        return 2
    if args.api_key and not args.url:
        print("error: --api-key is for a remote server; give --url too", file=sys.stderr)
        return 2
    try:
        from . import mcp_server
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] not in ("mcp", "mcp_types"):
            raise
        print(f"error: {MCP_INSTALL_HINT}", file=sys.stderr)
        return 2
    options = mcp_server.McpOptions(
        user_id=user,
        session_id=args.session_id,
        agent_id=args.agent_id,
        transport=args.transport,
        host=args.mcp_host,
        port=args.mcp_port,
        url=args.url,
        api_key=(args.api_key or os.environ.get("COGNIS_API_KEY")) if args.url else None,
        settings=None if args.url else _settings(args),
        tenant=args.tenant,
    )
    if options.transport == "http" and options.host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"warning: the MCP endpoint has no authentication; anyone who can reach {options.host}:{options.port} "
            f"reads and writes the memory of user {user!r}",
            file=sys.stderr,
        )
    try:
        asyncio.run(mcp_server.run(options))
    except mcp_server.StartupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2 if exc.status in (400, 422) else 1
    except KeyboardInterrupt:
        return 130
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cognis-memory",
        description="Long-term memory for conversational agents. Settings: flags > COGNIS_* env vars > defaults.",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--store", choices=list(STORES), help="store kind (COGNIS_STORE)")
    common.add_argument("--data-dir", dest="data_dir", help="embedded store directory (COGNIS_DATA_DIR)")
    common.add_argument("--recipe", help="retrieval recipe (COGNIS_RECIPE); see 'recipes'")
    common.add_argument("--llm", choices=["none", *LLMS], help="extraction LLM (COGNIS_LLM)")
    common.add_argument("--reranker", choices=["none", *RERANKERS], help="reranker (COGNIS_RERANKER)")
    common.add_argument(
        "--embedder",
        choices=list(EMBEDDERS),
        help="embedding runtime (COGNIS_EMBEDDER, default onnx)",
    )
    common.add_argument(
        "--embedder-path", dest="embedder_path", help="embedding model: .onnx file or sentence-transformers dir"
    )
    common.add_argument(
        "--telemetry",
        choices=["auto", "emf", "json", "text", "off"],
        help="per-request log output (COGNIS_TELEMETRY; auto: EMF on ECS/Lambda, text on a terminal, else JSON)",
    )
    owner = argparse.ArgumentParser(add_help=False)
    owner.add_argument("--tenant", default="default", help="tenant id (default: 'default')")
    owner.add_argument("--user", required=True, help="user id")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", parents=[common], help="run the HTTP API")
    s.add_argument("--host", help="bind address (COGNIS_HOST, default 127.0.0.1)")
    s.add_argument("--port", type=int, help="port (COGNIS_PORT, default 8080)")
    s.set_defaults(func=cmd_serve)

    s = sub.add_parser("add", parents=[common, owner], help="add one message")
    s.add_argument("content")
    s.add_argument("--speaker")
    s.add_argument("--timestamp", help="ISO 8601 (default: now)")
    s.add_argument("--session")
    s.add_argument("--client-id", dest="client_id", help="idempotency key")
    s.set_defaults(func=cmd_add)

    s = sub.add_parser("search", parents=[common, owner], help="search a user's memories")
    s.add_argument("query")
    s.add_argument("--limit", type=int, default=10)
    s.add_argument("--session")
    s.add_argument("--history", action="store_true", help="include earlier versions")
    s.add_argument("--explain", action="store_true", help="per-stage scores and timings")
    s.add_argument("--now", help="reference time for relative expressions (ISO 8601)")
    s.add_argument("--use-recipe", dest="recipe_name", help="recipe for this search only")
    s.set_defaults(func=cmd_search)

    s = sub.add_parser("import", parents=[common], help="import a JSON/JSONL conversation file")
    s.add_argument("file")
    s.add_argument("--tenant", default="default")
    s.add_argument("--user", help="user id for messages without one")
    s.add_argument("--no-extract", action="store_true", help="do not run extraction jobs now")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.add_argument(
        "--workers",
        type=int,
        help="model calls at once (COGNIS_EMBEDDING_WORKERS; default for import: the CPU count)",
    )
    s.set_defaults(func=cmd_import)

    s = sub.add_parser("export", parents=[common, owner], help="export a user's memories as JSONL")
    s.add_argument("--output", "-o", help="file (default: stdout)")
    s.add_argument("--current-only", action="store_true", help="skip earlier versions and tombstones")
    s.set_defaults(func=cmd_export)

    s = sub.add_parser("forget-user", parents=[common, owner], help="hard-delete everything of a user")
    s.add_argument("--yes", action="store_true", help="confirm")
    s.set_defaults(func=cmd_forget_user)

    s = sub.add_parser(
        "api-key",
        parents=[common],
        help="create or revoke API keys (stored hashed)",
        description=(
            "create: a new random key for --tenant, printed once; only its hash is stored. "
            "revoke: refuse --key from now on, for good and in every process of this store, also a key listed in "
            "COGNIS_API_KEYS (even when this command runs without that list)."
        ),
    )
    s.add_argument("action", choices=["create", "revoke"])
    s.add_argument("--tenant", default="default")
    s.add_argument("--read-only", action="store_true")
    s.add_argument("--name")
    s.add_argument("--key", help="the key to revoke")
    s.set_defaults(func=cmd_api_key)

    s = sub.add_parser(
        "jobs",
        parents=[common],
        help="list a tenant's ingest jobs as JSONL, e.g. the dead letters (--status dead)",
    )
    s.add_argument("--tenant", default="default")
    s.add_argument("--status", choices=[st.value for st in JobStatus], help="only jobs in this state")
    s.add_argument("--limit", type=int, help="at most this many (default: all)")
    s.set_defaults(func=cmd_jobs)

    s = sub.add_parser(
        "mcp",
        parents=[common],
        help="serve the memory tools (remember, recall, forget) to MCP clients",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Serve the memory tools remember, recall and forget over the Model Context Protocol, bound to one\n"
            "user: the model never chooses whose memory it reads or writes.\n\n"
            "Backend: the configured store in this process (store flags / COGNIS_* env; default ./.cognis),\n"
            "or with --url a running 'cognis-memory serve' (then the store flags are not used).\n"
            "Transport: stdio (the MCP client starts this command; stdout carries only the protocol), or\n"
            "streamable HTTP at http://HOST:PORT/mcp (no authentication: keep it on 127.0.0.1).\n"
            "Logs and metrics go to stderr. Needs the MCP SDK: pip install 'cognis-memory[mcp]'."
        ),
        epilog=(
            "examples:\n"
            "  cognis-memory mcp --user alice\n"
            "  cognis-memory mcp --user alice --data-dir ~/.cognis --transport http --port 8765\n"
            "  COGNIS_API_KEY=... cognis-memory mcp --user alice --url http://127.0.0.1:8080\n"
            "see docs/mcp.md for MCP client configuration"
        ),
    )
    s.add_argument("--user", help="the user whose memory is served (COGNIS_MCP_USER); required")
    s.add_argument(
        "--tenant",
        default="default",
        help="in-process store: the tenant (default 'default'); with --url the key decides",
    )
    s.add_argument(
        "--session-id", dest="session_id", metavar="ID", help="session of the conversation (CONTEXT-scope memories)"
    )
    s.add_argument("--agent-id", dest="agent_id", metavar="ID", help="agent id recorded on remembered messages")
    s.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="default: stdio")
    s.add_argument(
        "--host", dest="mcp_host", metavar="HOST", default="127.0.0.1", help="http: bind address (default 127.0.0.1)"
    )
    s.add_argument("--port", dest="mcp_port", metavar="PORT", type=int, default=8765, help="http: port (default 8765)")
    s.add_argument("--url", help="use a running cognis-memory API at this URL instead of an in-process store")
    s.add_argument("--api-key", dest="api_key", metavar="KEY", help="API key for --url (COGNIS_API_KEY)")
    s.set_defaults(func=cmd_mcp)

    s = sub.add_parser("recipes", help="list the named retrieval recipes")
    s.add_argument("--verbose", "-v", action="store_true")
    s.set_defaults(func=cmd_recipes)

    s = sub.add_parser(
        "fetch-model",
        help="download an optional embedding model once, check it and build its int8 file in the model cache "
        "(COGNIS_MODEL_CACHE); the service never downloads",
    )
    s.add_argument("model", choices=[name for name, m in EMBEDDING_MODELS.items() if m.fetchable])
    s.set_defaults(func=cmd_fetch_model)

    s = sub.add_parser(
        "migrate",
        parents=[common],
        help="dual store: apply pending PostgreSQL migrations as the schema owner, then exit",
        description=(
            "Apply the pending schema migrations of the dual store's PostgreSQL (advisory-locked), update pgvector, "
            "create and grant COGNIS_POSTGRES_APP_USER and record the embedding model. Needs the owner's credentials "
            "(COGNIS_POSTGRES_DSN, or COGNIS_POSTGRES_HOST with COGNIS_POSTGRES_SECRET_ARN). A service started with "
            'COGNIS_POSTGRES_MIGRATE=false then only checks that the schema is current. Prints {"applied": [...]}.'
        ),
    )
    s.set_defaults(func=cmd_migrate)

    s = sub.add_parser("reconcile", parents=[common], help="dual store: report (and --repair) index drift")
    s.add_argument("--repair", action="store_true")
    s.add_argument("--tenant", dest="tenant_filter")
    s.set_defaults(func=cmd_reconcile)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (InvalidInputError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (CognisError, FileNotFoundError, json.JSONDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
