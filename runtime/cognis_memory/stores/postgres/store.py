"""The PostgreSQL store: one database and the roles it supplies (every role but keyword search)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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

    def __init__(self, dsn: str | Callable[[], str], *, iterative_scan: str = "relaxed_order", **database: Any) -> None:
        """``database``: the keyword arguments of :class:`PostgresDatabase` (``dim`` and ``dim_short`` required)."""
        super().__init__(dsn, **database)
        self.messages = PostgresMessages(self)
        self.memories = PostgresMemories(self)
        self.vectors = PostgresVectorSearch(self, iterative_scan=iterative_scan)
        self.jobs = PostgresJobs(self)
        self.api_keys = PostgresApiKeys(self)

    def attach_outbox(self, listener: OutboxListener) -> None:
        """From now on every memory write also writes outbox rows and tells ``listener`` after the commit."""
        self.memories.attach_outbox(listener)
