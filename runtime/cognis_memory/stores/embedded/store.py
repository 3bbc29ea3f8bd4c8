"""The embedded store: every role of :mod:`cognis_memory.stores.roles` over one SQLite file."""

from __future__ import annotations

from ..context import StoreContext
from ..roles import StoreBundle
from ..settings import EmbeddedStoreSettings
from .api_keys import EmbeddedApiKeys
from .jobs import EmbeddedJobs
from .memories import EmbeddedMemories
from .messages import EmbeddedMessages
from .search import EmbeddedSearch


class EmbeddedStore(EmbeddedMemories, EmbeddedMessages, EmbeddedSearch, EmbeddedJobs, EmbeddedApiKeys):
    """SQLite + FTS5 + numpy store: supplies every role of :mod:`cognis_memory.stores.roles` itself.

    ``keyword_index_min_rows``: current memories from which a user's unfiltered keyword searches use the
    in-memory BM25 index (0: never). ``ann_min_rows``: current memories from which a user's unfiltered
    vector searches shortlist with the approximate prefix index (0: never). ``max_cached_rows``: rows
    held in memory by each kind of per-user index, over all users (least recently used users are
    dropped). ``ann_threads``: threads that build an approximate index (default: every core).
    """

    name = "embedded"

    def roles(self) -> StoreBundle:
        return StoreBundle.of(self)


def from_settings(context: StoreContext, *, embedded: EmbeddedStoreSettings) -> StoreBundle:
    """The embedded store at ``resolved_sqlite_path`` (registry entry ``embedded``)."""
    return EmbeddedStore(
        embedded.resolved_sqlite_path,
        dim=context.dim,
        dim_short=context.dim_short,
        vector_space=context.vector_space,
        keyword_index_min_rows=embedded.keyword_index_min_memories,
        ann_min_rows=embedded.ann_min_memories,
    ).roles()
