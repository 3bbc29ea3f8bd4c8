"""PostgreSQL's API-key role: stored keys and the durable revocation list."""

from __future__ import annotations

from psycopg.rows import dict_row

from ..values import ApiKeyRecord
from .connection import PostgresDatabase


class PostgresApiKeys:
    """The :class:`~cognis_memory.stores.roles.ApiKeyStore` of a PostgreSQL database."""

    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db

    async def put_api_key(self, record: ApiKeyRecord) -> None:
        async with self.db.connection() as conn:
            await conn.execute(
                "INSERT INTO api_keys (key_hash, tenant_id, read_only, name) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (key_hash) DO UPDATE SET tenant_id = excluded.tenant_id,"
                " read_only = excluded.read_only, name = excluded.name",
                (record.key_hash, record.tenant_id, record.read_only, record.name),
            )

    async def get_api_key(self, key_hash: str) -> ApiKeyRecord | None:
        async with self.db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                "SELECT key_hash, tenant_id, read_only, name FROM api_keys k WHERE key_hash = %s"
                " AND NOT EXISTS (SELECT 1 FROM api_key_revocations r WHERE r.key_hash = k.key_hash)",
                (key_hash,),
            )
            r = await cur.fetchone()
        if r is None:
            return None
        return ApiKeyRecord(key_hash=r["key_hash"], tenant_id=r["tenant_id"], read_only=r["read_only"], name=r["name"])

    async def revoke_api_key(self, key_hash: str) -> bool:
        async with self.db.connection() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO api_key_revocations (key_hash) VALUES (%s) ON CONFLICT (key_hash) DO NOTHING", (key_hash,)
            )
            cur = await conn.execute("DELETE FROM api_keys WHERE key_hash = %s", (key_hash,))
            return cur.rowcount > 0

    async def api_key_revoked(self, key_hash: str) -> bool:
        async with self.db.connection() as conn:
            cur = await conn.execute("SELECT 1 FROM api_key_revocations WHERE key_hash = %s", (key_hash,))
            return await cur.fetchone() is not None
