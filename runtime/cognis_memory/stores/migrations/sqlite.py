"""SQLite schema of the embedded store: ordered migrations applied by :meth:`EmbeddedStore.open`.

The same shape as PostgreSQL's (:mod:`.postgres`): one ordered tuple is the whole history of the
schema, and each migration runs once, in a transaction of its own, together with the record of its
version. The record is the one-row ``schema_version`` table that stores have always had (a store
made before migrations existed holds version 1 and today's schema, so it opens unchanged).

* Each migration runs in ``BEGIN IMMEDIATE``: the write lock is taken before the version is read,
  so two processes (or connections) opening one file at once serialise, and the second finds the
  work done. SQLite's DDL is transactional, so a migration that fails halfway leaves the schema
  and the recorded version as they were.
* A store whose recorded version is newer than the newest migration of this build was written by
  a newer release: it is refused (:class:`SchemaTooNewError`), never opened with a schema the code
  does not know.
* A store that is already current costs one read (no write lock) on open.
* After the numbered migrations, :func:`add_record_columns` adds the columns that ``records/schema.py``
  declares and a table lacks (:mod:`.record_columns`): a new stored field needs no migration here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ...errors import CognisError, ConfigurationError
from .record_columns import RECORD_TABLES, SQLITE_DIALECT, add_column_statement, missing_columns

#: The FTS5 tokenizer of ``memories_fts`` (the in-memory keyword index tokenizes with the same one).
FTS_TOKENIZE = "porter unicode61 remove_diacritics 2"


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str  # statements separated by ";"; may contain {tokenize} (the FTS5 tokenizer)

    def render(self) -> str:
        return self.sql.replace("{tokenize}", FTS_TOKENIZE)

    def statements(self) -> Iterator[str]:
        """The rendered script cut into single statements (``sqlite3.complete_statement`` decides where
        one ends, so a ";" inside a string literal or a trigger body does not cut it)."""
        pending = ""
        for piece in self.render().split(";"):
            pending += piece + ";"
            if sqlite3.complete_statement(pending):
                if _has_code(pending):
                    yield pending.strip()
                pending = ""
        if _has_code(pending.removesuffix(";")):
            raise ValueError(f"migration {self.version} ({self.name}): unterminated statement {pending.strip()!r}")


def _has_code(text: str) -> bool:
    """Whether ``text`` holds more than whitespace, ``;`` and ``--`` comments."""
    return any(line.split("--", 1)[0].strip(" \t;") for line in text.splitlines())


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "initial schema",
        # The schema of every store made before migrations existed, unchanged ("IF NOT EXISTS" and
        # all): a store that lost its version row in a crash gets the row back without harm.
        """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS store_settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS messages (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    session_id TEXT,
    agent_id TEXT,
    speaker TEXT,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    ts REAL NOT NULL,
    client_message_id TEXT,
    metadata TEXT NOT NULL DEFAULT '{}',
    created_at REAL NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS messages_client_id
    ON messages (tenant_id, user_id, client_message_id) WHERE client_message_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS messages_owner ON messages (tenant_id, user_id);
CREATE TABLE IF NOT EXISTS memories (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    agent_id TEXT,
    session_id TEXT,
    scope TEXT NOT NULL,
    category TEXT NOT NULL,
    kind TEXT NOT NULL,
    content TEXT NOT NULL,
    speaker TEXT,
    event_time REAL,
    message_time REAL,
    created_at REAL NOT NULL,
    version INTEGER NOT NULL,
    is_current INTEGER NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0,
    replaces_id TEXT,
    source_message_ids TEXT NOT NULL DEFAULT '[]',
    metadata TEXT NOT NULL DEFAULT '{}',
    embedding BLOB,
    embedding_short BLOB
);
CREATE INDEX IF NOT EXISTS memories_owner_current ON memories (tenant_id, user_id) WHERE is_current = 1;
CREATE INDEX IF NOT EXISTS memories_owner ON memories (tenant_id, user_id, id);
CREATE INDEX IF NOT EXISTS memories_replaces ON memories (replaces_id);
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(
    owner, content, memory_id UNINDEXED, tokenize = '{tokenize}'
);
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    message_ids TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL,
    last_error TEXT,
    next_attempt_at REAL NOT NULL,
    lease_until REAL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    result TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS jobs_due ON jobs (status, next_attempt_at);
CREATE INDEX IF NOT EXISTS jobs_owner ON jobs (tenant_id, user_id);
CREATE INDEX IF NOT EXISTS jobs_tenant_id ON jobs (tenant_id, id);
CREATE INDEX IF NOT EXISTS jobs_tenant_status_id ON jobs (tenant_id, status, id);
CREATE TABLE IF NOT EXISTS api_keys (
    key_hash TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    read_only INTEGER NOT NULL,
    name TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS api_key_revocations (
    key_hash TEXT PRIMARY KEY,
    revoked_at REAL NOT NULL
);
""",
    ),
    Migration(
        2,
        "message scope and raw memory id as columns",
        # Until now a message's scope and its raw memory's id were kept as the keys "scope" and
        # "raw_memory_id" of its metadata (the values there were always the ones the service used).
        # They become columns; the rows written before get them from their metadata, which loses the two
        # keys. A row whose metadata has neither (written before the service kept them) is USER, as it was
        # read. Metadata that SQLite's JSON functions cannot read (a NaN or Infinity number, which Python's
        # JSON writer lets through) is left as it is, with the defaults.
        """
ALTER TABLE messages ADD COLUMN scope TEXT NOT NULL DEFAULT 'USER';
ALTER TABLE messages ADD COLUMN raw_memory_id TEXT;
UPDATE messages
SET scope = CASE WHEN json_extract(metadata, '$.scope') = 'CONTEXT' THEN 'CONTEXT' ELSE 'USER' END,
    raw_memory_id = json_extract(metadata, '$.raw_memory_id'),
    metadata = json_remove(metadata, '$.scope', '$.raw_memory_id')
WHERE CASE WHEN json_valid(metadata)
           THEN json_type(metadata, '$.scope') IS NOT NULL OR json_type(metadata, '$.raw_memory_id') IS NOT NULL
           ELSE 0 END;
""",
    ),
    Migration(
        3,
        "memories and session messages listed in time order",
        # A user's memories are listed and exported by when they were said (the message time, else the
        # creation time), then id; a session's messages by their timestamp, then id. Each listing walks one
        # of these indexes from the page's cursor on, without a sort.
        """
CREATE INDEX IF NOT EXISTS memories_owner_said ON memories (tenant_id, user_id, COALESCE(message_time, created_at), id);
CREATE INDEX IF NOT EXISTS messages_owner_session_ts ON messages (tenant_id, user_id, session_id, ts, id);
""",
    ),
    Migration(
        4,
        "memory chain id",
        # A memory keeps one id across its versions: the id of its first version, kept in every version
        # as chain_id. The rows written before get it by walking each chain forward from its first
        # version (replaces_id IS NULL), within one owner; a row no walk reaches (its first version is
        # gone) is a chain of its own. A chain is then read by its id (stores/version_chain_sql.py). Each step
        # of the walk looks its successors up by replaces_id (INDEXED BY: left to itself, the planner took an
        # owner index and read all of the owner's rows at every step: 114 s instead of 1.7 s on 100k rows).
        """
ALTER TABLE memories ADD COLUMN chain_id TEXT;
CREATE TEMP TABLE chain_roots AS
WITH RECURSIVE walk(id, tenant_id, user_id, root) AS (
    SELECT id, tenant_id, user_id, id FROM memories WHERE replaces_id IS NULL
    UNION
    SELECT m.id, m.tenant_id, m.user_id, w.root FROM memories m INDEXED BY memories_replaces
    JOIN walk w ON m.replaces_id = w.id AND m.tenant_id = w.tenant_id AND m.user_id = w.user_id
)
SELECT id, root FROM walk;
CREATE INDEX temp.chain_roots_id ON chain_roots (id);
UPDATE memories SET chain_id = (SELECT root FROM temp.chain_roots r WHERE r.id = memories.id);
UPDATE memories SET chain_id = id WHERE chain_id IS NULL;
DROP TABLE temp.chain_roots;
CREATE INDEX memories_owner_chain ON memories (tenant_id, user_id, chain_id);
""",
    ),
    Migration(
        5,
        "superseded sources as a memory column",
        # A fact version's superseded sources (the messages that stated what it replaced, oldest first) were
        # the key "superseded_sources" of its metadata. They become a column; the fact rows written before
        # get the key's list (its text items, in order) and lose the key. Only facts: their metadata is the
        # service's own, while a raw memory's holds the caller's message metadata, where a key of that name
        # is the caller's and stays. Metadata SQLite's JSON functions cannot read is left as it is (a fact's
        # metadata never held anything but this key).
        """
ALTER TABLE memories ADD COLUMN superseded_sources TEXT NOT NULL DEFAULT '[]';
UPDATE memories
SET superseded_sources = CASE WHEN json_type(metadata, '$.superseded_sources') = 'array'
        THEN (SELECT json_group_array(e.value) FROM json_each(memories.metadata, '$.superseded_sources') AS e
              WHERE e.type = 'text')
        ELSE '[]' END,
    metadata = json_remove(metadata, '$.superseded_sources')
WHERE kind = 'fact'
  AND CASE WHEN json_valid(metadata) THEN json_type(metadata, '$.superseded_sources') IS NOT NULL ELSE 0 END;
""",
    ),
)


class SchemaTooNewError(ConfigurationError, RuntimeError):
    """The store was written by a newer release: its schema version is past this build's migrations."""

    def __init__(self, where: str, recorded: int, known: int) -> None:
        super().__init__(
            f"{where} has schema version {recorded}, but this build of cognis-memory knows schema versions up to "
            f"{known}: the store was written by a newer release; run that release (or a newer one) on it"
        )
        self.recorded, self.known = recorded, known


class MigrationError(CognisError, RuntimeError):
    """A migration failed; its transaction was rolled back (the schema and the recorded version are unchanged)."""


def schema_version(conn: sqlite3.Connection) -> int:
    """The recorded schema version; 0 for a new file (no ``schema_version`` table, or no row in it)."""
    exists = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'").fetchone()
    if exists is None:
        return 0
    row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
    return int(row[0]) if row is not None and row[0] is not None else 0


def _record(conn: sqlite3.Connection, version: int) -> None:
    """Set the one row of ``schema_version`` (created if a planted first migration did not)."""
    conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
    if conn.execute("UPDATE schema_version SET version = ?", (version,)).rowcount == 0:
        conn.execute("INSERT INTO schema_version(version) VALUES (?)", (version,))


def _ordered(migrations: Sequence[Migration]) -> tuple[Migration, ...]:
    versions = [m.version for m in migrations]
    if any(v < 1 for v in versions) or versions != sorted(set(versions)):
        raise ValueError(f"migrations must have strictly increasing versions from 1 on, got {versions}")
    return tuple(migrations)


def apply_migrations(
    conn: sqlite3.Connection, migrations: Sequence[Migration] = MIGRATIONS, *, where: str = "the store"
) -> list[int]:
    """Apply every pending migration on ``conn``; returns the versions applied by this call.

    ``conn`` must be in autocommit mode (``isolation_level=None``) with no transaction open; it
    should have a busy timeout, since another process may hold the write lock while it migrates.
    Raises :class:`SchemaTooNewError` when the file is past ``migrations`` (``where`` names it),
    :class:`MigrationError` when a migration fails (after rolling it back).
    """
    if conn.isolation_level is not None or conn.in_transaction:
        raise ValueError("apply_migrations needs an autocommit connection (isolation_level=None) outside a transaction")
    ordered = _ordered(migrations)
    known = ordered[-1].version if ordered else 0
    current = schema_version(conn)
    if current > known:
        raise SchemaTooNewError(where, current, known)
    applied: list[int] = []
    for m in ordered:
        if m.version <= current:
            continue
        conn.execute("BEGIN IMMEDIATE")  # the write lock before the read: concurrent openers queue here
        try:
            current = schema_version(conn)  # another connection may have migrated while we waited
            if current > known:
                raise SchemaTooNewError(where, current, known)
            if m.version > current:
                try:
                    for statement in m.statements():
                        conn.execute(statement)
                except sqlite3.Error as e:
                    raise MigrationError(
                        f"{where}: migration {m.version} ({m.name}) failed and was rolled back, "
                        f"the store stays at schema version {current}: {e}"
                    ) from e
                _record(conn, m.version)
                applied.append(m.version)
                current = m.version
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    return applied


def table_columns(conn: sqlite3.Connection) -> dict[str, set[str]]:
    """The columns of each record table that exists (``PRAGMA table_info`` is empty for one that does not)."""
    present = {}
    for table in RECORD_TABLES:
        names = {row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')}
        if names:
            present[table] = names
    return present


def add_record_columns(conn: sqlite3.Connection, *, where: str = "the store") -> list[str]:
    """Add the record columns the tables lack (``table.column`` of each, in one transaction); [] when none
    is missing, which costs three reads and no write lock. Same connection rules as :func:`apply_migrations`."""
    if not missing_columns(table_columns(conn)):
        return []
    conn.execute("BEGIN IMMEDIATE")
    try:
        pending = missing_columns(table_columns(conn))  # another connection may have added them meanwhile
        for added in pending:
            try:
                conn.execute(add_column_statement(added, SQLITE_DIALECT))
            except sqlite3.Error as e:
                raise MigrationError(
                    f"{where}: adding column {added.table}.{added.column.name} failed and was rolled back: {e}"
                ) from e
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return [f"{a.table}.{a.column.name}" for a in pending]
