"""PostgreSQL schema: ordered, idempotent migrations applied by :meth:`PostgresStore.open`.

Each migration runs once, in its own transaction, and is recorded in ``schema_migrations``.
Concurrent ``open()`` calls (several service tasks starting together) are serialised by a
session-level advisory lock, so two processes never race on ``CREATE EXTENSION`` or on a
half-applied migration. The vector sizes are part of the schema (``vector(dim)``); opening
an existing database with other sizes fails with a clear error instead of corrupting data.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

#: Key of the advisory lock that serialises migrations (any constant bigint; "cognis-m" in ASCII).
MIGRATION_LOCK_KEY = 0x636F676E69732D6D


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str  # may contain {dim} and {dim_short}

    def render(self, dim: int, dim_short: int) -> str:
        return self.sql.format(dim=int(dim), dim_short=int(dim_short))


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "initial schema",
        """
CREATE TABLE messages (
    id text PRIMARY KEY,
    tenant_id text NOT NULL,
    user_id text NOT NULL,
    session_id text,
    agent_id text,
    speaker text,
    role text NOT NULL,
    content text NOT NULL,
    ts timestamptz NOT NULL,
    client_message_id text,
    metadata jsonb NOT NULL DEFAULT '{{}}',
    created_at timestamptz NOT NULL,
    CONSTRAINT messages_client_id UNIQUE (tenant_id, user_id, client_message_id)
);
CREATE INDEX messages_owner ON messages (tenant_id, user_id);

CREATE TABLE memories (
    id text PRIMARY KEY,
    tenant_id text NOT NULL,
    user_id text NOT NULL,
    agent_id text,
    session_id text,
    scope text NOT NULL,
    category text NOT NULL,
    kind text NOT NULL,
    content text NOT NULL,
    speaker text,
    event_time timestamptz,
    message_time timestamptz,
    created_at timestamptz NOT NULL,
    version integer NOT NULL,
    is_current boolean NOT NULL,
    deleted boolean NOT NULL DEFAULT false,
    replaces_id text,
    source_message_ids text[] NOT NULL DEFAULT '{{}}',
    metadata jsonb NOT NULL DEFAULT '{{}}',
    embedding vector({dim}) NOT NULL,
    embedding_short vector({dim_short}) NOT NULL
);
-- Every search is one owner's current rows: this partial index is what most queries use.
CREATE INDEX memories_owner_current ON memories (tenant_id, user_id) WHERE is_current;
-- Export/paging by id (history included) and ownership checks.
CREATE INDEX memories_owner_id ON memories (tenant_id, user_id, id);
-- Walking version chains forwards.
CREATE INDEX memories_replaces ON memories (replaces_id) WHERE replaces_id IS NOT NULL;
-- Stage 1 of the vector search: HNSW over the short prefix of current rows only.
CREATE INDEX memories_short_hnsw ON memories
    USING hnsw (embedding_short vector_cosine_ops) WITH (m = 16, ef_construction = 64) WHERE is_current;

CREATE TABLE jobs (
    id text PRIMARY KEY,
    tenant_id text NOT NULL,
    user_id text NOT NULL,
    message_ids jsonb NOT NULL,
    status text NOT NULL,
    attempts integer NOT NULL,
    max_attempts integer NOT NULL,
    last_error text,
    next_attempt_at timestamptz NOT NULL,
    lease_until timestamptz,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    result jsonb NOT NULL DEFAULT '{{}}'
);
CREATE INDEX jobs_due ON jobs (next_attempt_at) WHERE status IN ('queued', 'failed');
CREATE INDEX jobs_lease ON jobs (lease_until) WHERE status = 'running';
CREATE INDEX jobs_owner ON jobs (tenant_id, user_id);

-- Transactional outbox of the dual store: OpenSearch work written in the same transaction
-- as the Postgres change it mirrors, deleted only after OpenSearch acknowledged it.
CREATE TABLE outbox (
    id bigserial PRIMARY KEY,
    op text NOT NULL CHECK (op IN ('upsert', 'delete', 'forget')),
    memory_id text,
    tenant_id text NOT NULL,
    user_id text NOT NULL,
    version integer,
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error text,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX outbox_owner ON outbox (tenant_id, user_id);
CREATE INDEX outbox_memory ON outbox (memory_id) WHERE memory_id IS NOT NULL;

CREATE TABLE api_keys (
    key_hash text PRIMARY KEY,
    tenant_id text NOT NULL,
    read_only boolean NOT NULL,
    name text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now()
);
""",
    ),
    Migration(
        2,
        "durable API-key revocations",
        """
-- A revoked key's hash, kept for good: the keys of COGNIS_API_KEYS are not stored rows, so their
-- revocation can only live here, and a listed key whose hash is here is refused.
CREATE TABLE api_key_revocations (
    key_hash text PRIMARY KEY,
    revoked_at timestamptz NOT NULL DEFAULT now()
);
""",
    ),
    Migration(
        3,
        "jobs listed per tenant",
        """
-- GET /v1/jobs: one tenant's jobs by id, all of them or those of one status (e.g. dead).
CREATE INDEX jobs_tenant_id ON jobs (tenant_id, id);
CREATE INDEX jobs_tenant_status_id ON jobs (tenant_id, status, id);
""",
    ),
)


class SchemaMismatchError(ValueError):
    """The database was created for other vector sizes than the service is configured with."""


async def apply_migrations(conn: psycopg.AsyncConnection, *, dim: int, dim_short: int) -> list[int]:
    """Apply every pending migration on ``conn`` (an autocommit connection); returns the versions applied.

    Safe to call concurrently from many processes: the whole run holds an advisory lock.
    """
    applied_now: list[int] = []
    await conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        cur = await conn.execute("SELECT version FROM schema_migrations")
        done = {r[0] for r in await cur.fetchall()}
        for m in MIGRATIONS:
            if m.version in done:
                continue
            async with conn.transaction():
                await conn.execute(m.render(dim, dim_short))  # type: ignore[arg-type]
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (m.version, m.name)
                )
            applied_now.append(m.version)
        await check_dimensions(conn, dim=dim, dim_short=dim_short)
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
    return applied_now


async def check_dimensions(conn: psycopg.AsyncConnection, *, dim: int, dim_short: int) -> None:
    """Raise :class:`SchemaMismatchError` when the ``memories`` vectors have other sizes."""
    cur = await conn.execute(
        "SELECT attname, atttypmod FROM pg_attribute"
        " WHERE attrelid = 'memories'::regclass AND attname IN ('embedding', 'embedding_short')"
    )
    sizes = {name: mod for name, mod in await cur.fetchall()}
    if sizes.get("embedding") != dim or sizes.get("embedding_short") != dim_short:
        raise SchemaMismatchError(
            f"embedding sizes: the database holds {sizes.get('embedding')}/{sizes.get('embedding_short')}-d vectors "
            f"but the service is configured for {dim}/{dim_short}; use another database or re-import"
        )
