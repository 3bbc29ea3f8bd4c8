"""Emit one log line (and, in ``emf`` mode, a set of CloudWatch EMF metrics) per request, and the
request's trace spans when traces are on.

* The mode (:mod:`.modes`) decides what is written: ``emf`` the JSON line and the EMF lines,
  ``json`` the JSON line, ``text`` one human line with the same fields, ``off`` nothing. The
  record (what :meth:`Telemetry.log_request` returns) is the same in every mode.
* JSON logs go through an aws-lambda-powertools ``Logger``. Request-specific keys are passed
  per call (``extra=``), never through ``append_keys`` (which is shared by all concurrent
  requests).
* Metrics are built per request with ``EphemeralMetrics`` (whose buffer is not shared)
  and written as EMF JSON lines to ``metrics_stream`` (stdout by default; CloudWatch Logs
  extracts the metrics from them). Dimensions are low-cardinality only: service, Pipeline,
  Stage, Operation — never tenant or user ids.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import threading
import uuid
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import IO, Any, cast

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from . import names, text
from .modes import TelemetryMode, resolve_mode
from .recorder import StageRecorder
from .settings import TelemetrySettings
from .tracing import Tracing, trace_id_of_current_span

#: operation -> (log event, latency metric, pipeline dimension, span name in the GenAI memory conventions)
_OPERATIONS = {
    names.OPERATION_INGEST: (names.EVENT_INGEST, names.INGEST_LATENCY, names.PIPELINE_INGEST, "upsert_memory"),
    names.OPERATION_SEARCH: (names.EVENT_RETRIEVAL, names.RETRIEVAL_LATENCY, names.PIPELINE_RETRIEVAL, "search_memory"),
}


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
    """Shared by the whole process; every method is safe under concurrent requests.

    ``mode`` is a :mod:`.modes` setting (``auto`` is resolved here, against ``log_stream``); built
    directly, the default is ``emf`` (the log line and the metrics). ``tracing`` turns spans on.
    """

    def __init__(
        self,
        *,
        service: str = names.DEFAULT_SERVICE,
        namespace: str = names.DEFAULT_NAMESPACE,
        metrics_enabled: bool = True,
        log_level: str = "INFO",
        log_stream: IO[str] | None = None,
        metrics_stream: IO[str] | None = None,
        mode: TelemetryMode = "emf",
        tracing: Tracing | None = None,
    ) -> None:
        self.service, self.namespace = service, namespace
        self.mode = resolve_mode(mode, stream=log_stream or sys.stdout)
        self.metrics_enabled = metrics_enabled and self.mode == "emf"
        self.tracing = tracing
        self.logger = _InstanceLogger(
            service=service, level=log_level, stream=log_stream or sys.stdout, use_rfc3339=True
        )
        self._log_stream = log_stream
        self._info_enabled = logging.getLevelNamesMapping().get(log_level.upper(), logging.INFO) <= logging.INFO
        self._metrics_stream = metrics_stream
        self._write_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: TelemetrySettings, *, stream: IO[str] | None = None) -> Telemetry:
        """Telemetry as its settings say; ``stream`` sends logs and EMF metrics there instead of stdout (the CLI
        and the MCP stdio server keep stdout for their own output)."""
        return cls(
            service=settings.service_name,
            namespace=settings.metrics_namespace,
            metrics_enabled=settings.metrics_enabled,
            log_level=settings.log_level,
            log_stream=stream,
            metrics_stream=stream,
            mode=settings.mode,
            tracing=Tracing.from_settings(settings),
        )

    @property
    def tracer(self) -> Any | None:
        return self.tracing.tracer if self.tracing is not None else None

    def recorder(self) -> StageRecorder:
        """A new request's stage recorder (its stages become spans when traces are on)."""
        return StageRecorder(tracer=self.tracer)

    def close(self) -> None:
        """Send the spans still queued (at shutdown)."""
        if self.tracing is not None:
            self.tracing.shutdown()

    # -- one operation: span, log line, metrics -----------------------------------------
    @contextlib.contextmanager
    def operation_span(self, operation: str, rec: StageRecorder, **attributes: Any) -> Iterator[None]:
        """The operation's span around the body when traces are on (stage spans nest in it)."""
        if self.tracing is None:
            yield
            return
        with self.tracing.operation(_OPERATIONS[operation][3], rec, **attributes):
            yield

    @contextlib.contextmanager
    def request(
        self, operation: str, *, request_id: str | None, tenant_id: str, **fields: Any
    ) -> Iterator[StageRecorder]:
        """One request of ``operation`` (names.OPERATION_*), yielding its stage recorder: its span, then
        its log line and metrics, whether it succeeds or fails. ``fields`` go into the log line (those
        that are None are left out)."""
        event, latency_metric, pipeline, _ = _OPERATIONS[operation]
        fields = {k: v for k, v in fields.items() if v is not None}
        rec = self.recorder()
        error = False
        with self.operation_span(operation, rec, request_id=request_id, tenant_id=tenant_id):
            try:
                yield rec
            except Exception:
                error = True
                raise
            finally:
                trace = {"trace_id": trace_id_of_current_span()} if self.tracing is not None else {}
                self.log_request(event, rec, request_id=request_id, tenant_id=tenant_id, **fields, **trace, error=error)
                self.emit_request_metrics(
                    operation=operation, latency_metric=latency_metric, pipeline=pipeline, rec=rec, error=error
                )

    # -- logs ---------------------------------------------------------------------------
    def log_request(self, event: str, rec: StageRecorder, *, request_id: str | None, **fields: Any) -> dict[str, Any]:
        """Write the request's line (as the mode says) and return the record (for tests and explain)."""
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
        if self.mode == "text":
            if self._info_enabled:
                self._write_line(text.request_line(record), self._log_stream)
        elif self.mode != "off":
            self.logger.info(event, extra=_safe_extra(record))
        return record

    def log_error(self, event: str, *, request_id: str | None, error: BaseException, **fields: Any) -> None:
        """An unexpected failure: written in every mode (as JSON in ``off``)."""
        record = {"event": event, "request_id": request_id, "error": repr(error), **fields}
        if self.mode == "text":
            self._write_line(text.error_line({"ts": datetime.now(UTC).isoformat(), **record}), self._log_stream)
        else:
            self.logger.error(event, extra=_safe_extra(record))

    # -- metrics ------------------------------------------------------------------------
    def _new(self) -> EphemeralMetrics:
        return EphemeralMetrics(namespace=self.namespace, service=self.service)

    def _write(self, blob: dict[str, Any]) -> None:
        self._write_line(json.dumps(blob, separators=(",", ":")), self._metrics_stream)

    def _write_line(self, line: str, stream: IO[str] | None) -> None:
        stream = stream or sys.stdout
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
        blobs.append(_blob(m))
        counters = self._new()
        counters.add_dimension(name=names.DIM_OPERATION, value=operation)
        counters.add_metric(name=names.REQUESTS, unit=MetricUnit.Count, value=1)
        counters.add_metric(name=names.ERRORS, unit=MetricUnit.Count, value=1 if error else 0)
        counters.add_metric(name=names.DEGRADED_ANSWERS, unit=MetricUnit.Count, value=1 if rec.degraded else 0)
        blobs.append(_blob(counters))
        for stage, ms in rec.durations_ms.items():
            s = self._new()
            s.add_dimension(name=names.DIM_PIPELINE, value=pipeline)
            s.add_dimension(name=names.DIM_STAGE, value=stage)
            s.add_metric(name=names.STAGE_LATENCY, unit=MetricUnit.Milliseconds, value=ms)
            blobs.append(_blob(s))
        for blob in blobs:
            self._write(blob)
        return blobs

    def emit_count(self, metric: str, value: float = 1) -> None:
        if not self.metrics_enabled:
            return
        m = self._new()
        m.add_metric(name=metric, unit=MetricUnit.Count, value=value)
        self._write(_blob(m))

    def emit_gauges(self, readings: Mapping[str, tuple[float, str]]) -> dict[str, Any] | None:
        """One EMF blob with a level sampled now (not a count of events), ``metric -> (value, unit)`` with a
        CloudWatch unit name (``"Count"``, ``"Seconds"``), dimension ``service``; returns the blob written (None
        with metrics off). A reading is a level, so CloudWatch's ``Maximum`` or ``Average`` of it says something,
        its ``Sum`` does not."""
        if not self.metrics_enabled:
            return None
        m = self._new()
        for metric, (value, unit) in readings.items():
            m.add_metric(name=metric, unit=MetricUnit(unit), value=value)
        blob = _blob(m)
        self._write(blob)
        return blob


def _blob(metrics: Any) -> dict[str, Any]:
    """One EMF blob (Powertools types it as its own ``CloudWatchEMFOutput`` TypedDict)."""
    return cast(dict[str, Any], metrics.serialize_metric_set())


_RESERVED = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


def _safe_extra(record: dict[str, Any]) -> dict[str, Any]:
    """``logging`` refuses extra keys that clash with LogRecord attributes: prefix those."""
    return {(f"field_{k}" if k in _RESERVED else k): v for k, v in record.items()}


def quiet_third_party_loggers() -> None:
    for name in ("botocore", "urllib3", "opensearch", "httpx", "sentence_transformers", "transformers"):
        logging.getLogger(name).setLevel(logging.WARNING)
