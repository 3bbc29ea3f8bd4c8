"""Settings of ingest: the limits of what a request may bring (:class:`IngestSettings`) and the durable
extraction jobs with their worker (:class:`JobSettings`, :mod:`.worker`). Composed by
:class:`cognis_memory.config.Settings`; each field's ``alias`` is its flat name (``COGNIS_<ALIAS>``)."""

from __future__ import annotations

from pydantic import Field

from ..component_settings import ComponentSettings


class IngestSettings(ComponentSettings):
    """Sizes of messages, memories and add requests, and when an extraction model's UPDATE is taken."""

    max_message_bytes: int = Field(
        512 * 1024,
        alias="max_message_bytes",
        description="Largest accepted message content, UTF-8 bytes. Messages longer than memory_max_bytes are "
        "stored as several memories (parts), each pointing to the message.",
    )
    memory_max_bytes: int = Field(
        32 * 1024,
        alias="memory_max_bytes",
        description="Largest text of one memory, UTF-8 bytes: the size of a long message's parts and the limit "
        "of an edited memory's content.",
    )
    max_messages_per_request: int = Field(
        500, alias="max_messages_per_request", description="Most messages in one add request."
    )
    update_min_similarity: float | None = Field(
        None,
        ge=0,
        le=1,
        alias="llm_update_min_similarity",
        description="Cosine (new fact to the fact it would replace) below which an extraction model's UPDATE is "
        "not taken and the new fact is added instead (unset: the embedding model's own, 0.40 for all-MiniLM-L6-v2).",
    )


class JobSettings(ComponentSettings):
    """Retries, waits and leases of the ingest jobs, and the background worker that runs them."""

    max_attempts: int = Field(
        5,
        alias="job_max_attempts",
        description="Ingest job attempts that end in an unusable LLM answer (or another error) before dead-letter; "
        "attempts that found the LLM unreachable do not count (the job waits for it, see job_max_wait_s).",
    )
    max_wait_s: float = Field(
        86400.0,
        ge=0,
        alias="job_max_wait_s",
        description="How long a job waits for an unreachable LLM, seconds since it was enqueued, before such "
        "attempts count toward job_max_attempts (and the dead letters); 0: they always count.",
    )
    backoff_s: float = Field(2.0, alias="job_backoff_s", description="First retry delay; doubles per attempt.")
    max_backoff_s: float = Field(
        300.0,
        gt=0,
        alias="job_max_backoff_s",
        description="Longest retry delay (an LLM outage is retried at least this often).",
    )
    lease_s: float = Field(
        300.0,
        alias="job_lease_s",
        description="A claimed job is retried by another worker if not finished within this (crashes).",
    )
    worker_concurrency: int = Field(
        1, alias="worker_concurrency", description="Background ingest workers in the API process."
    )
    run_worker: bool = Field(
        True, alias="run_worker", description="Run the background ingest worker inside the API process."
    )
