"""One place builds the service from the settings: :mod:`cognis_memory.wiring` builds the store, the providers,
the pipelines and the worker, and :class:`~cognis_memory.service.MemoryService` runs on what it is handed."""

from __future__ import annotations

import io

import pytest

from cognis_memory import wiring
from cognis_memory.config import Settings
from cognis_memory.cpus import available_cpus
from cognis_memory.errors import InvalidInputError
from cognis_memory.retrieval.recipes import get_recipe, with_knobs
from cognis_memory.service import MemoryService, MessageBody
from cognis_memory.stores.embedded import EmbeddedStore
from cognis_memory.telemetry.emitter import Telemetry


def _telemetry() -> Telemetry:
    return Telemetry(log_stream=io.StringIO(), metrics_stream=io.StringIO())


def _settings(tmp_path, **values) -> Settings:
    return Settings(data_dir=tmp_path, run_worker=False, **values)


def test_the_settings_reach_every_component_through_wiring(tmp_path) -> None:
    settings = _settings(
        tmp_path,
        recipe="architecture",
        recipe_overrides={"rrf_k": 20},
        job_max_attempts=7,
        job_lease_s=90,
        llm_timeout_s=40,
        reranker_timeout_ms=700,
        worker_concurrency=3,
    )
    telemetry = _telemetry()
    parts = wiring.components_from_settings(settings, telemetry=telemetry)
    try:
        assert parts.stores.name == "embedded" and parts.model_check is None
        assert parts.retrieval_config == with_knobs(get_recipe("architecture"), settings.resolved_recipe_overrides)
        assert parts.retrieval_config.rrf_k == 20
        # one encoder and one cache under both pipelines; the worker runs the ingest pipeline
        assert parts.ingest.encoder is parts.encoder is parts.retrieval.encoder
        assert parts.ingest.cache is parts.cache is parts.retrieval.cache is parts.cached_retrieval.cache
        assert parts.retrieval.config is parts.retrieval_config and parts.cached_retrieval.pipeline is parts.retrieval
        assert parts.worker.pipeline is parts.ingest and parts.worker.telemetry is telemetry
        assert parts.telemetry is telemetry and not parts.owns_telemetry
        assert parts.ingest.job_max_attempts == 7
        assert parts.ingest.sync_grace_s == max(90, 4 * 40 + 10)
        assert parts.worker.lease_s == 90 and parts.worker.concurrency == 3
        assert parts.retrieval.stages[0].resources.reranker_timeout_s == pytest.approx(0.7)
    finally:
        parts.encoder.close()


def test_the_embedding_queue_has_a_model_thread_per_cpu_unless_told(tmp_path) -> None:
    for values, threads in (({}, available_cpus()), ({"embedding_workers": 1}, 1), ({"embedding_workers": 3}, 3)):
        parts = wiring.components_from_settings(_settings(tmp_path, **values), telemetry=_telemetry())
        try:
            assert parts.encoder.batcher.workers == threads, values
        finally:
            parts.encoder.close()


async def test_the_service_runs_on_the_components_it_is_handed(tmp_path, embedder) -> None:
    settings = _settings(tmp_path)
    store = EmbeddedStore(
        settings.embedded.resolved_sqlite_path, dim=embedder.dim, dim_short=settings.encoder.dim_short
    )
    parts = wiring.build_components(settings, store=store, embedder=embedder)
    assert parts.owns_telemetry  # built from settings.telemetry here: the service stops it on close
    svc = MemoryService(settings, parts)
    assert (svc.stores, svc.cache, svc.telemetry, svc.encoder) == (
        parts.stores,
        parts.cache,
        parts.telemetry,
        parts.encoder,
    )
    assert (svc.ingest, svc.retrieval, svc.cached_retrieval, svc.worker) == (
        parts.ingest, parts.retrieval, parts.cached_retrieval, parts.worker,
    )  # fmt: skip
    assert svc.retrieval_config is parts.retrieval_config
    async with svc:
        await svc.add_messages("acme", "u1", [MessageBody(content="I keep bees on the roof")])
        assert [h.memory.content for h in (await svc.search("acme", "u1", "bees")).hits] == ["I keep bees on the roof"]


def test_a_store_and_an_embedder_are_still_enough_to_build_the_service(tmp_path, embedder) -> None:
    """The construction path of callers that hand over their own store and embedder: wiring builds the rest."""
    settings = _settings(tmp_path, recipe="rrf")
    store = EmbeddedStore(
        settings.embedded.resolved_sqlite_path, dim=embedder.dim, dim_short=settings.encoder.dim_short
    )
    telemetry = _telemetry()
    svc = MemoryService(settings, store=store, embedder=embedder, telemetry=telemetry)
    assert svc.telemetry is telemetry and svc.encoder.embedder is embedder
    assert svc.retrieval_config == wiring.named_recipe(settings, "rrf") and svc.retrieval.config is svc.retrieval_config
    assert svc.worker.pipeline is svc.ingest
    svc.encoder.close()


def test_components_and_the_parts_to_build_them_are_not_taken_together(tmp_path, embedder) -> None:
    settings = _settings(tmp_path)
    store = EmbeddedStore(
        settings.embedded.resolved_sqlite_path, dim=embedder.dim, dim_short=settings.encoder.dim_short
    )
    parts = wiring.build_components(settings, store=store, embedder=embedder, telemetry=_telemetry())
    with pytest.raises(TypeError, match="not both"):
        MemoryService(settings, parts, embedder=embedder)
    with pytest.raises(TypeError, match="a store and an embedder"):
        MemoryService(settings, store=store)
    parts.encoder.close()


def test_an_unknown_configured_recipe_is_refused_naming_the_recipe(tmp_path, embedder) -> None:
    settings = _settings(tmp_path, recipe="no-such-recipe")
    store = EmbeddedStore(
        settings.embedded.resolved_sqlite_path, dim=embedder.dim, dim_short=settings.encoder.dim_short
    )
    with pytest.raises(InvalidInputError, match="unknown recipe 'no-such-recipe'") as info:
        wiring.build_components(settings, store=store, embedder=embedder, telemetry=_telemetry())
    assert info.value.field == "recipe"
