"""The runtime's metric contract, read from the runtime's own file.

``metric_names`` is ``runtime/cognis_memory/telemetry/names.py`` itself: a symbolic link in the
source tree, one file with two import names. The runtime emits its metrics with it; the stack's
alarms and dashboard read the same names here, without importing the runtime package or
installing its dependencies in the Pulumi virtualenv (the file imports nothing). See
docs/design-notes.md ("Infra packages").
"""

from __future__ import annotations

from . import metric_names as names

__all__ = ["METRIC_DIMENSIONS", "READINESS_DIMENSIONS", "READINESS_METRIC", "names"]

#: Dimension names of every metric the runtime emits (see names.py docstrings).
METRIC_DIMENSIONS: dict[str, tuple[str, ...]] = {
    names.RETRIEVAL_LATENCY: (names.DIM_SERVICE,),
    names.INGEST_LATENCY: (names.DIM_SERVICE,),
    names.STAGE_LATENCY: (names.DIM_SERVICE, names.DIM_PIPELINE, names.DIM_STAGE),
    names.ERRORS: (names.DIM_SERVICE, names.DIM_OPERATION),
    names.DEGRADED_ANSWERS: (names.DIM_SERVICE, names.DIM_OPERATION),
    names.REQUESTS: (names.DIM_SERVICE, names.DIM_OPERATION),
    names.JOBS_DEAD_LETTERED: (names.DIM_SERVICE,),
    names.EXTRACTIONS_DEFERRED: (names.DIM_SERVICE,),
    names.LLM_ANSWERS_REPAIRED: (names.DIM_SERVICE,),
    names.LLM_ANSWERS_UNUSABLE: (names.DIM_SERVICE,),
    names.OUTBOX_BACKLOG: (names.DIM_SERVICE,),
    names.OUTBOX_OLDEST_AGE: (names.DIM_SERVICE,),
}

#: Emitted by the task's readiness probe container (not by the runtime): 1 when ``GET /ready``
#: answers 200, else 0, one data point per probe. See ``containers.READINESS_PROBE``.
READINESS_METRIC = "Ready"
READINESS_DIMENSIONS: tuple[str, ...] = (names.DIM_SERVICE,)
