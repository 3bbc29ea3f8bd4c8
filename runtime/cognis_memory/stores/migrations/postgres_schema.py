"""The PostgreSQL schema's history: the numbered migrations, in order, that :mod:`.postgres` applies (each once,
in its own transaction, recorded in ``schema_migrations``). A migration's SQL may contain ``{dim}`` and
``{dim_short}``, the vector sizes of the store, so a literal brace is written twice."""

from __future__ import annotations

from dataclasses import dataclass


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
    Migration(
        4,
        "store settings",
        """
-- Facts about the store itself, e.g. which embedding model's vectors it holds (stores/vector_space.py).
-- Read and written by the schema owner when the service opens the store; the application role never needs it.
CREATE TABLE store_settings (key text PRIMARY KEY, value text NOT NULL);
""",
    ),
    Migration(
        5,
        "message scope and raw memory id as columns",
        """
-- Until now a message's scope and its raw memory's id were the keys "scope" and "raw_memory_id" of its
-- metadata (the values there were always the ones the service used). They become columns; the rows
-- written before get them from their metadata, which loses the two keys. A row whose metadata has neither
-- (written before the service kept them) is USER, as it was read.
ALTER TABLE messages ADD COLUMN scope text NOT NULL DEFAULT 'USER';
ALTER TABLE messages ADD COLUMN raw_memory_id text;
UPDATE messages
SET scope = CASE WHEN metadata ->> 'scope' = 'CONTEXT' THEN 'CONTEXT' ELSE 'USER' END,
    raw_memory_id = metadata ->> 'raw_memory_id',
    metadata = metadata - 'scope' - 'raw_memory_id'
WHERE metadata ? 'scope' OR metadata ? 'raw_memory_id';
""",
    ),
    Migration(
        6,
        "memories and session messages listed in time order",
        """
-- A user's memories are listed and exported by when they were said (the message time, else the creation
-- time), then id in code point order; a session's messages by their timestamp, then id. Each listing walks
-- one of these indexes from the page's cursor on, without a sort.
CREATE INDEX memories_owner_said ON memories (tenant_id, user_id, (COALESCE(message_time, created_at)), id COLLATE "C");
CREATE INDEX messages_owner_session_ts ON messages (tenant_id, user_id, session_id, ts, id COLLATE "C");
""",
    ),
    Migration(
        7,
        "memory chain id",
        """
-- A memory keeps one id across its versions: the id of its first version, kept in every version as
-- chain_id. The rows written before get it by walking each chain forward from its first version
-- (replaces_id IS NULL), within one owner; a row no walk reaches (its first version is gone) is a
-- chain of its own.
ALTER TABLE memories ADD COLUMN chain_id text;
WITH RECURSIVE walk(id, tenant_id, user_id, root) AS (
    SELECT id, tenant_id, user_id, id FROM memories WHERE replaces_id IS NULL
    UNION
    SELECT m.id, m.tenant_id, m.user_id, w.root FROM memories m
    JOIN walk w ON m.replaces_id = w.id AND m.tenant_id = w.tenant_id AND m.user_id = w.user_id
)
UPDATE memories m SET chain_id = w.root FROM walk w WHERE m.id = w.id;
UPDATE memories SET chain_id = id WHERE chain_id IS NULL;
-- A chain is read by its id (stores/version_chain_sql.py).
CREATE INDEX memories_owner_chain ON memories (tenant_id, user_id, chain_id);
-- A service of an earlier release still running during a deploy inserts rows without chain_id: the
-- trigger gives such a row the chain id of the version it replaces (or its own id, for a first version).
CREATE FUNCTION memories_fill_chain_id() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.chain_id := COALESCE(
        (SELECT p.chain_id FROM memories p
         WHERE p.id = NEW.replaces_id AND p.tenant_id = NEW.tenant_id AND p.user_id = NEW.user_id),
        NEW.id);
    RETURN NEW;
END
$$;
CREATE TRIGGER memories_chain_id BEFORE INSERT ON memories
    FOR EACH ROW WHEN (NEW.chain_id IS NULL) EXECUTE FUNCTION memories_fill_chain_id();
""",
    ),
    Migration(
        8,
        "superseded sources as a memory column",
        """
-- A fact version's superseded sources (the messages that stated what it replaced, oldest first) were the key
-- "superseded_sources" of its metadata. They become a column; the fact rows written before get the key's list
-- (its string items, in order) and lose the key. Only facts: their metadata is the service's own, while a raw
-- memory's holds the caller's message metadata, where a key of that name is the caller's and stays.
ALTER TABLE memories ADD COLUMN superseded_sources text[] NOT NULL DEFAULT '{{}}';
CREATE FUNCTION memories_superseded_sources_of(metadata jsonb) RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN jsonb_typeof(metadata -> 'superseded_sources') = 'array' THEN ARRAY(
        SELECT e.value #>> '{{}}' FROM jsonb_array_elements(metadata -> 'superseded_sources') WITH ORDINALITY AS e(value, n)
        WHERE jsonb_typeof(e.value) = 'string' ORDER BY e.n
    ) ELSE '{{}}'::text[] END
$$;
UPDATE memories
SET superseded_sources = memories_superseded_sources_of(metadata), metadata = metadata - 'superseded_sources'
WHERE kind = 'fact' AND metadata ? 'superseded_sources';
-- A service of an earlier release still running during a deploy inserts fact versions with the key in their
-- metadata: the trigger moves it into the column, as the UPDATE above did for the rows written before. (The
-- metadata is looked at in the function, not in the trigger's WHEN, which would tie the column to the trigger.)
CREATE FUNCTION memories_move_superseded_sources() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.metadata ? 'superseded_sources' THEN
        NEW.superseded_sources := memories_superseded_sources_of(NEW.metadata);
        NEW.metadata := NEW.metadata - 'superseded_sources';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER memories_superseded_sources BEFORE INSERT ON memories
    FOR EACH ROW WHEN (NEW.kind = 'fact') EXECUTE FUNCTION memories_move_superseded_sources();
""",
    ),
    Migration(
        9,
        "current memories by owner and kind",
        """
-- The fact channel of every search (and the decide step's similar facts) reads one user's current facts
-- only. With the owner's index alone PostgreSQL read every current row of the user to keep the facts: 44 ms
-- for a user of 100,000 raw memories and no fact, on each search.
CREATE INDEX memories_owner_kind_current ON memories (tenant_id, user_id, kind) WHERE is_current;
""",
    ),
)
