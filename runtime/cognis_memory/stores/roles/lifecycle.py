"""The lifecycle role: the object that owns a backend's connections."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class StoreLifecycle(Protocol):
    name: str

    async def open(self) -> None:
        """Connect and apply idempotent migrations."""

    async def close(self) -> None: ...

    async def health(self) -> dict[str, bool]:
        """Reachability of each backing component, e.g. ``{"postgres": True, "opensearch": False}``."""
