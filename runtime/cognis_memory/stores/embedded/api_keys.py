"""The embedded store's API keys: kept by hash, revoked."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from ..values import ApiKeyRecord
from .base import EmbeddedBase


class EmbeddedApiKeys(EmbeddedBase):
    """The embedded store's API keys: kept by hash, revoked."""

    def _put_api_key(self, record: ApiKeyRecord) -> None:
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO api_keys (key_hash, tenant_id, read_only, name, created_at) VALUES (?,?,?,?,?)"
                " ON CONFLICT(key_hash) DO UPDATE SET tenant_id = excluded.tenant_id,"
                " read_only = excluded.read_only, name = excluded.name",
                (record.key_hash, record.tenant_id, int(record.read_only), record.name, datetime.now(UTC).timestamp()),
            )

    async def put_api_key(self, record: ApiKeyRecord) -> None:
        await asyncio.to_thread(self._put_api_key, record)

    async def get_api_key(self, key_hash: str) -> ApiKeyRecord | None:
        rows = await asyncio.to_thread(
            self._read,
            "SELECT * FROM api_keys k WHERE key_hash = ?"
            " AND NOT EXISTS (SELECT 1 FROM api_key_revocations r WHERE r.key_hash = k.key_hash)",
            (key_hash,),
        )
        if not rows:
            return None
        r = rows[0]
        return ApiKeyRecord(
            key_hash=r["key_hash"], tenant_id=r["tenant_id"], read_only=bool(r["read_only"]), name=r["name"]
        )

    def _revoke_api_key(self, key_hash: str) -> bool:
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO api_key_revocations (key_hash, revoked_at) VALUES (?, ?) ON CONFLICT(key_hash) DO NOTHING",
                (key_hash, datetime.now(UTC).timestamp()),
            )
            return conn.execute("DELETE FROM api_keys WHERE key_hash = ?", (key_hash,)).rowcount > 0

    async def revoke_api_key(self, key_hash: str) -> bool:
        return await asyncio.to_thread(self._revoke_api_key, key_hash)

    async def api_key_revoked(self, key_hash: str) -> bool:
        rows = await asyncio.to_thread(self._read, "SELECT 1 FROM api_key_revocations WHERE key_hash = ?", (key_hash,))
        return bool(rows)
