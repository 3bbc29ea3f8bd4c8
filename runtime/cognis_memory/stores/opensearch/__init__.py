"""OpenSearch-only store (pattern A): BM25 and k-NN in one memories index, plus messages, jobs
and API keys in their own indices. No Postgres.

Modules by role: :mod:`.client` (the runner and plumbing both OpenSearch stores share),
:mod:`.documents` (mappings, document fields, owner-scoped ids, queries), :mod:`.indices` (the store's
indices), :mod:`.messages`, :mod:`.memories`, :mod:`.search` (vector and keyword search), :mod:`.jobs`,
:mod:`.api_keys`; :mod:`.store` composes them. :mod:`.keyword_index` is the dual store's BM25 index.
"""

from .client import OpenSearchRunner, Refresh
from .documents import MEMORY_FIELDS, memory_fields, owner_key
from .keyword_index import (
    IndexOp,
    KeywordDoc,
    OpenSearchKeywordIndex,
    OpResult,
    doc_version_current,
    doc_version_gone,
    doc_version_repair,
)
from .store import OpenSearchStore, from_settings

__all__ = [
    "MEMORY_FIELDS",
    "IndexOp",
    "KeywordDoc",
    "OpResult",
    "OpenSearchKeywordIndex",
    "OpenSearchRunner",
    "OpenSearchStore",
    "Refresh",
    "doc_version_current",
    "doc_version_gone",
    "doc_version_repair",
    "from_settings",
    "memory_fields",
    "owner_key",
]
