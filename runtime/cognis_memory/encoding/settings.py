"""Settings of the encoder (:class:`~.encoder.MatryoshkaEncoder`): vector sizes, the query instruction, the
embedding queue and the query-vector cache. The model itself is the embedder's
(:class:`cognis_memory.providers.settings.EmbedderSettings`). Composed by :class:`cognis_memory.config.Settings`;
each field's ``alias`` is its flat name (``COGNIS_<ALIAS>``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator

from ..component_settings import ComponentSettings
from ..cpus import available_cpus


class EncoderSettings(ComponentSettings):
    """How texts become the full and prefix vectors, and how model calls are queued and cached."""

    query_prefix: str | None = Field(
        None,
        max_length=200,
        alias="embedding_query_prefix",
        description="Text put before every search query before it is embedded (messages are embedded as "
        "they are), for models trained with a query instruction, e.g. BGE v1.5's 'Represent this sentence "
        "for searching relevant passages: '. Default: the embedding model's (none for all-MiniLM-L6-v2).",
    )
    dim_full: int | None = Field(
        None, alias="embedding_dim_full", description="Truncate full vectors to this size (default: model size)."
    )
    dim_short: int = Field(128, alias="embedding_dim_short", description="Prefix size used by the first vector stage.")
    rotation_path: Path | None = Field(
        None,
        alias="embedding_rotation_path",
        description="Orthogonal rotation (.npy, from scripts/fit_rotation.py) applied before the prefix cut.",
    )
    batch_tokens: int = Field(
        2048,
        ge=256,
        alias="embedding_batch_tokens",
        description="Most (estimated) tokens in one model call of the embedding queue; bounds how long a "
        "query waits behind a bulk batch.",
    )
    workers: int | None = Field(
        None,
        ge=1,
        alias="embedding_workers",
        description="Model calls that run at once (worker threads of the embedding queue). Default: the CPUs "
        "the process may use (its CPU affinity, at most its container's cgroup CPU quota).",
    )
    query_cache_per_tenant: int = Field(
        1024,
        ge=0,
        alias="query_cache_per_tenant",
        description="Query embeddings kept in memory per tenant (LRU); 0 turns the cache off.",
    )
    query_cache_entries: int = Field(
        16384,
        ge=0,
        alias="query_cache_entries",
        description="Query embeddings kept in memory over all tenants (about 1.6 KB each).",
    )

    @property
    def worker_count(self) -> int:
        """``workers``, or by default one per CPU the process may use: on two CPUs one process ingested 106-111
        single-message adds/s with two model threads and 89 with one, and on one CPU 72 with two and 83 with one
        (docs/benchmarks.md, "Fewer round trips per add, and a model thread per CPU")."""
        return self.workers if self.workers is not None else available_cpus()

    @field_validator("dim_short")
    @classmethod
    def _positive(cls, v: int) -> int:
        if v <= 0:
            raise ValueError("must be positive")
        return v
