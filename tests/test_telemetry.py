"""Telemetry of the service: one JSON log line per ingest and per search, CloudWatch EMF metrics
with low-cardinality dimensions only, and no mixing between concurrent requests."""

from __future__ import annotations

import asyncio
import io
import json
import threading
from collections import Counter
from typing import Any

import pytest
import pytest_asyncio

from cognis_memory.config import Settings
from cognis_memory.providers.llms import OpenAICompatibleLLM
from cognis_memory.retrieval.pipeline import stage_names
from cognis_memory.service import MemoryService, MessageBody
from cognis_memory.stores.embedded import EmbeddedStore
from cognis_memory.telemetry import names
from cognis_memory.telemetry.emitter import Telemetry
from cognis_memory.telemetry.recorder import StageRecorder
from tests.llm_server import ScriptedLLMServer

NAMESPACE = "CognisTelemetryTest"
TENANT = "tenant-7f3kq"
SEARCH_STAGES = {
    "query_analysis_ms", "embed_query_ms", "vector_short_ms", "vector_full_ms", "bm25_ms", "rrf_fusion_ms", "dedup_ms",
}  # fmt: skip
#: Stages that run only when the query or the configuration asks for them.
CONDITIONAL = {"temporal_boost_ms", "version_chain_ms", "cross_encoder_ms"}


def assert_stages(logged: dict[str, float], *, ran: set[str] = frozenset()) -> None:
    """The always-on stages and ``ran`` were timed; the other conditional stages were not."""
    assert SEARCH_STAGES | ran <= set(logged), logged
    assert not (CONDITIONAL - ran) & set(logged), logged


INGEST_STAGES = {"raw_store_ms", "resolution_ms", "embedding_ms"}


class Capture:
    def __init__(self, **kwargs: Any) -> None:
        self.logs, self.metrics = io.StringIO(), io.StringIO()
        self.telemetry = Telemetry(namespace=NAMESPACE, log_stream=self.logs, metrics_stream=self.metrics, **kwargs)
        self._log_mark = self._metric_mark = 0

    def mark(self) -> None:
        self._log_mark, self._metric_mark = len(self.logs.getvalue()), len(self.metrics.getvalue())

    def new_logs(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.logs.getvalue()[self._log_mark :].splitlines() if line.strip()]

    def new_metric_lines(self) -> list[str]:
        return [line for line in self.metrics.getvalue()[self._metric_mark :].splitlines() if line.strip()]

    def new_blobs(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.new_metric_lines()]


async def _service(tmp_path, embedder, capture: Capture, **kwargs: Any) -> MemoryService:
    settings = Settings(data_dir=tmp_path, run_worker=False)
    store = EmbeddedStore(
        settings.embedded.resolved_sqlite_path, dim=embedder.dim, dim_short=settings.encoder.dim_short
    )
    svc = MemoryService(settings, store=store, embedder=embedder, telemetry=capture.telemetry, **kwargs)
    return await svc.start()


@pytest.fixture(scope="module")
def cap() -> Capture:
    return Capture()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def svc(tmp_path_factory, embedder, cap):
    service = await _service(tmp_path_factory.mktemp("telemetry"), embedder, cap)
    await service.add_messages(
        TENANT,
        "user-hist9",
        [MessageBody(content="I live in Porto", timestamp=_t("2025-03-01T10:00:00"))],
    )
    mem = (await service.list_memories(TENANT, "user-hist9"))[0]
    await service.update_memory(TENANT, "user-hist9", mem.id, content="I live in Lisbon now")
    yield service
    await service.close()


def _t(s: str):
    from datetime import datetime

    return datetime.fromisoformat(s + "+00:00")


def _metric_names(blob: dict[str, Any]) -> list[str]:
    return [m["Name"] for d in blob["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]]


def _dimensions(blob: dict[str, Any]) -> list[list[str]]:
    return [dims for d in blob["_aws"]["CloudWatchMetrics"] for dims in d["Dimensions"]]


# -- log lines ----------------------------------------------------------------------------
async def test_one_ingest_log_line_with_stage_durations(svc, cap):
    cap.mark()
    messages = [MessageBody(content="I like tea"), MessageBody(content="I like coffee")]
    res = await svc.add_messages(TENANT, "user-ing1", messages, request_id="rid-in-1")
    lines = cap.new_logs()
    assert len(lines) == 1
    line = lines[0]
    assert line["event"] == names.EVENT_INGEST == "memory_ingest"
    assert line["level"] == "INFO"
    assert (line["request_id"], line["tenant_id"], line["user_id"]) == ("rid-in-1", TENANT, "user-ing1")
    assert set(line["stage_durations"]) == INGEST_STAGES
    assert all(v >= 0 for v in line["stage_durations"].values())
    assert line["duration_ms"] >= max(line["stage_durations"].values()) > 0
    assert (line["messages"], line["messages_created"], line["error"]) == (2, 2, False)
    assert len(res.raw_memories) == 2


async def test_ingest_with_an_llm_logs_the_extraction_stage(tmp_path, embedder):
    def responder(schema_name, request):
        if schema_name == "extracted_facts":
            return {"facts": [{"content": "Ana likes tea.", "category": "preferences", "scope": "USER",
                               "event_date": None}]}  # fmt: skip
        return {"decisions": []}

    capture = Capture()
    with ScriptedLLMServer(responder) as server:
        llm = OpenAICompatibleLLM(base_url=server.base_url, model="test")
        service = await _service(tmp_path, embedder, capture, llm=llm)
        try:
            await service.add_messages(TENANT, "user-llm1", [MessageBody(content="I like tea")], request_id="rid-llm")
        finally:
            await service.close()
            await llm.aclose()
    (line,) = capture.new_logs()
    assert set(line["stage_durations"]) == INGEST_STAGES | {"extraction_ms"}
    assert line["stage_durations"]["extraction_ms"] > 0


async def test_one_search_log_line_with_the_stages_that_ran(svc, cap):
    await svc.add_messages(TENANT, "user-srch1", [MessageBody(content=f"note {i} about gardening") for i in range(3)])
    cap.mark()
    res = await svc.search(TENANT, "user-srch1", "gardening tips", limit=2, request_id="rid-s-1")
    (line,) = cap.new_logs()
    assert line["event"] == names.EVENT_RETRIEVAL == "memory_retrieval"
    assert (line["request_id"], line["user_id"]) == ("rid-s-1", "user-srch1")
    assert_stages(line["stage_durations"])
    assert line["duration_ms"] >= max(line["stage_durations"].values()) > 0
    assert line["candidates_short"] == 3 and line["candidates_full"] == 3
    assert line["results_final"] == len(res.hits) == 2
    assert line["temporal_query"] is False and line["history_query"] is False
    assert line["error"] is False


async def test_temporal_search_logs_the_temporal_boost(svc, cap):
    await svc.add_messages(
        TENANT, "user-temp1", [MessageBody(content="I went hiking", timestamp=_t("2025-03-10T10:00:00"))]
    )
    cap.mark()
    await svc.search(TENANT, "user-temp1", "what did I do last week?", now=_t("2025-03-15T12:00:00"))
    (line,) = cap.new_logs()
    assert_stages(line["stage_durations"], ran={"temporal_boost_ms"})
    assert line["temporal_query"] is True and line["results_final"] == 1


async def test_history_search_logs_the_version_chain(svc, cap):
    cap.mark()
    res = await svc.search(TENANT, "user-hist9", "Where did I live before?", request_id="rid-hist")
    (line,) = cap.new_logs()
    assert_stages(line["stage_durations"], ran={"version_chain_ms"})
    assert line["history_query"] is True
    assert [v.content for v in res.hits[0].history] == ["I live in Porto"]


async def test_a_failed_search_is_logged_and_counted_as_an_error(tmp_path, embedder):
    capture = Capture()
    service = await _service(tmp_path, embedder, capture)
    await service.stores.close()  # every store call now fails
    try:
        with pytest.raises(Exception):  # noqa: B017 - whatever the store raises
            await service.search(TENANT, "user-err1", "anything", request_id="rid-err")
    finally:
        await service.close()
    (line,) = capture.new_logs()
    assert (line["request_id"], line["error"]) == ("rid-err", True)
    counters = next(b for b in capture.new_blobs() if names.ERRORS in b)
    assert counters[names.ERRORS] == [1.0] and counters[names.REQUESTS] == [1.0]


# -- EMF metrics --------------------------------------------------------------------------
async def test_emf_blobs_have_low_cardinality_dimensions_only(svc, cap):
    user = "user-emf5z"
    cap.mark()
    await svc.add_messages(TENANT, user, [MessageBody(content="I collect stamps")])
    ingest_blobs = cap.new_blobs()
    cap.mark()
    await svc.search(TENANT, user, "stamps")
    search_line = cap.new_logs()[0]
    search_blobs = cap.new_blobs()

    for blobs, latency, pipeline, operation in [
        (ingest_blobs, names.INGEST_LATENCY, names.PIPELINE_INGEST, names.OPERATION_INGEST),
        (search_blobs, names.RETRIEVAL_LATENCY, names.PIPELINE_RETRIEVAL, names.OPERATION_SEARCH),
    ]:
        for blob in blobs:
            assert blob["_aws"]["CloudWatchMetrics"][0]["Namespace"] == NAMESPACE
            assert blob["service"] == names.DEFAULT_SERVICE
            text = json.dumps(blob)
            assert TENANT not in text and user not in text  # never a tenant or user id
        (lat,) = [b for b in blobs if latency in _metric_names(b)]
        assert _dimensions(lat) == [[names.DIM_SERVICE]]
        assert lat[latency][0] > 0
        (counters,) = [b for b in blobs if names.REQUESTS in _metric_names(b)]
        assert _dimensions(counters) == [[names.DIM_OPERATION, names.DIM_SERVICE]]
        assert counters[names.DIM_OPERATION] == operation
        assert (counters[names.ERRORS], counters[names.DEGRADED_ANSWERS]) == ([0.0], [0.0])
        stages = [b for b in blobs if names.STAGE_LATENCY in _metric_names(b)]
        for b in stages:
            assert _dimensions(b) == [[names.DIM_PIPELINE, names.DIM_STAGE, names.DIM_SERVICE]]
            assert b[names.DIM_PIPELINE] == pipeline
        assert len(blobs) == 2 + len(stages)
        if latency == names.RETRIEVAL_LATENCY:
            assert {f"{b[names.DIM_STAGE]}_ms" for b in stages} == set(search_line["stage_durations"])
        else:
            assert {b[names.DIM_STAGE] for b in stages} == set(names.INGEST_STAGES) - {"extraction"}


async def test_every_logged_stage_is_declared_in_the_metric_names(svc, cap):
    """Every stage the pipeline times is a declared one: a retrieval stage of ``stage_names()`` (the
    candidate stages and the registry, which the dashboard's SEARCH finds) or an ingest stage of
    names.INGEST_STAGES (which the dashboard lists); anything else would be on no widget."""
    cap.mark()
    await svc.add_messages(TENANT, "user-names1", [MessageBody(content="Rui said he likes chess")])
    await svc.search(TENANT, "user-names1", "what did Rui say about chess last week?")
    await svc.search(TENANT, "user-names1", "what did Rui use to like before?")
    known = {names.DEFAULT_SERVICE, *stage_names(), *names.INGEST_STAGES, names.PIPELINE_INGEST,
             names.PIPELINE_RETRIEVAL, names.OPERATION_INGEST, names.OPERATION_SEARCH}  # fmt: skip
    for blob in cap.new_blobs():
        for dims in _dimensions(blob):
            assert {blob[d] for d in dims} <= known, blob
    declared = {f"{s}_ms" for s in (*stage_names(), *names.INGEST_STAGES)}
    for line in cap.new_logs():
        assert set(line["stage_durations"]) <= declared, line["stage_durations"]


def test_metrics_can_be_disabled_while_logs_stay():
    capture = Capture(metrics_enabled=False)
    rec = StageRecorder()
    with rec.stage("bm25"):
        pass
    capture.telemetry.log_request(names.EVENT_RETRIEVAL, rec, request_id="r", user_id="u")
    out = capture.telemetry.emit_request_metrics(
        operation="search", latency_metric=names.RETRIEVAL_LATENCY, pipeline="retrieval", rec=rec
    )
    assert out == [] and capture.new_metric_lines() == []
    assert [r["request_id"] for r in capture.new_logs()] == ["r"]


def test_two_telemetry_instances_write_to_their_own_streams():
    first, second = Capture(), Capture()
    first.telemetry.log_request("e", StageRecorder(), request_id="one")
    second.telemetry.log_request("e", StageRecorder(), request_id="two")
    assert [r["request_id"] for r in first.new_logs()] == ["one"]
    assert [r["request_id"] for r in second.new_logs()] == ["two"]


# -- concurrency --------------------------------------------------------------------------
async def test_concurrent_searches_keep_their_own_request_ids_and_lines(svc, cap):
    users = [f"user-conc{i:02d}" for i in range(20)]
    for i, user in enumerate(users):
        await svc.add_messages(TENANT, user, [MessageBody(content=f"My lucky number is {i}")])
    cap.mark()
    results = await asyncio.gather(
        *(svc.search(TENANT, user, "lucky number", request_id=f"req-conc-{i:02d}") for i, user in enumerate(users))
    )
    lines = cap.new_logs()
    assert len(lines) == 20
    assert {(r["request_id"], r["user_id"]) for r in lines} == {
        (f"req-conc-{i:02d}", user) for i, user in enumerate(users)
    }
    for i, res in enumerate(results):  # each answer is its own user's
        assert [h.memory.content for h in res.hits] == [f"My lucky number is {i}"]
    metric_lines = cap.new_metric_lines()
    blobs = [json.loads(line) for line in metric_lines]  # every line is one whole JSON document
    assert Counter(n for b in blobs for n in _metric_names(b))[names.RETRIEVAL_LATENCY] == 20


def test_metric_lines_do_not_interleave_across_threads(tmp_path):
    path = tmp_path / "emf.jsonl"
    with open(path, "w", encoding="utf-8", buffering=1) as stream:
        telemetry = Telemetry(namespace=NAMESPACE, log_stream=io.StringIO(), metrics_stream=stream)

        def work() -> None:
            for _ in range(50):
                rec = StageRecorder()
                for stage in stage_names():
                    rec.add(stage, 1.5)
                telemetry.emit_request_metrics(
                    operation="search", latency_metric=names.RETRIEVAL_LATENCY, pipeline="retrieval", rec=rec
                )

        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 8 * 50 * (2 + len(stage_names()))
    blobs = [json.loads(line) for line in lines]
    assert sum(names.RETRIEVAL_LATENCY in b for b in blobs) == 400
