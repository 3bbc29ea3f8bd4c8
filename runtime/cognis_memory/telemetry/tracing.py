"""OpenTelemetry traces (the optional ``otel`` extra): a span per HTTP request, a span per memory
operation inside it, and a child span per pipeline stage named exactly like the log line's stage
timings (``bm25``, ``rrf_fusion``, ...).

* The operation spans follow the GenAI memory conventions of OpenTelemetry (development status):
  name and ``gen_ai.operation.name`` are ``search_memory`` for a search and ``upsert_memory`` for
  adding messages (which may create, update or consolidate memories without the caller choosing),
  kind INTERNAL (the memory system runs in this process), ``gen_ai.memory.record.count``.
* What goes into attributes is decided here, once: counts, booleans, stage names, degraded
  reasons, the tenant id and the request id. Never message or query text, never a user id (the
  log line has the user; join the two by ``trace_id``), never an exception's message (it may quote
  input): a failed operation records ``error.type`` (the exception class) only.
* The HTTP span reads the caller's W3C ``traceparent`` (and ``tracestate``), so a memory call
  joins the agent's trace; it is named by the route *template* (``POST /v1/users/{user_id}/search``),
  never the raw path, which holds a user id.
* Nothing here imports OpenTelemetry unless traces are turned on; ``COGNIS_TRACES=otlp`` without
  the extra installed stops the service at start with the install command.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, SpanKind, Tracer
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from .settings import TelemetrySettings


#: Instrumentation scope name of every span this package makes.
SCOPE = "cognis_memory"
#: String fields of a recorder that are safe in attributes (their values are a closed set).
ENUM_FIELDS = frozenset({"cache", "job_status"})
#: Prefix of this service's own attributes.
PREFIX = "cognis."

OTEL_MISSING = "COGNIS_TRACES=otlp needs OpenTelemetry: pip install 'cognis-memory[otel]'"


class RecordedOperation(Protocol):
    """What a span reads of an operation's recorder (``telemetry.recorder.StageRecorder``): its fields and
    degraded reasons. A protocol, so that the recorder, which opens stage spans, is not imported here."""

    fields: dict[str, Any]
    degraded: list[str]


class Tracing:
    """A tracer and the attribute policy. Built from settings (OTLP export) or around any
    ``TracerProvider`` (tests use the SDK's in-memory exporter)."""

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider
        self.tracer: Tracer = provider.get_tracer(SCOPE)

    @classmethod
    def from_settings(cls, settings: TelemetrySettings) -> Tracing | None:
        """None when ``settings.traces`` is ``off``; else a provider that batches spans to OTLP/HTTP."""
        if settings.traces == "off":
            return None
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
            from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
        except ImportError as exc:
            raise RuntimeError(OTEL_MISSING) from exc
        provider = TracerProvider(
            resource=Resource.create({"service.name": settings.service_name}),
            sampler=ParentBased(TraceIdRatioBased(settings.trace_sample_ratio)),
            id_generator=time_prefixed_ids(),
        )
        # No endpoint: the exporter reads OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, else localhost:4318.
        exporter = OTLPSpanExporter(endpoint=settings.otlp_endpoint) if settings.otlp_endpoint else OTLPSpanExporter()
        provider.add_span_processor(BatchSpanProcessor(exporter))
        return cls(provider)

    def shutdown(self) -> None:
        """Flush and stop the exporter (spans still queued are sent)."""
        self.provider.shutdown()

    @contextlib.contextmanager
    def operation(self, name: str, rec: RecordedOperation, **attributes: Any) -> Iterator[Span]:
        """The span of one memory operation, current while the body runs (so stage spans nest in it);
        on exit it gets the recorder's counts and degraded reasons, and ``error.type`` on failure."""
        from opentelemetry.trace import SpanKind

        attrs = {"gen_ai.operation.name": name, **{f"{PREFIX}{k}": v for k, v in attributes.items() if v is not None}}
        with current_span(self.tracer, name, SpanKind.INTERNAL, attrs) as span:
            try:
                yield span
            finally:
                span.set_attributes(recorder_attributes(rec))


@contextlib.contextmanager
def current_span(
    tracer: Tracer, name: str, kind: SpanKind, attributes: dict[str, Any], context: Context | None = None
) -> Iterator[Span]:
    """A span current while the body runs; an exception marks it failed with ``error.type`` (the
    exception class) only: the exception's message is not recorded, as it may quote user input."""
    from opentelemetry.trace import Status, StatusCode

    with tracer.start_as_current_span(
        name, context=context, kind=kind, attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as span:
        try:
            yield span
        except BaseException as exc:
            span.set_attribute("error.type", type(exc).__qualname__)
            span.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))
            raise


def time_prefixed_ids() -> Any:
    """Trace ids whose first 32 bits are the epoch second and the other 96 random: the layout of an
    AWS X-Ray trace id (``1-<8 hex digits of epoch seconds>-<24 hex digits>``); span ids stay random.
    Any other backend takes them as ordinary 128-bit ids."""
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class TimePrefixedIds(RandomIdGenerator):
        def generate_trace_id(self) -> int:
            return (int(time.time()) << 96) | random.getrandbits(96)

    return TimePrefixedIds()


def recorder_attributes(rec: RecordedOperation) -> dict[str, Any]:
    """A recorder's fields as span attributes: numbers and booleans, enumerated strings only."""
    out: dict[str, Any] = {}
    for key, value in rec.fields.items():
        if isinstance(value, (bool, int, float)) or (key in ENUM_FIELDS and isinstance(value, str)):
            out[f"{PREFIX}{key}"] = value
    if "results_final" in rec.fields:
        out["gen_ai.memory.record.count"] = rec.fields["results_final"]
    elif "messages_created" in rec.fields:
        out["gen_ai.memory.record.count"] = rec.fields["messages_created"]
    out[f"{PREFIX}degraded"] = bool(rec.degraded)
    if rec.degraded:
        out[f"{PREFIX}degraded_reasons"] = list(rec.degraded)
    return out


def trace_id_of_current_span() -> str | None:
    """The current span's trace id (32 hex digits) for the log line; None when it is not recorded."""
    from opentelemetry import trace

    ctx = trace.get_current_span().get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid and ctx.trace_flags.sampled else None


def stage_span(tracer: Tracer, name: str) -> contextlib.AbstractContextManager[Span]:
    """The current span of one stage while it runs."""
    from opentelemetry.trace import SpanKind

    return current_span(tracer, name, SpanKind.INTERNAL, {f"{PREFIX}stage": name})


def completed_stage_spans(tracer: Tracer, timings_ms: dict[str, float]) -> None:
    """Spans of stages that were timed elsewhere (inside a store) and have just finished one after
    another in the order given: they are placed back to back, the last ending now."""
    from opentelemetry.trace import SpanKind

    end = time.time_ns()
    starts: list[tuple[str, int, int]] = []
    for name, ms in reversed(list(timings_ms.items())):
        start = end - int(ms * 1_000_000)
        starts.append((name, start, end))
        end = start
    for name, start, stop in reversed(starts):
        span = tracer.start_span(name, kind=SpanKind.INTERNAL, start_time=start, attributes={f"{PREFIX}stage": name})
        span.end(end_time=stop)


class TraceRequests:
    """ASGI middleware: one SERVER span per HTTP request, a child of the caller's ``traceparent``."""

    def __init__(self, app: ASGIApp, tracer: Tracer) -> None:
        self.app, self.tracer = app, tracer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from opentelemetry.trace import SpanKind, Status, StatusCode
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        headers: dict[str, str] = {}
        for name, value in scope.get("headers", []):
            if name in (b"traceparent", b"tracestate"):
                headers[name.decode("latin-1")] = value.decode("latin-1")
        parent = TraceContextTextMapPropagator().extract(headers)
        method = scope.get("method", "GET")
        status: dict[str, Any] = {}

        async def observed_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                for name, value in message.get("headers", []):
                    if name.lower() == b"x-request-id":
                        status["request_id"] = value.decode("latin-1")
            await send(message)

        attributes = {"http.request.method": method, "url.scheme": scope.get("scheme", "http")}
        with current_span(self.tracer, method, SpanKind.SERVER, attributes, context=parent) as span:
            try:
                await self.app(scope, receive, observed_send)
            finally:
                route = getattr(scope.get("route"), "path", None)
                if route:  # the template, e.g. /v1/users/{user_id}/search: never the raw path
                    span.update_name(f"{method} {route}")
                    span.set_attribute("http.route", route)
                if "code" in status:
                    span.set_attribute("http.response.status_code", status["code"])
                    if status["code"] >= 500:  # an answered failure: the status code is its error type
                        span.set_status(Status(StatusCode.ERROR))
                        span.set_attribute("error.type", str(status["code"]))
                if "request_id" in status:
                    span.set_attribute(f"{PREFIX}request_id", status["request_id"])
