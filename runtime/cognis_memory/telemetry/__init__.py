"""Per-request telemetry: one log line (JSON or human, see :mod:`.modes`), CloudWatch EMF metrics,
and OpenTelemetry spans when traces are on (:mod:`.tracing`)."""

from .emitter import Telemetry
from .recorder import StageRecorder

__all__ = ["StageRecorder", "Telemetry"]
