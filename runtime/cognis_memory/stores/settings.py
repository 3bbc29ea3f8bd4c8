"""Settings of the stores: the embedded SQLite store, and the PostgreSQL and OpenSearch servers of the
server-backed stores (reached by :mod:`.connections`). Composed by :class:`cognis_memory.config.Settings`;
each field's ``alias`` is its flat name (``COGNIS_<ALIAS>``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr

from ..component_settings import ComponentSettings


class EmbeddedStoreSettings(ComponentSettings):
    """The embedded store (``store=embedded``): its SQLite file and its in-memory indexes."""

    data_dir: Path = Field(
        Path(".cognis"), alias="data_dir", description="Directory of the embedded store's SQLite file."
    )
    sqlite_path: Path | None = Field(
        None, alias="sqlite_path", description="Explicit SQLite file (default: <data_dir>/memory.db)."
    )
    keyword_index_min_memories: int = Field(
        10_000,
        ge=0,
        alias="keyword_index_min_memories",
        description="Embedded store: a user with at least this many current memories gets an in-memory BM25 index "
        "(FTS5's scores and order, only the query terms' postings read); 0 turns it off.",
    )
    ann_min_memories: int = Field(
        200_000,
        ge=0,
        alias="ann_min_memories",
        description="Embedded store: a user with at least this many current memories gets an approximate (HNSW) "
        "prefix index, built in the background, for unfiltered vector searches; 0 turns it off.",
    )

    @property
    def resolved_sqlite_path(self) -> Path:
        return self.sqlite_path or (self.data_dir / "memory.db")


class PostgresSettings(ComponentSettings):
    """The PostgreSQL system of record of the dual store."""

    dsn: SecretStr | None = Field(
        None, alias="postgres_dsn", description="libpq DSN of the PostgreSQL system of record."
    )
    host: str | None = Field(
        None, alias="postgres_host", description="PostgreSQL host (used with postgres_secret_arn)."
    )
    port: int = Field(5432, alias="postgres_port", description="PostgreSQL port.")
    db: str = Field("cognis", alias="postgres_db", description="PostgreSQL database name.")
    secret_arn: str | None = Field(
        None,
        alias="postgres_secret_arn",
        description="Secrets Manager secret holding {username, password} (Aurora managed master secret).",
    )
    app_user: str | None = Field(
        None,
        alias="postgres_app_user",
        description="Least-privilege role the connection pool signs in as; the migration creates and grants it "
        "(the postgres_dsn / postgres_secret_arn credentials then only run migrations).",
    )
    iam_auth: bool = Field(
        False,
        alias="postgres_iam_auth",
        description="Sign postgres_app_user in with RDS IAM tokens (needs postgres_host and aws_region).",
    )
    pool_size: int = Field(10, alias="postgres_pool_size", description="Connections in the PostgreSQL pool.")
    sslmode: str = Field(
        "prefer",
        alias="postgres_sslmode",
        description="libpq sslmode; 'verify-full' on AWS (with postgres_sslrootcert: the RDS CA bundle).",
    )
    sslrootcert: str | None = Field(
        None,
        alias="postgres_sslrootcert",
        description="CA certificates file libpq verifies the server with (sslrootcert); the API image carries "
        "the RDS bundle at /etc/cognis/certs/rds-global-bundle.pem.",
    )
    migrate: bool = Field(
        True,
        alias="postgres_migrate",
        description="Apply pending schema migrations when the store opens (as the postgres_dsn / postgres_secret_arn "
        "owner); false: the schema must already be current (`cognis-memory migrate` runs them, e.g. as a one-off "
        "task) and the service needs no owner credentials.",
    )


class OpenSearchSettings(ComponentSettings):
    """The OpenSearch search index of the dual and OpenSearch-only stores."""

    url: str | None = Field(None, alias="opensearch_url", description="OpenSearch endpoint, e.g. https://vpc-...:443.")
    auth: Literal["none", "sigv4"] = Field(
        "none", alias="opensearch_auth", description="'sigv4' for Amazon OpenSearch Service."
    )
    index_prefix: str = Field(
        "cognis", alias="opensearch_index_prefix", description="Prefix of the OpenSearch index names."
    )
    timeout_s: float = Field(5.0, alias="opensearch_timeout_s", description="OpenSearch request timeout, seconds.")
    shards: int = Field(
        1,
        ge=1,
        le=1024,
        alias="opensearch_shards",
        description="Primary shards of each index the store creates; fixed when an index is created (an existing "
        "index keeps its count). The dual store's keyword index holds about 0.3 KB per memory (docs/deploy.md, "
        "Capacity guide).",
    )
    ca_certs: str | None = Field(
        None,
        alias="opensearch_ca_certs",
        description="CA certificates file for https:// OpenSearch (default: the system's); always verified.",
    )
