"""Structured logs (one JSON line per request) and CloudWatch EMF metrics."""

from .recorder import StageRecorder
from .emitter import Telemetry

__all__ = ["StageRecorder", "Telemetry"]
