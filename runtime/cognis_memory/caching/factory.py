"""Build the cache from its settings (:class:`~.settings.CacheSettings`): :class:`~.redis_cache.RedisCache`
when ``redis_url`` is set, else :class:`~.result_cache.NullCache`. Nothing here connects."""

from __future__ import annotations

from .result_cache import Cache, NullCache
from .settings import CacheSettings


def build_cache(settings: CacheSettings) -> Cache:
    """The Redis cache when ``redis_url`` is set, else the no-op cache."""
    if not settings.redis_url:
        return NullCache()
    from .redis_cache import RedisCache

    password = settings.redis_password.get_secret_value() if settings.redis_password else None
    return RedisCache(
        settings.redis_url, password=password, ttl_s=settings.ttl_s, ssl_ca_certs=settings.redis_ssl_ca_certs
    )
