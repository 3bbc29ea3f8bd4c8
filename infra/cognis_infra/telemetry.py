"""The runtime's metric contract, imported from the runtime package itself.

``cognis_memory.telemetry.names`` is import-light on purpose, so the Pulumi program
can import it without the runtime's heavy dependencies. When the distribution is not
installed in the Pulumi virtualenv, fall back to the source tree (``runtime/``).
"""

from __future__ import annotations

import sys
from pathlib import Path

try:  # the normal case: `pip install -e '.[infra]'` installed cognis-memory
    from cognis_memory.telemetry import names
except ImportError:  # pragma: no cover - exercised only outside the project venv
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "runtime"))
    from cognis_memory.telemetry import names

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
}

#: Emitted by the task's readiness probe container (not by the runtime): 1 when ``GET /ready``
#: answers 200, else 0, one data point per probe. See ``service.READINESS_PROBE``.
READINESS_METRIC = "Ready"
READINESS_DIMENSIONS: tuple[str, ...] = (names.DIM_SERVICE,)
