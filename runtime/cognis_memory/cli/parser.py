"""The ``cognis-memory`` argument parser: every command, its flags and its ``--help``."""

from __future__ import annotations

import argparse

from ..config import DEFAULT_TENANT
from ..domain import JobStatus
from ..providers.embedding_models import EMBEDDING_MODELS
from ..providers.registry import EMBEDDERS, LLMS, RERANKERS
from ..stores.registry import STORES
from .commands import (
    cmd_add,
    cmd_api_key,
    cmd_export,
    cmd_fetch_model,
    cmd_forget_user,
    cmd_import,
    cmd_jobs,
    cmd_mcp,
    cmd_messages,
    cmd_migrate,
    cmd_recipes,
    cmd_reconcile,
    cmd_search,
    cmd_serve,
)
from .store_location import StoreAccess

READS, WRITES = StoreAccess.READ, StoreAccess.WRITE
TENANT_HELP = f"tenant id (default: {DEFAULT_TENANT!r}, the tenant of the demo key of scripts/demo.sh)"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cognis-memory",
        description="Long-term memory for conversational agents. Settings: flags > COGNIS_* env vars > defaults.",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--store", choices=list(STORES), help="store kind (COGNIS_STORE)")
    common.add_argument(
        "--data-dir",
        dest="data_dir",
        help="embedded store directory (COGNIS_DATA_DIR, default .cognis); commands that only read refuse one "
        "that does not exist, commands that write create it and say so",
    )
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
    owner.add_argument("--tenant", default=DEFAULT_TENANT, help=TENANT_HELP)
    owner.add_argument("--user", required=True, help="user id")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", parents=[common], help="run the HTTP API")
    s.add_argument("--host", help="bind address (COGNIS_HOST, default 127.0.0.1)")
    s.add_argument("--port", type=int, help="port (COGNIS_PORT, default 8080)")
    s.set_defaults(func=cmd_serve, store_access=WRITES)

    s = sub.add_parser("add", parents=[common, owner], help="add one message")
    s.add_argument("content")
    s.add_argument("--speaker")
    s.add_argument("--timestamp", help="ISO 8601 (default: now)")
    s.add_argument("--session")
    s.add_argument("--client-id", dest="client_id", help="idempotency key")
    s.set_defaults(func=cmd_add, store_access=WRITES)

    s = sub.add_parser(
        "search",
        parents=[common, owner],
        help="search a user's memories",
        description="Print the search's JSON in the HTTP API's shape: results[].memory.{id,content,...}, score, "
        "history (and scores with --explain). Deprecated: each result also repeats the memory's fields at its top "
        "(results[].content, ...), as earlier releases printed them; they go in the next release.",
    )
    s.add_argument("query")
    s.add_argument("--limit", type=int, default=10)
    s.add_argument("--session")
    s.add_argument("--history", action="store_true", help="include earlier versions")
    s.add_argument("--explain", action="store_true", help="per-stage scores and timings")
    s.add_argument("--now", help="reference time for relative expressions (ISO 8601)")
    s.add_argument("--use-recipe", dest="recipe_name", help="recipe for this search only")
    s.set_defaults(func=cmd_search, store_access=READS)

    s = sub.add_parser("import", parents=[common], help="import a JSON/JSONL conversation file")
    s.add_argument("file")
    s.add_argument("--tenant", default=DEFAULT_TENANT, help=TENANT_HELP)
    s.add_argument("--user", help="user id for messages without one")
    s.add_argument("--no-extract", action="store_true", help="do not run extraction jobs now")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.add_argument(
        "--workers",
        type=int,
        help="model calls at once (COGNIS_EMBEDDING_WORKERS; default: one per CPU the process may use)",
    )
    s.set_defaults(func=cmd_import, store_access=WRITES)

    s = sub.add_parser("export", parents=[common, owner], help="export a user's memories as JSONL")
    s.add_argument("--output", "-o", help="file (default: stdout)")
    s.add_argument("--current-only", action="store_true", help="skip earlier versions and tombstones")
    s.set_defaults(func=cmd_export, store_access=READS)

    s = sub.add_parser(
        "messages",
        parents=[common, owner],
        help="print a session's messages as they were sent, in timestamp order, as JSONL",
        description="Print the messages of one session of --user, text unchanged, oldest first (timestamp, then id), "
        "one JSON object a line; the count goes to stderr.",
    )
    s.add_argument("--session", required=True, help="the session id")
    s.add_argument("--limit", type=int, help="at most this many (default: all)")
    s.set_defaults(func=cmd_messages, store_access=READS)

    s = sub.add_parser("forget-user", parents=[common, owner], help="hard-delete everything of a user")
    s.add_argument("--yes", action="store_true", help="confirm")
    s.set_defaults(func=cmd_forget_user, store_access=READS)

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
    s.add_argument("--tenant", default=DEFAULT_TENANT, help=TENANT_HELP)
    s.add_argument("--read-only", action="store_true")
    s.add_argument("--name")
    s.add_argument("--key", help="the key to revoke")
    s.set_defaults(func=cmd_api_key, store_access=WRITES)

    s = sub.add_parser(
        "jobs",
        parents=[common],
        help="list a tenant's ingest jobs as JSONL, e.g. the dead letters (--status dead)",
    )
    s.add_argument("--tenant", default=DEFAULT_TENANT, help=TENANT_HELP)
    s.add_argument("--status", choices=[st.value for st in JobStatus], help="only jobs in this state")
    s.add_argument("--limit", type=int, help="at most this many (default: all)")
    s.set_defaults(func=cmd_jobs, store_access=READS)

    s = sub.add_parser(
        "mcp",
        parents=[common],
        help="serve the memory tools (remember, recall, forget) to MCP clients (needs the [mcp] extra)",
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
        default=DEFAULT_TENANT,
        help=f"in-process store: the tenant (default {DEFAULT_TENANT!r}); with --url the key decides",
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
    s.set_defaults(func=cmd_mcp)  # checks its store itself, after the MCP SDK (none with --url)

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
    s.set_defaults(func=cmd_reconcile)  # dual store only: refuses the embedded one itself
    return p
