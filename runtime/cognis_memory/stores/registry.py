"""Every store kind: its ``COGNIS_STORE`` name, the function that builds its roles, and the settings
sections that function is given.

Adding a store is one module (its settings class, a :class:`~cognis_memory.component_settings.ComponentSettings`,
and a ``from_settings(context, **sections) -> StoreBundle`` function) plus one line here; ``COGNIS_STORE``'s
accepted values, the CLI's ``--store`` choices and the test harness' store list are read from this table.
A store module is imported only when its kind is chosen or its settings class is composed, so it imports its
client library inside its functions: a store's client library is needed only where it is used.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .roles import StoreBundle


@dataclass(frozen=True, slots=True)
class StoreContext:
    """What a store is built with besides its own settings: its kind (``COGNIS_STORE``), the sizes of the
    full and short vectors, the vector space they belong to (the embedding model's, recorded by the store)
    and the AWS region of the AWS clients (Secrets Manager, RDS IAM, OpenSearch SigV4)."""

    kind: str
    dim: int
    dim_short: int
    vector_space: str | None = None
    aws_region: str | None = None


@dataclass(frozen=True, slots=True)
class StoreKind:
    """One store kind: ``builder`` is the ``"module:function"`` building its roles, called as
    ``function(context, **{section: settings.<section>})`` for each name in ``sections`` (the fields of
    :class:`cognis_memory.config.Settings` it is built from, each a store's settings class)."""

    builder: str
    sections: tuple[str, ...]

    def load(self) -> Callable[..., StoreBundle]:
        """The builder function (its module imported now)."""
        module, _, function = self.builder.partition(":")
        build: Callable[..., StoreBundle] = getattr(importlib.import_module(module), function)
        return build


#: store kind -> its builder and the settings sections it reads
STORES: dict[str, StoreKind] = {
    "embedded": StoreKind("cognis_memory.stores.embedded:from_settings", ("embedded",)),
    "dual": StoreKind("cognis_memory.stores.dual:from_settings", ("postgres", "opensearch")),
    "opensearch": StoreKind("cognis_memory.stores.opensearch:from_settings", ("opensearch",)),
}
