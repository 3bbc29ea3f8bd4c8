"""The migration keeps pgvector current and refuses an old one; the pool signs in as a least-privilege role.

Against the local PostgreSQL + pgvector server (``postgres_server``). Older pgvector versions cannot be
installed there (the server ships the newest install script only), so an older installation is
simulated by rewriting ``pg_extension.extversion``: ``ALTER EXTENSION vector UPDATE`` then really runs
the server's update scripts from that version.
"""

from __future__ import annotations

import uuid

import numpy as np
import psycopg
import pytest
from cognis_dev.databases import create_database
from psycopg.conninfo import conninfo_to_dict

from cognis_memory.config import Settings
from cognis_memory.domain import Category, Memory, Message, Owner, utcnow
from cognis_memory.stores.connections import AppRoleDsn, postgres_app_dsn
from cognis_memory.stores.dual import DualStore
from cognis_memory.stores.migrations.postgres import (
    MIN_PGVECTOR,
    PgvectorVersionError,
    apply_migrations,
    parse_version,
    pgvector_version_error,
    validate_app_role,
)
from cognis_memory.stores.settings import PostgresSettings
from cognis_memory.wiring import build_store
from tests.stores.helpers import new_prefix, unit

DIM, DIM_SHORT = 16, 4


def _installed_and_default(dsn: str) -> tuple[str, str]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT installed_version, default_version FROM pg_available_extensions WHERE name = 'vector'"
        ).fetchone()
    assert row is not None
    return row[0], row[1]


def _pretend_installed(dsn: str, version: str) -> None:
    """Make the database look like it runs an older pgvector (the catalog row an old install leaves)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("UPDATE pg_extension SET extversion = %s WHERE extname = 'vector'", (version,))


async def _migrate(dsn: str, **kwargs) -> list[int]:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        return await apply_migrations(conn, dim=DIM, dim_short=DIM_SHORT, **kwargs)


# --- pgvector version ----------------------------------------------------------------------------


@pytest.mark.integration
async def test_migration_updates_pgvector_to_the_servers_newest(postgres_server) -> None:
    dsn = create_database(postgres_server.dsn)
    _, newest = _installed_and_default(dsn)
    older = f"{newest.rsplit('.', 1)[0]}.{int(newest.rsplit('.', 1)[1]) - 1}"  # e.g. 0.8.6 -> 0.8.5
    _pretend_installed(dsn, older)
    assert _installed_and_default(dsn)[0] == older

    await _migrate(dsn)

    assert _installed_and_default(dsn)[0] == newest  # ALTER EXTENSION vector UPDATE ran the update script


@pytest.mark.integration
async def test_migration_refuses_pgvector_below_0_8_and_names_it(postgres_server) -> None:
    """0.7.4 cannot be updated here (the 0.8.0 script re-creates objects the catalog already has), so
    the service must stop before creating anything, saying which version it found."""
    dsn = create_database(postgres_server.dsn)
    _pretend_installed(dsn, "0.7.4")

    with pytest.raises(PgvectorVersionError) as info:
        await _migrate(dsn)

    message = str(info.value)
    assert "pgvector 0.7.4 is installed" in message and conninfo_to_dict(dsn)["dbname"] in message
    assert "0.8 or newer" in message and "ALTER EXTENSION vector UPDATE failed" in message
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT to_regclass('memories')").fetchone() == (None,)


def test_refusal_message_names_the_version_the_minimum_and_the_fix() -> None:
    err = pgvector_version_error("0.7.4", "cognis")
    assert isinstance(err, PgvectorVersionError)
    assert str(err).startswith("pgvector 0.7.4 is installed in database 'cognis'; cognis-memory needs pgvector 0.8")
    assert "hnsw.iterative_scan" in str(err) and "found nothing newer" in str(err) and "docs/deploy.md" in str(err)
    failed = pgvector_version_error("0.5.1", "db", update_error="permission denied")
    assert "ALTER EXTENSION vector UPDATE failed: permission denied" in str(failed)


def test_versions_compare_numerically() -> None:
    assert MIN_PGVECTOR == (0, 8)
    assert parse_version("0.7.4") < MIN_PGVECTOR <= parse_version("0.8.0") < parse_version("0.10.0")
    assert parse_version("0.8.0-dev") == (0, 8, 0)


# --- application role ------------------------------------------------------------------------------


def _role() -> str:
    return f"cognis_app_{uuid.uuid4().hex[:10]}"


@pytest.mark.integration
async def test_pool_signs_in_as_an_app_role_with_data_privileges_only(postgres_server, opensearch_server) -> None:
    """The production wiring (build_store with COGNIS_POSTGRES_APP_USER): the owner migrates and creates
    the role; every pooled connection is that role, which reads and writes data but changes no schema."""
    owner_dsn = create_database(postgres_server.dsn)
    role = _role()
    settings = Settings(
        store="dual",
        postgres_dsn=owner_dsn,
        postgres_app_user=role,
        opensearch_url=opensearch_server.url,
        opensearch_index_prefix=new_prefix(),  # the outbox write below drains into its own index
    )
    dual = build_store(settings, dim=DIM, dim_short=DIM_SHORT).backend
    assert isinstance(dual, DualStore)
    pg = dual.pg
    await pg.open()
    try:
        owner = Owner("t-app-role", "u1")
        saved = await pg.messages.save_messages(
            [Message(owner.tenant_id, owner.user_id, "hello", utcnow(), speaker="u1")]
        )
        assert saved[0][1] is True
        v = unit(np.arange(1, DIM + 1, dtype=np.float32))
        await pg.memories.insert_memories(
            [Memory(owner.tenant_id, owner.user_id, "x", Category.HOBBIES, embedding=v, embedding_short=unit(v[:4]))],
            outbox=True,  # the outbox id comes from a sequence: USAGE on sequences is granted
        )
        async with pg.connection() as conn:
            cur = await conn.execute("SELECT current_user")
            assert (await cur.fetchone())[0] == role
            for ddl in (
                "CREATE TABLE intruder (id int)",
                "DROP TABLE memories",
                "ALTER TABLE memories ADD COLUMN x int",
                "DELETE FROM schema_migrations",
                "ALTER EXTENSION vector UPDATE",
                "CREATE ROLE someone",
            ):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    await conn.execute(ddl)
    finally:
        await pg.close()

    with psycopg.connect(owner_dsn) as conn:
        attrs = conn.execute(
            "SELECT rolcanlogin, rolsuper, rolcreatedb, rolcreaterole FROM pg_roles WHERE rolname = %s", (role,)
        ).fetchone()
        assert attrs == (True, False, False, False)
        assert conn.execute("SELECT count(*) FROM messages").fetchone() == (1,)


@pytest.mark.integration
async def test_app_role_privileges_cover_tables_of_later_migrations(postgres_server) -> None:
    """Default privileges: a table the owner adds after the role exists is usable without a new grant."""
    owner_dsn = create_database(postgres_server.dsn)
    role = _role()
    await _migrate(owner_dsn, app_role=role)
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE later_table (id bigserial PRIMARY KEY, v text)")
    app_dsn = AppRoleDsn(PostgresSettings(postgres_dsn=owner_dsn, postgres_app_user=role), aws_region=None)()
    with psycopg.connect(app_dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO later_table (v) VALUES ('ok')")
        assert conn.execute("SELECT v FROM later_table").fetchone() == ("ok",)
    await _migrate(owner_dsn, app_role=role)  # idempotent on a second start


def test_app_role_dsn_keeps_the_owners_server_and_drops_its_credentials() -> None:
    settings = PostgresSettings(
        postgres_dsn="postgresql://admin:s3cret@db.internal:6432/cognis?sslmode=require",
        postgres_app_user="cognis_app",
    )
    params = conninfo_to_dict(postgres_app_dsn(settings, aws_region=None)())  # type: ignore[misc]
    assert params == {"host": "db.internal", "port": "6432", "dbname": "cognis", "sslmode": "require",
                      "user": "cognis_app"}  # fmt: skip
    assert postgres_app_dsn(PostgresSettings(postgres_dsn="postgresql://a@h/db"), aws_region=None) is None


def test_iam_auth_puts_a_signed_rds_token_in_the_password(monkeypatch) -> None:
    """The token is generated locally (SigV4 presigned URL); nothing is sent to AWS."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEEXAMPLE00")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "example/secret/key/for/signing/only000000")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    settings = PostgresSettings(
        postgres_host="db.cluster-x.eu-west-1.rds.amazonaws.com", postgres_secret_arn="arn:secret",
        postgres_sslmode="require", postgres_app_user="cognis_app", postgres_iam_auth=True,
    )  # fmt: skip
    params = conninfo_to_dict(postgres_app_dsn(settings, aws_region="eu-west-1")())  # type: ignore[misc]
    assert params["user"] == "cognis_app" and params["sslmode"] == "require"
    token = params["password"]
    assert token.startswith("db.cluster-x.eu-west-1.rds.amazonaws.com:5432/?")
    assert "Action=connect" in token and "DBUser=cognis_app" in token and "X-Amz-Signature=" in token


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"postgres_iam_auth": True}, "postgres_iam_auth"),
        ({"postgres_app_user": "cognis_app", "postgres_iam_auth": True, "postgres_host": "h"}, "COGNIS_AWS_REGION"),
        ({"postgres_app_user": "cognis_app"}, "COGNIS_POSTGRES_HOST"),
    ],
)
def test_app_role_settings_are_checked(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        postgres_app_dsn(PostgresSettings(**kwargs), aws_region=None)


def test_app_role_names_are_plain_identifiers() -> None:
    assert validate_app_role("cognis_app") == "cognis_app"
    for bad in ("Cognis", "app; DROP TABLE memories", "1app", "a" * 64, ""):
        with pytest.raises(ValueError, match="postgres_app_user"):
            validate_app_role(bad)
