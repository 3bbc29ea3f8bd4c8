"""Per-request telemetry: one log line (JSON or human, see :mod:`.modes`), CloudWatch EMF metrics,
and OpenTelemetry spans when traces are on (:mod:`.tracing`).

Import-light: ``Telemetry`` and ``StageRecorder`` load on first use, so the Pulumi program can read
:mod:`.names` (and :mod:`.modes`) without the runtime's dependencies.
"""

from __future__ import annotations

from typing import Any

__all__ = ["StageRecorder", "Telemetry"]


def __getattr__(name: str) -> Any:
    if name == "Telemetry":
        from .emitter import Telemetry

        return Telemetry
    if name == "StageRecorder":
        from .recorder import StageRecorder

        return StageRecorder
    raise AttributeError(name)
