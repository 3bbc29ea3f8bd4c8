"""The OpenSearch-only store (pattern A): its indices and the roles it supplies, every one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opensearchpy import OpenSearch

from ...domain import Memory
from ..context import StoreContext
from ..roles import StoreBundle
from ..settings import OpenSearchSettings
from .api_keys import OpenSearchApiKeys
from .indices import OpenSearchIndices
from .jobs import OpenSearchJobs
from .memories import OpenSearchMemories
from .messages import OpenSearchMessages
from .search import OpenSearchKeywordSearch, OpenSearchVectorSearch


class OpenSearchStore(OpenSearchIndices):
    """OpenSearch-only store: its indices (:class:`OpenSearchIndices`) and every role of
    :mod:`cognis_memory.stores.roles`, each an object of its own module, composed by :meth:`roles`.

    ``client`` is a synchronous ``opensearchpy.OpenSearch`` (the store owns it from now on).
    """

    name = "opensearch"

    def __init__(self, client: OpenSearch, *, leftover_after_s: float = 30.0, **indices: Any) -> None:
        """``indices``: the keyword arguments of :class:`OpenSearchIndices` (``index_prefix``, ``dim`` and
        ``dim_short`` required); ``leftover_after_s``: see :class:`OpenSearchMemories`."""
        super().__init__(client, **indices)
        memories = OpenSearchMemories(self, leftover_after_s=leftover_after_s)
        self._roles = StoreBundle(
            backend=self,
            messages=OpenSearchMessages(self),
            memories=memories,
            vectors=OpenSearchVectorSearch(memories),
            keywords=OpenSearchKeywordSearch(memories),
            jobs=OpenSearchJobs(self),
            api_keys=OpenSearchApiKeys(self),
        )

    def roles(self) -> StoreBundle:
        return self._roles

    async def bulk_load(self, memories: Sequence[Memory]) -> None:
        """Index many memories fast (benchmarks, imports): :meth:`OpenSearchMemories.bulk_load`."""
        await self._roles.memories.bulk_load(memories)  # type: ignore[attr-defined]


def from_settings(context: StoreContext, *, opensearch: OpenSearchSettings) -> StoreBundle:
    """The OpenSearch-only store over ``opensearch_url`` (registry entry ``opensearch``)."""
    from ..connections import opensearch_client

    return OpenSearchStore(
        opensearch_client(opensearch, store=context.kind, aws_region=context.aws_region),
        index_prefix=opensearch.index_prefix,
        shards=opensearch.shards,
        dim=context.dim,
        dim_short=context.dim_short,
        search_timeout_s=opensearch.timeout_s,
        write_timeout_s=opensearch.timeout_s,
        vector_space=context.vector_space,
    ).roles()
