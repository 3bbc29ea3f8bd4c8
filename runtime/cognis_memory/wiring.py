"""Build the components from the whole configuration, each from its own settings section.

This is the one place below the entry points that reads :class:`~cognis_memory.config.Settings` whole. Every
component builds itself from its own section (``OnnxEmbedder.from_settings(settings.embedder)``, the cache
from ``settings.cache``, a store from the sections its registry entry names), and is handed here, by name,
the few values it shares with other components: the AWS region, the embedding model's vector space and query
instruction, the embedder's device, threads and batch size. No component imports the configuration, so the
components stand below it and it composes their settings classes.

:class:`~cognis_memory.service.MemoryService` (``from_settings``), the CLI and the tools (benchmarks, tests)
build through these functions. Nothing here connects: a store's ``open()`` does.
"""

from __future__ import annotations

from .caching import factory as cache_factory
from .caching.result_cache import Cache
from .config import Settings
from .encoding.encoder import MatryoshkaEncoder
from .providers import factory as provider_factory
from .providers.base import LLM, Embedder, Reranker
from .providers.model_lifecycle import BedrockModelLifecycleCheck
from .stores.context import StoreContext
from .stores.registry import STORES, StoreKind
from .stores.roles import StoreBundle


def store_kind(settings: Settings) -> StoreKind:
    """The registry entry of ``settings.store``."""
    kind = STORES.get(settings.store)
    if kind is None:
        raise ValueError(f"store: unknown store kind {settings.store!r}; the kinds are {', '.join(STORES)}")
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
        raise ValueError(f"store: migrate applies the PostgreSQL schema of the dual store; this is {settings.store!r}")
    if dim is None:
        dim = settings.encoder.dim_full or build_embedder(settings).dim
    context = store_context(settings, dim=dim, dim_short=settings.encoder.dim_short)
    return await migrate(context, postgres=settings.postgres)
