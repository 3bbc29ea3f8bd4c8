"""Migrations as a one-off task: `cognis-memory migrate` as the owner, then a service that never migrates.

Against the local PostgreSQL + pgvector server. The API tasks on AWS run with ``postgres_migrate=false`` and
the application role only: they must refuse a schema that is behind and work on a migrated one, without ever
being given the owner's credentials.
"""

from __future__ import annotations

import json
import uuid

import pytest
from cognis_dev.databases import create_database
from psycopg.conninfo import conninfo_to_dict

from cognis_memory.config import Settings
from cognis_memory.stores.connections import AppRoleDsn
from cognis_memory.stores.migrations.postgres import SchemaNotMigratedError
from cognis_memory.stores.postgres import PostgresStore
from cognis_memory.stores.settings import PostgresSettings
from cognis_memory.wiring import build_store, migrate_postgres

DIM, DIM_SHORT = 16, 4
pytestmark = pytest.mark.integration


@pytest.fixture
def owner_dsn(postgres_server) -> str:
    return create_database(postgres_server.dsn)


def _app_store(owner_dsn: str, role: str) -> PostgresStore:
    # The API's settings: where the database is, the application role, no owner credentials, no migration.
    params = conninfo_to_dict(owner_dsn)
    settings = PostgresSettings(postgres_host=params["host"], postgres_port=int(params["port"]),
                                postgres_db=params["dbname"], postgres_app_user=role, postgres_migrate=False)  # fmt: skip
    dsn = AppRoleDsn(settings, aws_region=None)
    return PostgresStore(dsn, dim=DIM, dim_short=DIM_SHORT, app_role=role, migrate=False)


async def test_a_service_that_does_not_migrate_refuses_a_schema_that_is_behind(owner_dsn):
    role = "postgres"  # a role that exists: the refusal is about the schema, not the sign-in
    with pytest.raises(SchemaNotMigratedError, match="cognis-memory migrate"):
        await _app_store(owner_dsn, role).open()


async def test_migrate_then_the_api_works_as_the_application_role(owner_dsn):
    role = f"app_{uuid.uuid4().hex[:10]}"
    settings = Settings(store="dual", postgres_dsn=owner_dsn, postgres_app_user=role, embedding_dim_short=DIM_SHORT)
    applied = await migrate_postgres(settings, dim=DIM)
    assert applied and applied == sorted(applied)
    assert await migrate_postgres(settings, dim=DIM) == []  # idempotent: a second run applies nothing
    store = _app_store(owner_dsn, role)
    await store.open()
    try:
        async with store.connection() as conn:
            user = (await (await conn.execute("SELECT current_user")).fetchone())[0]
        assert user == role
        assert await store.ping()
    finally:
        await store.close()


def test_the_cli_migrates_and_prints_what_it_applied(owner_dsn, monkeypatch, capsys):
    from cognis_memory.cli import main

    role = f"app_{uuid.uuid4().hex[:10]}"
    monkeypatch.setenv("COGNIS_STORE", "dual")
    monkeypatch.setenv("COGNIS_POSTGRES_DSN", owner_dsn)
    monkeypatch.setenv("COGNIS_POSTGRES_APP_USER", role)
    monkeypatch.setenv("COGNIS_EMBEDDING_DIM_SHORT", str(DIM_SHORT))
    assert main(["migrate"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["applied"]


def test_the_dual_store_needs_no_owner_credentials_when_it_does_not_migrate():
    bundle = build_store(
        Settings(
            store="dual",
            postgres_host="db.internal",
            postgres_app_user="cognis_app",
            postgres_migrate=False,
            opensearch_url="http://127.0.0.1:9",
        ),  # fmt: skip
        dim=DIM,
        dim_short=DIM_SHORT,
    )
    pg = bundle.backend.pg
    assert pg.migrate_on_open is False and pg.migration_dsn is pg.dsn  # never an owner DSN
    with pytest.raises(ValueError, match="COGNIS_POSTGRES_SECRET_ARN"):
        build_store(Settings(store="dual", postgres_host="db.internal", postgres_app_user="cognis_app",
                             opensearch_url="http://127.0.0.1:9"), dim=DIM, dim_short=DIM_SHORT)  # fmt: skip
