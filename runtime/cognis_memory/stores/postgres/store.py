"""The PostgreSQL store: one database and the roles it supplies (every role but keyword search)."""

from __future__ import annotations

from collections.abc import Callable

from .api_keys import PostgresApiKeys
from .connection import PostgresDatabase
from .jobs import PostgresJobs
from .memories import OutboxListener, PostgresMemories
from .messages import PostgresMessages
from .vectors import PostgresVectorSearch


class PostgresStore(PostgresDatabase):
    """PostgreSQL + pgvector: the database (:class:`PostgresDatabase`, its settings and lifecycle) with
    its message, memory-version, vector-search, job-queue and API-key roles as attributes (everything
    except BM25, which the dual store adds). ``iterative_scan``: see :class:`PostgresVectorSearch`."""

    name = "postgres"

    def __init__(
        self,
        dsn: str | Callable[[], str],
        *,
        dim: int,
        dim_short: int,
        pool_min: int = 1,
        pool_max: int = 10,
        connect_timeout_s: float = 5.0,
        pool_timeout_s: float = 10.0,
        statement_timeout_ms: int = 30_000,
        iterative_scan: str = "relaxed_order",
        migration_dsn: str | Callable[[], str] | None = None,
        app_role: str | None = None,
        vector_space: str | None = None,
        migrate: bool = True,
    ) -> None:
        super().__init__(
            dsn, dim=dim, dim_short=dim_short, pool_min=pool_min, pool_max=pool_max,
            connect_timeout_s=connect_timeout_s, pool_timeout_s=pool_timeout_s,
            statement_timeout_ms=statement_timeout_ms, migration_dsn=migration_dsn, app_role=app_role,
            vector_space=vector_space, migrate=migrate,
        )  # fmt: skip
        self.messages = PostgresMessages(self)
        self.memories = PostgresMemories(self)
        self.vectors = PostgresVectorSearch(self, iterative_scan=iterative_scan)
        self.jobs = PostgresJobs(self)
        self.api_keys = PostgresApiKeys(self)

    def attach_outbox(self, listener: OutboxListener) -> None:
        """From now on every memory write also writes outbox rows and tells ``listener`` after the commit."""
        self.memories.attach_outbox(listener)
