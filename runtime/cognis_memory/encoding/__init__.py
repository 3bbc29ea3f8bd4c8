"""The shared encoder: texts to (full, prefix) unit vectors, for ingest and retrieval alike.

:class:`~.encoder.MatryoshkaEncoder` wraps an :class:`~cognis_memory.providers.base.Embedder`;
:mod:`.batching` is its queue (worker threads that micro-batch concurrent requests by priority,
so model work never runs on the event loop) and :mod:`.query_cache` its in-process cache of
query vectors. An embedder that is itself asynchronous (a remote service,
:class:`~cognis_memory.providers.base.AsyncEmbedder`) is awaited directly instead of queued.
"""

from .batching import EmbeddingBatcher, Priority
from .encoder import MatryoshkaEncoder, normalise_rows
from .query_cache import QueryVectorCache

__all__ = ["EmbeddingBatcher", "MatryoshkaEncoder", "Priority", "QueryVectorCache", "normalise_rows"]
