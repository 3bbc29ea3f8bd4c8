"""OpenTelemetry traces: a SERVER span per HTTP request (child of the caller's traceparent), an
operation span inside it, and one child span per pipeline stage named like the log line's stage
timings; counts and degraded reasons as attributes, never user content or user ids. Spans are
captured with the SDK's in-memory exporter; OTLP export is checked against a real HTTP receiver."""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import httpx
import pytest
import pytest_asyncio
from botocore.stub import Stubber
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from cognis_memory.api.app import create_app
from cognis_memory.config import Settings
from cognis_memory.providers.llms import OpenAICompatibleLLM
from cognis_memory.providers.rerankers import SageMakerReranker
from cognis_memory.retrieval.pipeline import stage_names
from cognis_memory.service import MemoryService, MessageBody
from cognis_memory.stores.embedded import EmbeddedStore
from cognis_memory.telemetry import names
from cognis_memory.telemetry.emitter import Telemetry
from cognis_memory.telemetry.tracing import Tracing
from tests.llm_server import ScriptedLLMServer
from tests.providers.conftest import aws_env  # noqa: F401 - the fixture, for the SageMaker client

TENANT, KEY = "tenant-trace", "trace-key"
USER = "user-7qz41x"  # must never appear in a span
SECRET = "my locker code is 8812 at Ginasio Lumen"  # user content: must never appear in a span
PARENT_TRACE, PARENT_SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
TRACEPARENT = f"00-{PARENT_TRACE}-{PARENT_SPAN}-01"


class Traced:
    """A service with tracing into an in-memory exporter, its app and its JSON log lines."""

    def __init__(self, service: MemoryService, exporter: InMemorySpanExporter, logs: io.StringIO) -> None:
        self.service, self.exporter, self.logs = service, exporter, logs
        self.app = create_app(service, manage_lifecycle=False)

    def client(self) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=self.app)
        headers = {"Authorization": f"Bearer {KEY}"}
        return httpx.AsyncClient(transport=transport, base_url="http://testserver", headers=headers, timeout=60)

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def log_lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.logs.getvalue().splitlines() if line.strip()]


async def _traced(tmp_path, embedder, **kwargs: Any) -> Traced:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    logs = io.StringIO()
    telemetry = Telemetry(mode="json", log_stream=logs, tracing=Tracing(provider))
    settings = Settings(data_dir=tmp_path, run_worker=False, api_keys=f"{KEY}={TENANT}")
    store = EmbeddedStore(
        settings.embedded.resolved_sqlite_path, dim=embedder.dim, dim_short=settings.encoder.dim_short
    )
    service = MemoryService(settings, store=store, embedder=embedder, telemetry=telemetry, **kwargs)
    await service.start()
    return Traced(service, exporter, logs)


@pytest_asyncio.fixture
async def traced(tmp_path, embedder) -> Iterator[Traced]:
    t = await _traced(tmp_path, embedder)
    yield t
    await t.service.close()


def _one(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    (span,) = [s for s in spans if s.name == name]
    return span


def _children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    return [s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]


def _assert_no_user_data(spans: list[ReadableSpan], *forbidden: str) -> None:
    for span in spans:
        texts = [span.name, *(str(v) for v in span.attributes.values())]
        texts += [str(v) for e in span.events for v in (e.name, *e.attributes.values())]
        for text in texts:
            for bad in forbidden:
                assert bad.lower() not in text.lower(), (span.name, text)


# -- search -------------------------------------------------------------------------------------
async def test_a_search_is_a_server_span_an_operation_span_and_one_span_per_logged_stage(traced):
    async with traced.client() as c:
        r = await c.post(f"/v1/users/{USER}/messages", json={"messages": [{"content": SECRET}]})
        assert r.status_code == 201
        traced.exporter.clear()
        query = "Where is my locker at the gym?"
        r = await c.post(
            f"/v1/users/{USER}/search",
            json={"query": query},
            headers={"traceparent": TRACEPARENT, "X-Request-Id": "rid-trace-1"},
        )
        assert r.status_code == 200 and len(r.json()["results"]) == 1
        request_id = r.headers["X-Request-Id"]  # the server's id; the caller's is client_request_id
    spans = traced.spans()

    server = _one(spans, "POST /v1/users/{user_id}/search")
    assert server.kind is SpanKind.SERVER
    assert format(server.context.trace_id, "032x") == PARENT_TRACE  # joined the caller's trace
    assert server.parent is not None and format(server.parent.span_id, "016x") == PARENT_SPAN
    assert server.attributes["http.route"] == "/v1/users/{user_id}/search"
    assert server.attributes["http.response.status_code"] == 200
    assert server.attributes["cognis.request_id"] == request_id

    op = _one(spans, "search_memory")
    assert op.kind is SpanKind.INTERNAL and op.parent.span_id == server.context.span_id
    assert op.attributes["gen_ai.operation.name"] == "search_memory"
    assert op.attributes["gen_ai.memory.record.count"] == 1
    assert op.attributes["cognis.tenant_id"] == TENANT and op.attributes["cognis.request_id"] == request_id
    assert op.attributes["cognis.candidates_short"] == 1 and op.attributes["cognis.candidates_bm25"] >= 0
    assert op.attributes["cognis.results_final"] == 1 and op.attributes["cognis.degraded"] is False

    (line,) = [x for x in traced.log_lines() if x.get("request_id") == request_id]
    assert line["client_request_id"] == "rid-trace-1"
    logged_stages = {k.removesuffix("_ms") for k in line["stage_durations"]}
    stages = _children(spans, op)
    assert {s.name for s in stages} == logged_stages  # the same names, every stage, nothing else
    assert {"query_analysis", "embed_query", "vector_short", "vector_full", "bm25", "rrf_fusion"} <= logged_stages
    assert set(logged_stages) <= set(stage_names())
    assert len(stages) == len(logged_stages) and len(spans) == 2 + len(stages)
    for s in stages:  # nested in time as in the tree
        assert op.start_time <= s.start_time <= s.end_time <= op.end_time, s.name
        assert s.attributes["cognis.stage"] == s.name
    vec_short, vec_full = _one(stages, "vector_short"), _one(stages, "vector_full")
    assert vec_short.end_time <= vec_full.start_time  # timed inside the store, placed one after another
    assert line["trace_id"] == PARENT_TRACE  # the log line (which has the user) joins the trace
    _assert_no_user_data(spans, USER, query, SECRET, "locker", "gym")


async def test_without_traceparent_a_new_trace_starts_and_a_bad_one_is_ignored(traced):
    async with traced.client() as c:
        for header in ({}, {"traceparent": "00-zzzz-not-a-trace-01"}, {"traceparent": f"00-{'0' * 32}-{'0' * 16}-01"}):
            traced.exporter.clear()
            r = await c.post(f"/v1/users/{USER}/search", json={"query": "anything"}, headers=header)
            assert r.status_code == 200
            server = _one(traced.spans(), "POST /v1/users/{user_id}/search")
            assert server.parent is None and format(server.context.trace_id, "032x") != PARENT_TRACE


async def test_a_degraded_search_says_so_on_its_span(tmp_path, embedder, aws_env):  # noqa: F811
    client = boto3.client("sagemaker-runtime", region_name="us-east-1")
    stubber = Stubber(client)
    for _ in range(3):
        stubber.add_client_error("invoke_endpoint", service_error_code="ModelError", http_status_code=424)
    t = await _traced(tmp_path, embedder, reranker=SageMakerReranker("rr", client=client))
    try:
        with stubber:
            await t.service.add_messages(TENANT, USER, [MessageBody(content="I swim on Mondays")])
            t.exporter.clear()
            res = await t.service.search(TENANT, USER, "when do I swim?")
    finally:
        await t.service.close()
    assert res.degraded == ["reranker"]
    op = _one(t.spans(), "search_memory")
    assert op.attributes["cognis.degraded"] is True
    assert list(op.attributes["cognis.degraded_reasons"]) == ["reranker"]
    assert _one(_children(t.spans(), op), "cross_encoder").status.status_code is StatusCode.UNSET


async def test_a_failed_search_marks_its_spans_with_the_error_type_only(traced):
    await traced.service.stores.close()  # every store call now fails
    traced.exporter.clear()
    with pytest.raises(Exception):  # noqa: B017 - whatever the closed store raises
        await traced.service.search(TENANT, USER, f"where is {SECRET}?")
    op = _one(traced.spans(), "search_memory")
    assert op.status.status_code is StatusCode.ERROR and op.attributes["error.type"]
    async with traced.client() as c:  # over HTTP the key lookup fails first: answered 500
        traced.exporter.clear()
        r = await c.post(f"/v1/users/{USER}/search", json={"query": f"where is {SECRET}?"})
        assert r.status_code == 500
    server = _one(traced.spans(), "POST")  # refused before routing: no route template to name it by
    assert server.status.status_code is StatusCode.ERROR and server.attributes["error.type"] == "500"
    assert server.attributes["http.response.status_code"] == 500
    spans = [op, *traced.spans()]
    for span in spans:
        assert not span.events  # no exception events: their messages may quote input
    _assert_no_user_data(spans, USER, SECRET)


# -- ingest -------------------------------------------------------------------------------------
async def test_adding_messages_is_an_upsert_memory_span_with_the_ingest_stages(traced):
    async with traced.client() as c:
        traced.exporter.clear()
        r = await c.post(
            f"/v1/users/{USER}/messages",
            json={"messages": [{"content": SECRET, "speaker": "Ana Sousa"}]},
            headers={"traceparent": TRACEPARENT},
        )
        assert r.status_code == 201
    spans = traced.spans()
    server = _one(spans, "POST /v1/users/{user_id}/messages")
    op = _one(spans, "upsert_memory")
    assert op.parent.span_id == server.context.span_id and op.context.trace_id == int(PARENT_TRACE, 16)
    assert op.attributes["gen_ai.memory.record.count"] == 1 and op.attributes["cognis.messages"] == 1
    (line,) = [x for x in traced.log_lines() if x.get("event") == names.EVENT_INGEST]
    assert {s.name for s in _children(spans, op)} == {k.removesuffix("_ms") for k in line["stage_durations"]}
    _assert_no_user_data(spans, USER, SECRET, "Ana Sousa")


async def test_a_background_job_is_traced_with_its_extraction_stage(tmp_path, embedder):
    def responder(schema_name, request):
        if schema_name == "extracted_facts":
            return {"facts": [{"content": "Ana swims.", "category": "hobbies", "scope": "USER", "event_date": None}]}
        return {"decisions": []}

    with ScriptedLLMServer(responder) as server:
        llm = OpenAICompatibleLLM(base_url=server.base_url, model="test")
        t = await _traced(tmp_path, embedder, llm=llm)
        try:
            res = await t.service.add_messages(TENANT, USER, [MessageBody(content="I swim")], background=True)
            t.exporter.clear()
            assert await t.service.worker.drain() == 1
        finally:
            await t.service.close()
            await llm.aclose()
    op = _one(t.spans(), "upsert_memory")
    assert op.parent is None and op.attributes["cognis.request_id"] == res.job.id
    assert {"resolution", "extraction"} <= {s.name for s in _children(t.spans(), op)}
    _assert_no_user_data(t.spans(), USER, "swim")


# -- no tracing, and OTLP export -----------------------------------------------------------------
async def test_without_traces_nothing_is_traced_and_the_log_line_has_no_trace_id(tmp_path, embedder):
    settings = Settings(data_dir=tmp_path, run_worker=False)
    assert settings.telemetry.traces == "off" and Tracing.from_settings(settings.telemetry) is None
    logs = io.StringIO()
    telemetry = Telemetry.from_settings(settings.telemetry, stream=logs)
    assert telemetry.tracing is None and telemetry.recorder()._tracer is None
    store = EmbeddedStore(
        settings.embedded.resolved_sqlite_path, dim=embedder.dim, dim_short=settings.encoder.dim_short
    )
    async with MemoryService(settings, store=store, embedder=embedder, telemetry=telemetry) as svc:
        await svc.search(TENANT, USER, "anything")
    (line,) = [json.loads(x) for x in logs.getvalue().splitlines()]
    assert "trace_id" not in line


class OtlpReceiver:
    """A real OTLP/HTTP endpoint on 127.0.0.1 that keeps every exported span."""

    def __init__(self) -> None:
        self.spans: list[Any] = []
        self.paths: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver.paths.append(self.path)
                receiver.spans += [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> OtlpReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


async def test_traces_otlp_exports_the_spans_to_the_configured_endpoint(tmp_path, embedder):
    started = int(time.time())
    with OtlpReceiver() as receiver:
        settings = Settings(
            data_dir=tmp_path, run_worker=False, traces="otlp", otlp_endpoint=receiver.url, service_name="cognis-t"
        )
        store = EmbeddedStore(
            settings.embedded.resolved_sqlite_path, dim=embedder.dim, dim_short=settings.encoder.dim_short
        )
        telemetry = Telemetry.from_settings(settings.telemetry, stream=io.StringIO())
        svc = MemoryService(settings, store=store, embedder=embedder, telemetry=telemetry)
        async with svc:
            await svc.add_messages(TENANT, USER, [MessageBody(content="I like tea")])
            await svc.search(TENANT, USER, "tea?")
        telemetry.close()  # flushes the batch processor
    assert receiver.paths and set(receiver.paths) == {"/v1/traces"}
    exported = {s.name for s in receiver.spans}
    assert {"upsert_memory", "search_memory", "raw_store", "embed_query", "bm25", "rrf_fusion"} <= exported
    for span in receiver.spans:  # X-Ray's shape: the trace id starts with the epoch second it began
        assert started <= int.from_bytes(span.trace_id[:4], "big") <= int(time.time())


def test_trace_settings_are_validated():
    with pytest.raises(ValueError):
        Settings(traces="zipkin")
    with pytest.raises(ValueError):
        Settings(trace_sample_ratio=1.5)
