"""``cognis-memory migrate``: bring the PostgreSQL schema of the dual store up to this build, and nothing else.

Runs as the schema owner (``postgres_dsn``, or ``postgres_host`` with the Secrets Manager secret
``postgres_secret_arn``): applies pending migrations under the advisory lock, updates pgvector,
creates and grants the application role (``postgres_app_user``) and records the embedding model's
vector space. On AWS the stack runs it as a one-off ECS task with its own role, the only one that
may read the owner's secret, before the API service is updated; the API tasks then start with
``postgres_migrate=false`` and only check that the schema is current.
"""

from __future__ import annotations

from ..config import Settings
from .connections import postgres_dsn
from .postgres import PostgresStore


async def migrate_postgres(settings: Settings, *, dim: int | None = None) -> list[int]:
    """Apply the pending migrations; the versions applied. ``dim`` defaults to the embedding model's size."""
    if settings.store != "dual":
        raise ValueError(f"store: migrate applies the PostgreSQL schema of the dual store; this is {settings.store!r}")
    if dim is None:
        from ..providers.factory import build_embedder

        dim = settings.encoder.dim_full or build_embedder(settings).dim
    owner = postgres_dsn(settings)
    store = PostgresStore(
        owner,
        dim=dim,
        dim_short=settings.encoder.dim_short,
        migration_dsn=owner,
        app_role=settings.postgres.app_user,
        vector_space=settings.embedder.vector_space,
    )
    return await store.migrate()
