"""Settings of the HTTP API: its keys and authentication, where `serve` listens, request limits and the
inspector. Composed by :class:`cognis_memory.config.Settings`; each field's ``alias`` is its flat name
(``COGNIS_<ALIAS>``).

They sit beside the :mod:`cognis_memory.api` package, not in it: the package stands above the service it
serves, while these settings are read below it too (the service holds the key list, the CLI's ``serve``
binds the address), and the configuration, which composes them, stands below the service."""

from __future__ import annotations

from pydantic import Field, SecretStr

from .component_settings import ComponentSettings


class ApiSettings(ComponentSettings):
    """Who may call the API, where it listens and what it accepts."""

    max_request_bytes: int = Field(
        16 * 1024 * 1024,
        alias="max_request_bytes",
        description="Largest accepted HTTP request body, bytes (413).",
    )
    api_keys: SecretStr | None = Field(
        None,
        alias="api_keys",
        description=(
            "API keys of this process: comma-separated 'key=tenant' (read-write) or 'key=tenant:read' entries; "
            "grammar under README 'API keys'. Held in memory as hashes, never stored: a key dropped from the "
            "list stops working at restart. A malformed entry stops the service at start."
        ),
    )
    auth_disabled: bool = Field(
        False,
        alias="auth_disabled",
        description="Development only: accept requests without a key (as tenant `auth_disabled_tenant`).",
    )
    auth_disabled_tenant: str = Field(
        "default",
        alias="auth_disabled_tenant",
        description="Tenant of requests without a key when `auth_disabled` is on (local tools, MCP).",
    )
    host: str = Field("127.0.0.1", alias="host", description="Bind address of `serve`.")
    port: int = Field(8080, alias="port", description="Port of `serve`.")
    inspector: bool = Field(
        True, alias="inspector", description="Serve the memory inspector (static page, same API keys) at /ui/."
    )
