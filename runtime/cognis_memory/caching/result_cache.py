"""Cache protocol for query embeddings and search results, plus the no-op cache.

Entries are keyed per tenant and user. Search results are additionally keyed by the
user's *generation*, a counter the service bumps on every write for that user, so one
increment invalidates all of that user's cached results at once. A cache never raises:
when its backend is down it answers "miss", and the service runs uncached.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..domain import Owner


@runtime_checkable
class Cache(Protocol):
    name: str

    async def get_query_embedding(self, owner: Owner, model: str, text: str) -> np.ndarray | None: ...

    async def set_query_embedding(self, owner: Owner, model: str, text: str, vector: np.ndarray) -> None: ...

    async def get_search(self, owner: Owner, request_key: str) -> dict[str, Any] | None:
        """A cached search response for this user's *current* generation, or None."""

    async def set_search(self, owner: Owner, request_key: str, response: dict[str, Any]) -> None: ...

    async def invalidate(self, owner: Owner) -> None:
        """Bump the user's generation: every cached search of this user becomes unreachable."""

    async def forget_user(self, owner: Owner) -> int:
        """Delete every entry of this user; returns how many keys were removed."""

    async def health(self) -> bool: ...

    async def close(self) -> None: ...


class NullCache:
    """The cache used when none is configured: always a miss."""

    name = "none"

    async def get_query_embedding(self, owner: Owner, model: str, text: str) -> np.ndarray | None:
        return None

    async def set_query_embedding(self, owner: Owner, model: str, text: str, vector: np.ndarray) -> None:
        return None

    async def get_search(self, owner: Owner, request_key: str) -> dict[str, Any] | None:
        return None

    async def set_search(self, owner: Owner, request_key: str, response: dict[str, Any]) -> None:
        return None

    async def invalidate(self, owner: Owner) -> None:
        return None

    async def forget_user(self, owner: Owner) -> int:
        return 0

    async def health(self) -> bool:
        return True

    async def close(self) -> None:
        return None
