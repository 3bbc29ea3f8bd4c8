"""PostgreSQL schema: the ordered, idempotent migrations of :mod:`.postgres_schema` applied by
:meth:`PostgresStore.open`.

Each migration runs once, in its own transaction, and is recorded in ``schema_migrations``.
Concurrent ``open()`` calls (several service tasks starting together) are serialised by a
session-level advisory lock, so two processes never race on ``CREATE EXTENSION`` or on a
half-applied migration. The vector sizes are part of the schema (``vector(dim)``); opening
an existing database with other sizes fails with a clear error instead of corrupting data.

After the numbered migrations, under the same lock, the columns that ``records/schema.py`` declares and a
table lacks are added (:mod:`.record_columns`): a new stored field needs no migration here. A
service that does not migrate refuses a schema that lacks one, naming it.

Every run also, under the same lock:

* brings pgvector to the newest version the server ships (``ALTER EXTENSION vector UPDATE``:
  an engine upgrade does not update extensions) and refuses to go on below
  :data:`MIN_PGVECTOR` (0.8, the first with ``hnsw.iterative_scan``; older versions reserve the
  ``hnsw.`` prefix, so every vector search would fail), naming the installed version;
* when an application role is named, creates it (``LOGIN``, no superuser, no role or database
  creation) and grants it exactly what the service does at run time: data reads and writes on
  the tables and sequences, not DDL and not the migration record. On Amazon RDS/Aurora the role
  is also granted ``rds_iam`` (it then signs in with IAM tokens only). Default privileges cover
  tables that later migrations create.
"""

from __future__ import annotations

import logging
import re

import psycopg
from psycopg import sql

from ...errors import ConfigurationError, SettingError
from .postgres_schema import MIGRATIONS
from .record_columns import POSTGRES_DIALECT, RECORD_TABLES, add_column_statement, missing_columns

log = logging.getLogger(__name__)

#: Key of the advisory lock that serialises migrations (any constant bigint; "cognis-m" in ASCII).
MIGRATION_LOCK_KEY = 0x636F676E69732D6D


class SchemaMismatchError(ConfigurationError, ValueError):
    """The database was created for other vector sizes than the service is configured with."""


async def apply_migrations(
    conn: psycopg.AsyncConnection, *, dim: int, dim_short: int, app_role: str | None = None
) -> list[int]:
    """Apply every pending migration on ``conn`` (an autocommit connection); returns the versions applied.

    ``conn`` must belong to the schema owner (on Aurora, the master user). With ``app_role``
    the least-privilege role the service's pool connects as is created and granted afterwards.
    Safe to call concurrently from many processes: the whole run holds an advisory lock.
    """
    applied_now: list[int] = []
    await conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        update_error = await update_pgvector(conn)
        await require_pgvector(conn, update_error=update_error)
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
                await conn.execute(m.render(dim, dim_short))
                await conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (m.version, m.name))
            applied_now.append(m.version)
        await add_record_columns(conn)
        await check_dimensions(conn, dim=dim, dim_short=dim_short)
        if app_role is not None:
            await ensure_app_role(conn, app_role)
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
    return applied_now


class SchemaNotMigratedError(ConfigurationError, RuntimeError):
    """The service runs without migrating (``postgres_migrate=false``) and the schema is behind this build."""


async def check_schema_current(conn: psycopg.AsyncConnection, *, dim: int, dim_short: int) -> None:
    """Raise :class:`SchemaNotMigratedError` unless every migration of this build is applied; then check
    pgvector and the vector sizes. Needs only read access (the application role has it)."""
    wanted = [m.version for m in MIGRATIONS]
    try:
        cur = await conn.execute("SELECT version FROM schema_migrations")
        done = {r[0] for r in await cur.fetchall()}
    except psycopg.errors.UndefinedTable:
        done = set()
    missing = [v for v in wanted if v not in done]
    lacking = [] if missing else [f"{a.table}.{a.column.name}" for a in missing_columns(await table_columns(conn))]
    if missing or lacking:
        raise SchemaNotMigratedError(
            f"the database schema lacks {f'migrations {missing}' if missing else f'the columns {lacking}'} of this "
            "build and this service does not migrate (postgres_migrate=false): run `cognis-memory migrate` with the "
            "schema owner's credentials (on AWS the stack's migration task does, before the service is updated; "
            "docs/deploy.md, 'Migrations')"
        )
    await require_pgvector(conn)
    await check_dimensions(conn, dim=dim, dim_short=dim_short)


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


# --- columns of the record, added after the numbered migrations ---------------------------------------


async def table_columns(conn: psycopg.AsyncConnection) -> dict[str, set[str]]:
    """The columns of each record table that exists, in the connection's schema."""
    cur = await conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND table_name = ANY(%s)",
        (list(RECORD_TABLES),),
    )
    present: dict[str, set[str]] = {}
    for table, column in await cur.fetchall():
        present.setdefault(table, set()).add(column)
    return present


async def add_record_columns(conn: psycopg.AsyncConnection) -> list[str]:
    """Add the record columns the tables lack, in one transaction (the caller holds the migration lock);
    returns ``table.column`` of each. On PostgreSQL 11 and later adding a column with a constant default
    rewrites no row."""
    pending = missing_columns(await table_columns(conn))
    if pending:
        async with conn.transaction():
            for added in pending:
                await conn.execute(add_column_statement(added, POSTGRES_DIALECT))
        log.info("postgres: added record columns %s", [f"{a.table}.{a.column.name}" for a in pending])
    return [f"{a.table}.{a.column.name}" for a in pending]


# --- pgvector version -------------------------------------------------------------------------------

#: Oldest pgvector the service runs on: 0.8.0 introduced ``hnsw.iterative_scan``.
MIN_PGVECTOR: tuple[int, int] = (0, 8)


class PgvectorVersionError(ConfigurationError, RuntimeError):
    """The database's pgvector is older than :data:`MIN_PGVECTOR` and could not be updated."""


def parse_version(text: str) -> tuple[int, ...]:
    """``"0.7.4"`` -> ``(0, 7, 4)``; trailing non-numeric parts (``"0.8.0-dev"``) are ignored."""
    parts: list[int] = []
    for piece in text.split("."):
        digits = re.match(r"\d+", piece)
        if digits is None:
            break
        parts.append(int(digits.group()))
    return tuple(parts)


def pgvector_version_error(
    installed: str, database: str, *, minimum: tuple[int, ...] = MIN_PGVECTOR, update_error: str | None = None
) -> PgvectorVersionError:
    """The refusal to start, naming the installed version, the database and what to do."""
    wanted = ".".join(str(p) for p in minimum)
    message = (
        f"pgvector {installed} is installed in database {database!r}; cognis-memory needs pgvector {wanted} or "
        f"newer (its vector search sets hnsw.iterative_scan, which older versions reject). "
    )
    if update_error:
        message += f"ALTER EXTENSION vector UPDATE failed: {update_error}. "
    else:
        message += "ALTER EXTENSION vector UPDATE found nothing newer on this server. "
    message += (
        "Move the database to an engine version that ships pgvector >= "
        f"{wanted} (on Aurora PostgreSQL: see docs/deploy.md, 'AWS facts this stack relies on') and start again."
    )
    return PgvectorVersionError(message)


async def update_pgvector(conn: psycopg.AsyncConnection) -> str | None:
    """``ALTER EXTENSION vector UPDATE`` (to the newest version the server ships); the error text if it failed."""
    try:
        await conn.execute("ALTER EXTENSION vector UPDATE")
    except psycopg.Error as e:
        log.warning("postgres: ALTER EXTENSION vector UPDATE failed: %s", e)
        return str(e).strip() or type(e).__name__
    return None


async def require_pgvector(
    conn: psycopg.AsyncConnection, *, minimum: tuple[int, ...] = MIN_PGVECTOR, update_error: str | None = None
) -> str:
    """The installed pgvector version; raises :class:`PgvectorVersionError` below ``minimum``."""
    cur = await conn.execute("SELECT e.extversion, current_database() FROM pg_extension e WHERE e.extname = 'vector'")
    row = await cur.fetchone()
    if row is None:
        raise PgvectorVersionError("the pgvector extension (vector) is not installed")
    installed, database = row
    if parse_version(installed) < tuple(minimum):
        raise pgvector_version_error(installed, database, minimum=minimum, update_error=update_error)
    return installed


# --- application role ---------------------------------------------------------------------------------

#: A plain PostgreSQL identifier: quoted anyway, but no case or character surprises in IAM ARNs.
APP_ROLE_PATTERN = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

#: Create the role once per cluster; a concurrent creator in another database is not an error.
_CREATE_ROLE = """
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = {name}) THEN
        CREATE ROLE {role} LOGIN;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END
$$
"""


def validate_app_role(role: str) -> str:
    if not APP_ROLE_PATTERN.match(role):
        raise SettingError(
            "postgres_app_user", f"{role!r} is not a lower-case PostgreSQL identifier (letters, digits, underscore)"
        )
    return role


async def ensure_app_role(conn: psycopg.AsyncConnection, role: str) -> None:
    """Create ``role`` if missing and grant it the service's run-time privileges, nothing more."""
    ident = sql.Identifier(validate_app_role(role))
    await conn.execute(sql.SQL(_CREATE_ROLE).format(name=sql.Literal(role), role=ident))
    # Whatever the role was created with elsewhere, it gets no administrative attribute.
    await conn.execute(sql.SQL("ALTER ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION").format(ident))
    cur = await conn.execute("SELECT current_database(), EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'rds_iam')")
    database, on_rds = await cur.fetchone()  # type: ignore[misc]
    if on_rds:  # Amazon RDS / Aurora: sign in with IAM authentication tokens
        await conn.execute(sql.SQL("GRANT rds_iam TO {}").format(ident))
    statements = (
        "GRANT CONNECT ON DATABASE {db} TO {role}",
        "GRANT USAGE ON SCHEMA public TO {role}",
        "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}",
        "GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {role}",
        "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {role}",
        "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO {role}",
        # The migration record is the owner's: the service may read it, never rewrite it.
        "REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON schema_migrations FROM {role}",
    )
    for statement in statements:
        await conn.execute(sql.SQL(statement).format(db=sql.Identifier(database), role=ident))
