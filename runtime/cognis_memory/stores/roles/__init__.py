"""One small interface per store role, and the bundle the store factory returns.

A backend supplies the roles it has: the embedded SQLite store and the OpenSearch-only store have
every role; in the dual store PostgreSQL supplies every role but keyword search, which OpenSearch
supplies (:mod:`cognis_memory.stores.dual`). Consumers take only the roles they use.
"""

from .api_keys import ApiKeyStore
from .bundle import CompleteStore, StoreBackend, StoreBundle, as_bundle
from .jobs import JobQueue
from .keywords import KeywordSearch
from .lifecycle import StoreLifecycle
from .memories import MemoryVersions
from .messages import MessageLog
from .vectors import VectorSearch

__all__ = [
    "ApiKeyStore",
    "CompleteStore",
    "JobQueue",
    "KeywordSearch",
    "MemoryVersions",
    "MessageLog",
    "StoreBackend",
    "StoreBundle",
    "StoreLifecycle",
    "VectorSearch",
    "as_bundle",
]
