"""``cognis-memory migrate``: bring the PostgreSQL schema of the dual store up to this build, and nothing else.

Runs as the schema owner (``postgres_dsn``, or ``postgres_host`` with the Secrets Manager secret
``postgres_secret_arn``): applies pending migrations under the advisory lock, updates pgvector,
creates and grants the application role (``postgres_app_user``) and records the embedding model's
vector space. On AWS the stack runs it as a one-off ECS task with its own role, the only one that
may read the owner's secret, before the API service is updated; the API tasks then start with
``postgres_migrate=false`` and only check that the schema is current.
"""

from __future__ import annotations

from .connections import postgres_dsn
from .context import StoreContext
from .postgres import PostgresStore
from .settings import PostgresSettings


async def migrate_postgres(context: StoreContext, *, postgres: PostgresSettings) -> list[int]:
    """Apply the pending migrations of the dual store's PostgreSQL (vectors as ``context`` says); the versions
    applied."""
    owner = postgres_dsn(postgres, aws_region=context.aws_region)
    store = PostgresStore(
        owner,
        dim=context.dim,
        dim_short=context.dim_short,
        migration_dsn=owner,
        app_role=postgres.app_user,
        vector_space=context.vector_space,
    )
    return await store.migrate()
