"""Build the configured store and cache from :class:`~cognis_memory.config.Settings`."""

from __future__ import annotations

from ..config import Settings
from .base import MemoryStore
from .cache import Cache, NullCache


def build_store(settings: Settings, *, dim: int, dim_short: int) -> MemoryStore:
    """The store named by ``settings.store`` (vectors of ``dim`` and ``dim_short`` floats)."""
    if settings.store == "embedded":
        from .embedded import EmbeddedStore

        return EmbeddedStore(settings.resolved_sqlite_path, dim=dim, dim_short=dim_short)
    raise ValueError(f"store: unknown or unavailable store kind {settings.store!r}")


def build_cache(settings: Settings) -> Cache:
    """The Redis cache when ``redis_url`` is set, else the no-op cache."""
    return NullCache()
