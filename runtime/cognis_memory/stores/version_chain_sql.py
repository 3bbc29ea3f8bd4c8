"""The version chain of a memory in SQL, written once for SQLite and PostgreSQL.

Every version of a memory stores its chain's id (``chain_id``, the id of the chain's first version). From
any member the query reads that member's chain id (a primary-key lookup) and then every row with it (the
``(tenant_id, user_id, chain_id)`` index), both confined to the owner (tenant and user), in version
order. The two SQL dialects differ only in how a named parameter is written (``:id`` in SQLite,
``%(id)s`` in psycopg), so the text is built here from one template. The OpenSearch-only store walks
documents instead (``opensearch.memories.OpenSearchMemories.get_chain``: realtime GETs back through
``replaces_id``, ``successor_id`` forward), since its searches are not realtime.
"""

from __future__ import annotations

from collections.abc import Callable

_TEMPLATE = """
SELECT {columns} FROM memories
WHERE tenant_id = {t} AND user_id = {u}
  AND chain_id = (SELECT chain_id FROM memories WHERE id = {id} AND tenant_id = {t} AND user_id = {u})
ORDER BY version, created_at
"""


def chain_query(columns: str, param: Callable[[str], str]) -> str:
    """The chain query selecting ``columns``; its parameters are named ``id`` (any member), ``t`` (tenant)
    and ``u`` (user), each written by ``param``."""
    return _TEMPLATE.format(columns=columns, id=param("id"), t=param("t"), u=param("u"))


#: named parameters as SQLite writes them, and as psycopg does
SQLITE_PARAM: Callable[[str], str] = ":{}".format
PSYCOPG_PARAM: Callable[[str], str] = "%({})s".format
