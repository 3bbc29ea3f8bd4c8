"""Every store kind: its ``COGNIS_STORE`` name, the function that loads its builder, and the settings
sections that builder is given.

Adding a store is one module (its settings class, a :class:`~cognis_memory.component_settings.ComponentSettings`,
and a ``from_settings(context, **sections) -> StoreBundle`` function), one loader function here and its line
in :data:`STORES`; ``COGNIS_STORE``'s accepted values, the CLI's ``--store`` choices and the test harness'
store list are read from that table. A loader imports its store's module when it is called, that is when the
kind is chosen, and a store module imports its client library inside its functions: a store's client
library is needed only where it is used. The providers (:mod:`cognis_memory.providers.registry`) and the
retrieval stages (:mod:`cognis_memory.retrieval.registry`) are registered the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .context import StoreContext

if TYPE_CHECKING:
    from .roles import StoreBundle

__all__ = ["STORES", "StoreBuilder", "StoreContext", "StoreKind"]

#: A store's ``from_settings``: ``builder(context, **{section: settings.<section>})``.
StoreBuilder = Callable[..., "StoreBundle"]


@dataclass(frozen=True, slots=True)
class StoreKind:
    """One store kind: ``load()`` imports its module and returns its builder, called as
    ``builder(context, **{section: settings.<section>})`` for each name in ``sections`` (the fields of
    :class:`cognis_memory.config.Settings` it is built from, each a store's settings class)."""

    load: Callable[[], StoreBuilder]
    sections: tuple[str, ...]


def _embedded() -> StoreBuilder:
    from .embedded import from_settings

    return from_settings


def _dual() -> StoreBuilder:
    from .dual import from_settings

    return from_settings


def _opensearch() -> StoreBuilder:
    from .opensearch import from_settings

    return from_settings


#: store kind -> how its builder is loaded and the settings sections it reads
STORES: dict[str, StoreKind] = {
    "embedded": StoreKind(_embedded, ("embedded",)),
    "dual": StoreKind(_dual, ("postgres", "opensearch")),
    "opensearch": StoreKind(_opensearch, ("opensearch",)),
}
