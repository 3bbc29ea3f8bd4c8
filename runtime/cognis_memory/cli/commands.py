"""What each ``cognis-memory`` command does (``cmd_<name>``: its parsed arguments in, an exit status out)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from ..config import Settings
from ..errors import InvalidInputError
from ..providers.embedding_models import EMBEDDING_MODELS
from ..serialization import memory_to_dict as _memory_json
from .conversation_file import message_body_of, parse_time, read_conversation
from .store_location import StoreAccess, check_store

IMPORT_BATCH = 128


def _settings(args: argparse.Namespace) -> Settings:
    overrides: dict[str, Any] = {}
    names = ("store", "data_dir", "recipe", "host", "port", "llm", "reranker", "embedder", "embedder_path", "telemetry")
    for name in names:
        value = getattr(args, name, None)
        if value is not None:
            overrides[name] = value
    return Settings(**overrides)


async def _with_service(args: argparse.Namespace, fn, *, run_worker: bool = False, settings: Settings | None = None):
    from ..service import MemoryService
    from ..telemetry.emitter import Telemetry

    settings = settings or _settings(args)
    # Logs and metrics go to stderr: stdout carries the command's own output (JSON, JSONL).
    telemetry = Telemetry.from_settings(settings.telemetry, stream=sys.stderr)
    svc = MemoryService.from_settings(settings, telemetry=telemetry)
    await svc.start(run_worker=run_worker)
    try:
        return await fn(svc)
    finally:
        await svc.close()


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from ..api.app import create_app
    from ..service import MemoryService

    settings = _settings(args)
    app = create_app(MemoryService.from_settings(settings))
    base = f"http://{settings.api.host}:{settings.api.port}"
    inspector = f", inspector {base}/ui/" if settings.api.inspector else ""
    print(f"cognis-memory: serving {base} (API docs {base}/docs{inspector})", file=sys.stderr, flush=True)
    for line in _api_key_lines(settings):
        print(f"cognis-memory: {line}", file=sys.stderr, flush=True)
    uvicorn.run(
        app, host=settings.api.host, port=settings.api.port, log_level="warning", access_log=False, server_header=False
    )
    return 0


def _api_key_lines(settings: Settings) -> list[str]:
    """Which tenant each ``COGNIS_API_KEYS`` entry serves (a key of another tenant than the data's finds nothing)."""
    from ..api_keys import describe_api_key_list, parse_api_key_list
    from ..validation import check_id

    listed = settings.api.api_keys.get_secret_value() if settings.api.api_keys is not None else ""
    lines = describe_api_key_list(parse_api_key_list(listed, check_id))
    return lines or ["COGNIS_API_KEYS is not set: only keys made by 'cognis-memory api-key create' are accepted"]


def _report_tenant(tenant: str, users: list[str]) -> None:
    """Say on stderr where a command wrote: a server shows it only to API keys of that tenant."""
    shown = ", ".join(repr(u) for u in users[:3]) + (f" and {len(users) - 3} more" if len(users) > 3 else "")
    print(
        f"cognis-memory: stored for tenant {tenant!r}, user{'s' if len(users) > 1 else ''} {shown}; "
        f"over HTTP an API key of tenant {tenant!r} reads it (COGNIS_API_KEYS=KEY={tenant})",
        file=sys.stderr,
    )


def cmd_add(args: argparse.Namespace) -> int:
    from ..service import MessageBody

    async def run(svc):
        msg = MessageBody(
            content=args.content,
            speaker=args.speaker,
            timestamp=parse_time("timestamp", args.timestamp),
            session_id=args.session,
            client_message_id=args.client_id,
        )
        res = await svc.add_messages(args.tenant, args.user, [msg], background=False)
        if res.job is not None:
            await svc.worker.drain()
        return {"messages": [m.id for m in res.messages], "memories": [_memory_json(m) for m in res.raw_memories]}

    print(json.dumps(asyncio.run(_with_service(args, run)), indent=2))
    _report_tenant(args.tenant, [args.user])
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    from ..api.schemas import SearchOut
    from ..search_filter import MemoryFilter

    async def run(svc):
        res = await svc.search(
            args.tenant,
            args.user,
            args.query,
            limit=args.limit,
            filter=MemoryFilter(session_id=args.session),
            include_history=args.history,
            explain=args.explain,
            now=parse_time("now", args.now),
            recipe=args.recipe_name,
        )
        out = SearchOut.of(res, explain=args.explain).model_dump(mode="json")
        for result, hit in zip(out["results"], res.hits, strict=True):
            # Deprecated (one release): the memory's fields at the top of each result, as earlier releases
            # printed them; read them under "memory", as the HTTP API answers.
            result.update({k: v for k, v in _memory_json(hit.memory).items() if k not in result})
        return out

    print(json.dumps(asyncio.run(_with_service(args, run)), indent=2, default=str))
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    pairs = list(read_conversation(Path(args.file), args.user))
    messages = [message_body_of(i, item) for i, (_, item) in enumerate(pairs)]

    async def run(svc):
        from ..domain import utcnow
        from ..validation import check_message, check_owner

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
    _report_tenant(args.tenant, sorted({uid for uid, _ in pairs}))
    return 0


def _import_settings(args: argparse.Namespace) -> Settings:
    """The settings with ``--workers`` (model threads; by default one per CPU, as in the server)."""
    settings = _settings(args)
    if args.workers is not None:
        return settings.replace(embedding_workers=args.workers)
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
    from ..api.schemas import JobOut

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


def cmd_messages(args: argparse.Namespace) -> int:
    from ..api.schemas import SessionMessageOut

    if args.limit is not None and args.limit < 1:
        raise InvalidInputError("--limit", "must be at least 1")

    async def run(svc):
        n, cursor = 0, None
        while args.limit is None or n < args.limit:
            page_size = 500 if args.limit is None else min(500, args.limit - n)
            page = await svc.list_session_messages(args.tenant, args.user, args.session, limit=page_size, cursor=cursor)
            for message in page:
                print(SessionMessageOut.of(message).model_dump_json())
            n += len(page)
            if len(page) < page_size:
                break
            cursor = svc.message_cursor(page[-1])
        return n

    n = asyncio.run(_with_service(args, run))
    print(f"listed {n} messages", file=sys.stderr)
    return 0


def cmd_recipes(args: argparse.Namespace) -> int:
    from ..retrieval.recipes import RECIPE_DESCRIPTIONS, RECIPES

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
    from ..wiring import migrate_postgres

    applied = asyncio.run(migrate_postgres(_settings(args)))
    print(json.dumps({"applied": applied}))
    return 0


def cmd_reconcile(args: argparse.Namespace) -> int:
    async def run(svc):
        from ..stores.reconcile import reconcile

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
        from .. import mcp_server
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] not in ("mcp", "mcp_types"):
            raise
        print(f"error: {MCP_INSTALL_HINT}", file=sys.stderr)
        return 2
    if not args.url:
        check_store(args, _settings(args), StoreAccess.WRITE)
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
