"""The version chain of a memory in SQL, written once for SQLite and PostgreSQL.

A chain is linked by ``replaces_id`` (each version names the one it replaced). From any member the
query walks back through ``replaces_id`` and forward through the rows that replace it, both
confined to the owner (tenant and user) at every step, and returns every member in version order.
The two SQL dialects differ only in how a named parameter is written (``:id`` in SQLite,
``%(id)s`` in psycopg), so the text is built here from one template. The OpenSearch-only store
walks documents instead (``opensearch.memories.OpenSearchMemories.get_chain``: realtime GETs back, ``successor_id``
forward), since it has no join.
"""

from __future__ import annotations

from collections.abc import Callable

_TEMPLATE = """
WITH RECURSIVE back(id, replaces_id) AS (
    SELECT id, replaces_id FROM memories WHERE id = {id} AND tenant_id = {t} AND user_id = {u}
    UNION
    SELECT m.id, m.replaces_id FROM memories m JOIN back b ON m.id = b.replaces_id
    WHERE m.tenant_id = {t} AND m.user_id = {u}
),
fwd(id) AS (
    SELECT id FROM memories WHERE id = {id} AND tenant_id = {t} AND user_id = {u}
    UNION
    SELECT m.id FROM memories m JOIN fwd f ON m.replaces_id = f.id
    WHERE m.tenant_id = {t} AND m.user_id = {u}
)
SELECT {columns} FROM memories
WHERE tenant_id = {t} AND user_id = {u} AND id IN (SELECT id FROM back UNION SELECT id FROM fwd)
ORDER BY version, created_at
"""


def chain_query(columns: str, param: Callable[[str], str]) -> str:
    """The chain query selecting ``columns``; its parameters are named ``id`` (any member), ``t`` (tenant)
    and ``u`` (user), each written by ``param``."""
    return _TEMPLATE.format(columns=columns, id=param("id"), t=param("t"), u=param("u"))


#: named parameters as SQLite writes them, and as psycopg does
SQLITE_PARAM: Callable[[str], str] = ":{}".format
PSYCOPG_PARAM: Callable[[str], str] = "%({})s".format
