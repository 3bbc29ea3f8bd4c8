"""Build the service's components from the whole configuration, each from its own settings section.

This is the one place below the entry points that reads :class:`~cognis_memory.config.Settings` whole, and the
one place that builds what :class:`~cognis_memory.service.MemoryService` runs on: :func:`components_from_settings`
builds the store, the providers, the cache and the lifecycle check that the settings name, then
:func:`build_components` the encoder, both pipelines and the job worker over them, and ``MemoryService`` is
handed the result (:class:`ServiceComponents`). Every component builds itself from its own section
(``OnnxEmbedder.from_settings(settings.embedder)``, the cache from ``settings.cache``, a store from the sections
its registry entry names), and is handed here, by name, the few values it shares with other components: the AWS
region, the embedding model's vector space and query instruction, the embedder's device, threads and batch size.
No component imports the configuration, so the components stand below it and it composes their settings classes.

``MemoryService.from_settings``, the CLI and the tools (benchmarks, tests) build through these functions.
Nothing here connects: a store's ``open()`` does.
"""

from __future__ import annotations

from dataclasses import dataclass

from .caching import factory as cache_factory
from .caching.result_cache import Cache, NullCache
from .config import Settings
from .encoding.encoder import MatryoshkaEncoder
from .errors import SettingError
from .ingest.categorizer import EmbeddingCategorizer
from .ingest.pipeline import IngestPipeline
from .ingest.worker import JobWorker
from .providers import factory as provider_factory
from .providers.base import LLM, Embedder, Reranker
from .providers.model_lifecycle import BedrockModelLifecycleCheck
from .retrieval.cached import CachedRetrieval
from .retrieval.pipeline import RetrievalPipeline
from .retrieval.recipes import RetrievalConfig, get_recipe, with_knobs
from .stores.context import StoreContext
from .stores.registry import STORES, StoreKind
from .stores.roles import StoreBackend, StoreBundle, as_bundle
from .telemetry.emitter import Telemetry
from .telemetry.outbox import OutboxReporter
from .validation import check_recipe


def store_kind(settings: Settings) -> StoreKind:
    """The registry entry of ``settings.store``."""
    kind = STORES.get(settings.store)
    if kind is None:
        raise SettingError("store", f"unknown store kind {settings.store!r}; the kinds are {', '.join(STORES)}")
    return kind


def store_context(settings: Settings, *, dim: int, dim_short: int) -> StoreContext:
    """What the configured store is built with besides its own settings (vectors of ``dim`` and ``dim_short``)."""
    return StoreContext(
        kind=settings.store,
        dim=dim,
        dim_short=dim_short,
        vector_space=settings.embedder.vector_space,
        aws_region=settings.aws_region,
    )


def build_store(settings: Settings, *, dim: int, dim_short: int) -> StoreBundle:
    """The roles of the store named by ``settings.store`` (vectors of ``dim`` and ``dim_short`` floats), built
    by the function its registry entry names, from the settings sections that entry names:

    * ``embedded``: the SQLite store at ``resolved_sqlite_path``;
    * ``dual``: PostgreSQL and the OpenSearch keyword index, the outbox drained in the background (1 s interval);
    * ``opensearch``: the OpenSearch-only store.
    """
    kind = store_kind(settings)
    sections = {name: getattr(settings, name) for name in kind.sections}
    return kind.load()(store_context(settings, dim=dim, dim_short=dim_short), **sections)


def build_embedder(settings: Settings) -> Embedder:
    """The embedder of ``settings.embedder``."""
    return provider_factory.build_embedder(settings.embedder)


def build_reranker(settings: Settings) -> Reranker | None:
    """The reranker of ``settings.reranker`` (a local one on the embedding device); None for ``none``."""
    return provider_factory.build_reranker(
        settings.reranker, device=settings.embedder.device, aws_region=settings.aws_region
    )


def build_llm(settings: Settings) -> LLM | None:
    """The extraction LLM of ``settings.llm``; None for ``none``."""
    return provider_factory.build_llm(settings.llm, aws_region=settings.aws_region)


def build_model_check(settings: Settings) -> BedrockModelLifecycleCheck | None:
    """The lifecycle check of the Bedrock model of ``settings.llm``; None unless the LLM is Bedrock."""
    return BedrockModelLifecycleCheck.from_settings(settings.llm, aws_region=settings.aws_region)


def build_cache(settings: Settings) -> Cache:
    """The cache of ``settings.cache``."""
    return cache_factory.build_cache(settings.cache)


def build_encoder(settings: Settings, embedder: Embedder) -> MatryoshkaEncoder:
    """The encoder of ``settings.encoder`` over ``embedder``, with the embedder's threads and batch size and the
    embedding model's query instruction."""
    return MatryoshkaEncoder.from_settings(
        settings.encoder,
        embedder,
        cpu_threads=settings.embedder.threads,
        embedding_batch_size=settings.embedder.batch_size,
        query_prefix=settings.resolved_query_prefix,
    )


async def migrate_postgres(settings: Settings, *, dim: int | None = None) -> list[int]:
    """``cognis-memory migrate``: apply the pending migrations of the dual store's PostgreSQL schema; the versions
    applied. ``dim`` defaults to ``embedding_dim_full``, else the embedding model's size."""
    from .stores.migrate import migrate_postgres as migrate

    if settings.store != "dual":
        raise SettingError(
            "store", f"migrate applies the PostgreSQL schema of the dual store; this is {settings.store!r}"
        )
    if dim is None:
        dim = settings.encoder.dim_full or build_embedder(settings).dim
    context = store_context(settings, dim=dim, dim_short=settings.encoder.dim_short)
    return await migrate(context, postgres=settings.postgres)


def named_recipe(settings: Settings, name: str) -> RetrievalConfig:
    """The recipe ``name`` with the settings' ``recipe_overrides`` (and the embedding model's thresholds) set;
    an unknown name is an :class:`~cognis_memory.errors.InvalidInputError` naming ``recipe``."""
    base = check_recipe(name) or get_recipe(name)  # the blank name: unknown, named
    return with_knobs(base, settings.resolved_recipe_overrides)


def build_ingest(
    settings: Settings, encoder: MatryoshkaEncoder, stores: StoreBundle, *, cache: Cache, llm: LLM | None
) -> IngestPipeline:
    """The ingest pipeline over ``stores``, with the limits of ``settings.ingest`` and ``settings.jobs``."""
    return IngestPipeline(
        encoder,
        messages=stores.messages,
        memories=stores.memories,
        jobs=stores.jobs,
        vectors=stores.vectors,
        cache=cache,
        categorizer=EmbeddingCategorizer(encoder),
        llm=llm,
        job_max_attempts=settings.jobs.max_attempts,
        memory_max_bytes=settings.ingest.memory_max_bytes,
        # longer than a synchronous extraction can take (two questions, each asked at most twice)
        sync_grace_s=max(settings.jobs.lease_s, 4 * settings.llm.timeout_s + 10),
        update_min_similarity=settings.resolved_update_min_similarity,
    )


def build_retrieval(
    settings: Settings,
    encoder: MatryoshkaEncoder,
    stores: StoreBundle,
    *,
    cache: Cache,
    config: RetrievalConfig,
    reranker: Reranker | None,
) -> RetrievalPipeline:
    """The retrieval pipeline over ``stores`` running ``config``, the reranker time-boxed by ``settings.reranker``."""
    return RetrievalPipeline(
        encoder,
        vectors=stores.vectors,
        keywords=stores.keywords,
        memories=stores.memories,
        cache=cache,
        config=config,
        reranker=reranker,
        reranker_timeout_s=settings.reranker.timeout_ms / 1000,
    )


def build_worker(settings: Settings, ingest: IngestPipeline, telemetry: Telemetry) -> JobWorker:
    """The job worker of ``ingest``, paced by ``settings.jobs``."""
    return JobWorker(
        ingest,
        telemetry,
        backoff_s=settings.jobs.backoff_s,
        max_backoff_s=settings.jobs.max_backoff_s,
        max_wait_s=settings.jobs.max_wait_s,
        lease_s=settings.jobs.lease_s,
        concurrency=settings.jobs.worker_concurrency,
    )


@dataclass(frozen=True, slots=True)
class ServiceComponents:
    """What :class:`~cognis_memory.service.MemoryService` runs on, built by :func:`build_components`."""

    stores: StoreBundle
    cache: Cache
    telemetry: Telemetry
    #: the telemetry was built here, so the service flushes and stops its trace exporter when it closes
    owns_telemetry: bool
    encoder: MatryoshkaEncoder
    #: the recipe searches run when they name none
    retrieval_config: RetrievalConfig
    ingest: IngestPipeline
    retrieval: RetrievalPipeline
    cached_retrieval: CachedRetrieval
    worker: JobWorker
    #: asked once when the service starts: the lifecycle of the configured Bedrock model
    model_check: BedrockModelLifecycleCheck | None = None
    #: reports the dual store's outbox backlog as metrics while the service runs its worker (None: no outbox)
    outbox_report: OutboxReporter | None = None


def build_components(
    settings: Settings,
    *,
    store: StoreBundle | StoreBackend,
    embedder: Embedder,
    cache: Cache | None = None,
    llm: LLM | None = None,
    reranker: Reranker | None = None,
    telemetry: Telemetry | None = None,
    retrieval_config: RetrievalConfig | None = None,
    model_check: BedrockModelLifecycleCheck | None = None,
) -> ServiceComponents:
    """The encoder over ``embedder``, both pipelines, the job worker and (a store with an outbox) the reporter of
    its backlog over ``store`` (a
    :class:`~cognis_memory.stores.roles.StoreBundle`, or a backend object with ``roles()``), each pipeline
    given only the roles it uses. Left out: no cache, no LLM, no reranker, the telemetry of ``settings.telemetry``
    and the recipe of ``settings.retrieval``."""
    config = retrieval_config or named_recipe(settings, settings.retrieval.recipe)  # refused before anything starts
    stores = as_bundle(store)
    cache = cache or NullCache()
    if not isinstance(cache, NullCache) and callable(on_indexed := getattr(stores.backend, "on_indexed", None)):
        on_indexed(cache.invalidate)  # the dual store: a search cached before its keyword side caught up is dropped
    emitter = telemetry or Telemetry.from_settings(settings.telemetry)
    outbox_state = getattr(stores.backend, "outbox_state", None)  # the dual store: what OpenSearch still lacks
    outbox_report = OutboxReporter(outbox_state, emitter) if callable(outbox_state) else None
    encoder = build_encoder(settings, embedder)
    ingest = build_ingest(settings, encoder, stores, cache=cache, llm=llm)
    retrieval = build_retrieval(settings, encoder, stores, cache=cache, config=config, reranker=reranker)
    return ServiceComponents(
        stores=stores,
        cache=cache,
        telemetry=emitter,
        owns_telemetry=telemetry is None,
        encoder=encoder,
        retrieval_config=config,
        ingest=ingest,
        retrieval=retrieval,
        cached_retrieval=CachedRetrieval(retrieval, cache),
        worker=build_worker(settings, ingest, emitter),
        model_check=model_check,
        outbox_report=outbox_report,
    )


def components_from_settings(settings: Settings, *, telemetry: Telemetry | None = None) -> ServiceComponents:
    """Every component the settings name: the store, the embedder, the cache, the LLM, the reranker and the
    Bedrock model's lifecycle check, then (:func:`build_components`) the pipelines and the worker over them."""
    embedder = build_embedder(settings)
    dim = settings.encoder.dim_full or embedder.dim
    return build_components(
        settings,
        store=build_store(settings, dim=dim, dim_short=settings.encoder.dim_short),
        embedder=embedder,
        cache=build_cache(settings),
        llm=build_llm(settings),
        reranker=build_reranker(settings),
        telemetry=telemetry,
        model_check=build_model_check(settings),
    )
