"""The store bundle: one object per role, plus the backend that owns the connections."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .api_keys import ApiKeyStore
from .jobs import JobQueue
from .keywords import KeywordSearch
from .lifecycle import StoreLifecycle
from .memories import MemoryVersions
from .messages import MessageLog
from .vectors import VectorSearch


@runtime_checkable
class CompleteStore(
    StoreLifecycle, MessageLog, MemoryVersions, VectorSearch, KeywordSearch, JobQueue, ApiKeyStore, Protocol
):
    """A backend that supplies every role itself (the embedded store, the OpenSearch-only store)."""


@dataclass(frozen=True, slots=True)
class StoreBundle:
    """What the store factory returns and the service hands out, one role to each consumer.

    ``backend`` opens, closes and health-checks the whole store (for the dual store it is the
    :class:`~cognis_memory.stores.dual.DualStore`, which owns the outbox relay).
    """

    backend: StoreLifecycle
    messages: MessageLog
    memories: MemoryVersions
    vectors: VectorSearch
    keywords: KeywordSearch
    jobs: JobQueue
    api_keys: ApiKeyStore

    @classmethod
    def of(cls, store: CompleteStore) -> StoreBundle:
        """Every role from one backend."""
        return cls(store, store, store, store, store, store, store)

    @property
    def name(self) -> str:
        return self.backend.name

    async def open(self) -> None:
        await self.backend.open()

    async def close(self) -> None:
        await self.backend.close()

    async def health(self) -> dict[str, bool]:
        return await self.backend.health()


class StoreBackend(Protocol):
    """A backend object that composes its own roles (``EmbeddedStore``, ``DualStore``, ``OpenSearchStore``)."""

    def roles(self) -> StoreBundle: ...


def as_bundle(store: StoreBundle | StoreBackend) -> StoreBundle:
    """A bundle as it is, or the roles of a backend object (``EmbeddedStore(...)``, ``DualStore(...)``)."""
    return store if isinstance(store, StoreBundle) else store.roles()
