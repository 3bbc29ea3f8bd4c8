"""Emit one JSON log line and a set of CloudWatch EMF metrics per request.

* Logs go through an aws-lambda-powertools ``Logger``. Request-specific keys are passed
  per call (``extra=``), never through ``append_keys`` (which is shared by all concurrent
  requests).
* Metrics are built per request with ``EphemeralMetrics`` (whose buffer is not shared)
  and written as EMF JSON lines to ``metrics_stream`` (stdout by default; CloudWatch Logs
  extracts the metrics from them). Dimensions are low-cardinality only: service, Pipeline,
  Stage, Operation — never tenant or user ids.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import uuid
from datetime import UTC, datetime
from typing import IO, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from . import names
from .recorder import StageRecorder


class _InstanceLogger(Logger):
    """A powertools ``Logger`` with its own ``logging.Logger``.

    Powertools keys its loggers by service name and silently ignores the stream and level of
    every later ``Logger`` with the same service (the first one configured wins), so a second
    ``Telemetry`` (the CLI's, a test's) would write to the first one's stream.
    """

    def _get_logger(self) -> logging.Logger:
        logger = logging.getLogger(f"{self.service}.telemetry.{uuid.uuid4().hex}")
        logger.propagate = False
        return logger


class Telemetry:
    """Shared by the whole process; every method is safe under concurrent requests."""

    def __init__(
        self,
        *,
        service: str = names.DEFAULT_SERVICE,
        namespace: str = names.DEFAULT_NAMESPACE,
        metrics_enabled: bool = True,
        log_level: str = "INFO",
        log_stream: IO[str] | None = None,
        metrics_stream: IO[str] | None = None,
    ) -> None:
        self.service, self.namespace, self.metrics_enabled = service, namespace, metrics_enabled
        self.logger = _InstanceLogger(
            service=service, level=log_level, stream=log_stream or sys.stdout, use_rfc3339=True
        )
        self._metrics_stream = metrics_stream
        self._write_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Any, *, stream: IO[str] | None = None) -> Telemetry:
        """Telemetry as ``settings`` (a :class:`~cognis_memory.config.Settings`) name it; ``stream`` sends
        logs and EMF metrics there instead of stdout (the CLI and the MCP stdio server keep stdout for
        their own output)."""
        return cls(
            service=settings.service_name,
            namespace=settings.metrics_namespace,
            metrics_enabled=settings.metrics_enabled,
            log_level=settings.log_level,
            log_stream=stream,
            metrics_stream=stream,
        )

    # -- logs ---------------------------------------------------------------------------
    def log_request(self, event: str, rec: StageRecorder, *, request_id: str | None, **fields: Any) -> dict[str, Any]:
        """Log the request's JSON line and return the record (for tests and explain mode)."""
        record: dict[str, Any] = {
            "event": event,
            "ts": datetime.now(UTC).isoformat(),
            "request_id": request_id,
            "duration_ms": round(rec.elapsed_ms, 2),
            "stage_durations": rec.stage_durations(),
            **rec.fields,
            **fields,
        }
        if rec.degraded:
            record["degraded"] = list(rec.degraded)
        self.logger.info(event, extra=_safe_extra(record))
        return record

    def log_error(self, event: str, *, request_id: str | None, error: BaseException, **fields: Any) -> None:
        self.logger.error(
            event, extra=_safe_extra({"event": event, "request_id": request_id, "error": repr(error), **fields})
        )

    # -- metrics ------------------------------------------------------------------------
    def _new(self) -> EphemeralMetrics:
        return EphemeralMetrics(namespace=self.namespace, service=self.service)

    def _write(self, blob: dict[str, Any]) -> None:
        line = json.dumps(blob, separators=(",", ":"))
        stream = self._metrics_stream or sys.stdout
        with self._write_lock:
            stream.write(line + "\n")
            stream.flush()

    def emit_request_metrics(
        self,
        *,
        operation: str,
        latency_metric: str,
        pipeline: str,
        rec: StageRecorder,
        error: bool = False,
    ) -> list[dict[str, Any]]:
        """EMF blobs for one request: latency + counters, then one blob per stage."""
        if not self.metrics_enabled:
            return []
        blobs: list[dict[str, Any]] = []
        m = self._new()
        m.add_metric(name=latency_metric, unit=MetricUnit.Milliseconds, value=rec.elapsed_ms)
        blobs.append(m.serialize_metric_set())
        counters = self._new()
        counters.add_dimension(name=names.DIM_OPERATION, value=operation)
        counters.add_metric(name=names.REQUESTS, unit=MetricUnit.Count, value=1)
        counters.add_metric(name=names.ERRORS, unit=MetricUnit.Count, value=1 if error else 0)
        counters.add_metric(name=names.DEGRADED_ANSWERS, unit=MetricUnit.Count, value=1 if rec.degraded else 0)
        blobs.append(counters.serialize_metric_set())
        for stage, ms in rec.durations_ms.items():
            s = self._new()
            s.add_dimension(name=names.DIM_PIPELINE, value=pipeline)
            s.add_dimension(name=names.DIM_STAGE, value=stage)
            s.add_metric(name=names.STAGE_LATENCY, unit=MetricUnit.Milliseconds, value=ms)
            blobs.append(s.serialize_metric_set())
        for blob in blobs:
            self._write(blob)
        return blobs

    def emit_count(self, metric: str, value: float = 1) -> None:
        if not self.metrics_enabled:
            return
        m = self._new()
        m.add_metric(name=metric, unit=MetricUnit.Count, value=value)
        self._write(m.serialize_metric_set())


_RESERVED = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


def _safe_extra(record: dict[str, Any]) -> dict[str, Any]:
    """``logging`` refuses extra keys that clash with LogRecord attributes: prefix those."""
    return {(f"field_{k}" if k in _RESERVED else k): v for k, v in record.items()}


def quiet_third_party_loggers() -> None:
    for name in ("botocore", "urllib3", "opensearch", "httpx", "sentence_transformers", "transformers"):
        logging.getLogger(name).setLevel(logging.WARNING)
