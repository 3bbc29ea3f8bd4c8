"""Settings of telemetry: the per-request lines and metrics (:mod:`.emitter`) and the traces
(:mod:`.tracing`). Composed by :class:`cognis_memory.config.Settings`; each field's ``alias`` is its flat
name (``COGNIS_<ALIAS>``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..component_settings import ComponentSettings
from .modes import TelemetryMode

TracesKind = Literal["off", "otlp"]


class TelemetrySettings(ComponentSettings):
    """Where request lines, metrics and traces go."""

    mode: TelemetryMode = Field(
        "auto",
        alias="telemetry",
        description="Per-request output: emf (JSON line + CloudWatch EMF metrics), json (the JSON line), text (one "
        "human line), off; auto = emf on ECS/Lambda, text on a terminal, json otherwise.",
    )
    service_name: str = Field(
        "cognis-memory", alias="service_name", description="Logger service and the EMF `service` dimension."
    )
    metrics_namespace: str = Field(
        "CognisMemory", alias="metrics_namespace", description="CloudWatch namespace of the EMF metrics."
    )
    metrics_enabled: bool = Field(
        True,
        alias="metrics_enabled",
        description="Write EMF metric lines (in emf mode); false keeps the log lines.",
    )
    log_level: str = Field("INFO", alias="log_level", description="Log level.")
    traces: TracesKind = Field(
        "off",
        alias="traces",
        description="OpenTelemetry traces: off, or otlp (needs the otel extra: pip install 'cognis-memory[otel]').",
    )
    otlp_endpoint: str | None = Field(
        None,
        alias="otlp_endpoint",
        description="OTLP/HTTP traces URL, e.g. http://127.0.0.1:4318/v1/traces (default: OpenTelemetry's "
        "OTEL_EXPORTER_OTLP_* variables, else http://localhost:4318/v1/traces).",
    )
    trace_sample_ratio: float = Field(
        1.0,
        ge=0.0,
        le=1.0,
        alias="trace_sample_ratio",
        description="Share of new traces recorded; a caller's traceparent decides for its own.",
    )
