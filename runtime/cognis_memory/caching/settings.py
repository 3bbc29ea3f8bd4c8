"""Settings of the shared Redis cache (built by :mod:`.factory`). Composed by
:class:`cognis_memory.config.Settings`; each field's ``alias`` is its flat name (``COGNIS_<ALIAS>``)."""

from __future__ import annotations

from pydantic import Field, SecretStr

from ..component_settings import ComponentSettings


class CacheSettings(ComponentSettings):
    """Where the cache of embeddings and results lives, and how long entries live."""

    redis_url: str | None = Field(
        None, alias="redis_url", description="redis:// or rediss:// URL of the cache; unset = no cache."
    )
    redis_password: SecretStr | None = Field(
        None, alias="redis_password", description="Redis AUTH token (ElastiCache)."
    )
    redis_ssl_ca_certs: str | None = Field(
        None,
        alias="redis_ssl_ca_certs",
        description="CA certificates file for rediss:// (default: the system's); the certificate and the host name "
        "are always verified.",
    )
    ttl_s: int = Field(300, alias="cache_ttl_s", description="Lifetime of cached embeddings and results, seconds.")
