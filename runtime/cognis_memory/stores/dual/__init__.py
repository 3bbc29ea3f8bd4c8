"""The dual store (PostgreSQL + OpenSearch): :mod:`.store` (lifecycle, the outbox relay, the roles),
:mod:`.outbox` (the outbox reader), :mod:`.keywords` (BM25 hits hydrated from PostgreSQL)."""

from .keywords import HydratedKeywordSearch
from .outbox import OutboxBatch, OutboxItem, OutboxState, PostgresOutbox
from .store import KEYWORD_SEARCH_TIMEOUT_CAP_S, DrainResult, DualStore, from_settings

__all__ = [
    "KEYWORD_SEARCH_TIMEOUT_CAP_S",
    "DrainResult",
    "DualStore",
    "HydratedKeywordSearch",
    "OutboxBatch",
    "OutboxItem",
    "OutboxState",
    "PostgresOutbox",
    "from_settings",
]
