"""Names of the CloudWatch metrics and log fields the runtime emits.

This module is the single source of truth shared by the runtime (which emits the
metrics through CloudWatch Embedded Metric Format) and the Pulumi program in
``infra/`` (whose alarms and dashboard read them): ``infra/cognis_infra/metric_names.py``
is a symbolic link to this file, imported there as ``cognis_infra.metric_names`` where
the runtime is not installed. So it must import nothing: no third-party module and no
module of ``cognis_memory`` either.
"""

from __future__ import annotations

#: Default CloudWatch namespace (``COGNIS_METRICS_NAMESPACE`` overrides it).
DEFAULT_NAMESPACE = "CognisMemory"
#: Default service name; emitted as the ``service`` dimension on every metric.
DEFAULT_SERVICE = "cognis-memory"

# Metric names -----------------------------------------------------------------
#: End-to-end latency of one search request, milliseconds. Dimensions: service.
RETRIEVAL_LATENCY = "RetrievalLatency"
#: End-to-end latency of one ingest request (all synchronous stages), milliseconds.
INGEST_LATENCY = "IngestLatency"
#: Latency of one pipeline stage, milliseconds. Dimensions: service, Pipeline, Stage.
STAGE_LATENCY = "StageLatency"
#: Count of requests that failed with a server-side error. Dimensions: service, Operation.
ERRORS = "Errors"
#: Count of answers served degraded (a dependency was skipped). Dimensions: service, Operation.
DEGRADED_ANSWERS = "DegradedAnswers"
#: Count of requests. Dimensions: service, Operation.
REQUESTS = "Requests"
#: Count of ingest jobs that exhausted their attempts and went to dead-letter state.
JOBS_DEAD_LETTERED = "JobsDeadLettered"
#: Count of fact extractions that could not run when due because the LLM was unreachable or gave no
#: usable answer: a synchronous request that handed its extraction to a job, or a job attempt that
#: found the LLM unreachable (the job waits for it). Dimensions: service.
EXTRACTIONS_DEFERRED = "ExtractionsDeferred"
#: Count of extraction LLM answers usable only after a repair (JSON around prose, a truncated answer,
#: an unknown category, an unreadable item dropped, ...). Dimensions: service.
LLM_ANSWERS_REPAIRED = "LLMAnswersRepaired"
#: Count of extraction LLM answers with nothing usable even after asking again. Dimensions: service.
LLM_ANSWERS_UNUSABLE = "LLMAnswersUnusable"
#: Rows waiting in the dual store's outbox (PostgreSQL changes not yet pushed to OpenSearch), sampled every
#: minute by a running service on the dual store (not per request). Dimensions: service.
OUTBOX_BACKLOG = "OutboxBacklog"
#: Age of the oldest row waiting in the dual store's outbox, seconds (0 when it is empty): how long the newest
#: memories may have been missing from keyword search. Sampled with ``OutboxBacklog``. Dimensions: service.
OUTBOX_OLDEST_AGE = "OutboxOldestAgeSeconds"

# Dimension names ----------------------------------------------------------------
DIM_SERVICE = "service"
DIM_PIPELINE = "Pipeline"
DIM_STAGE = "Stage"
DIM_OPERATION = "Operation"

# Dimension values ---------------------------------------------------------------
PIPELINE_RETRIEVAL = "retrieval"
PIPELINE_INGEST = "ingest"
OPERATION_SEARCH = "search"
OPERATION_INGEST = "ingest"

# Retrieval stage names are not listed here: a retrieval stage names itself (the ``Stage`` values are
# ``cognis_memory.retrieval.pipeline.stage_names()``: the candidate-generation stages, then the registered
# ones of ``retrieval.registry.RETRIEVAL_STAGES``), and the dashboard finds every retrieval stage with a
# CloudWatch SEARCH expression, so a new stage needs no edit here or in ``infra/``.

#: Ingest stages, in pipeline order.
INGEST_STAGES: tuple[str, ...] = (
    "raw_store",
    "resolution",
    "extraction",
    "embedding",
)

#: Structured log event names (the ``event`` field of the JSON line).
EVENT_RETRIEVAL = "memory_retrieval"
EVENT_INGEST = "memory_ingest"
