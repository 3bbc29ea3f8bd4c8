"""Build the configured cache from :class:`~cognis_memory.config.Settings`: :class:`~.redis_cache.RedisCache`
when ``redis_url`` is set, else :class:`~.result_cache.NullCache`. Nothing here connects."""

from __future__ import annotations

from ..config import Settings
from .result_cache import Cache, NullCache


def build_cache(settings: Settings) -> Cache:
    """The Redis cache when ``redis_url`` is set, else the no-op cache."""
    if not settings.cache.redis_url:
        return NullCache()
    from .redis_cache import RedisCache

    password = settings.cache.redis_password.get_secret_value() if settings.cache.redis_password else None
    return RedisCache(
        settings.cache.redis_url,
        password=password,
        ttl_s=settings.cache.ttl_s,
        ssl_ca_certs=settings.cache.redis_ssl_ca_certs,
    )
