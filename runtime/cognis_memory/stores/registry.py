"""Every store kind: its ``COGNIS_STORE`` name and the function that builds its roles from the settings.

Adding a store is one module with a ``from_settings(settings, *, dim, dim_short) -> StoreBundle``
function plus one line here; ``COGNIS_STORE``'s accepted values, the CLI's ``--store`` choices and
the test harness' store list are read from this table. Modules are imported only when chosen, so a
store's client library is needed only where it is used.
"""

from __future__ import annotations

#: store kind -> "module:function" building its :class:`~.roles.StoreBundle`
STORES: dict[str, str] = {
    "embedded": "cognis_memory.stores.embedded:from_settings",
    "dual": "cognis_memory.stores.dual:from_settings",
    "opensearch": "cognis_memory.stores.opensearch:from_settings",
}
