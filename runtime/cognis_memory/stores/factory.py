"""Build the configured store (its roles, :class:`~.roles.StoreBundle`) from :class:`~cognis_memory.config.Settings`
through the registry (:mod:`.registry`): the kinds are

* ``embedded``: the SQLite store at ``resolved_sqlite_path``;
* ``dual``: :class:`~.postgres.PostgresStore` and :class:`~.opensearch.keyword_index.OpenSearchKeywordIndex`, the outbox
  drained in the background (1 s interval);
* ``opensearch``: :class:`~.opensearch.store.OpenSearchStore`.

How those backends reach their servers (DSNs, Secrets Manager, RDS IAM tokens, the OpenSearch client) is
:mod:`.connections`. Nothing here connects: the store's ``open()`` does.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from ..config import Settings
from .registry import STORES
from .roles import StoreBundle


def build_store(settings: Settings, *, dim: int, dim_short: int) -> StoreBundle:
    """The roles of the store named by ``settings.store`` (vectors of ``dim`` and ``dim_short`` floats),
    built by the function :data:`~.registry.STORES` names for it."""
    target = STORES.get(settings.store)
    if target is None:
        raise ValueError(f"store: unknown store kind {settings.store!r}; the kinds are {', '.join(STORES)}")
    module, _, function = target.partition(":")
    build: Callable[..., StoreBundle] = getattr(importlib.import_module(module), function)
    return build(settings, dim=dim, dim_short=dim_short)
