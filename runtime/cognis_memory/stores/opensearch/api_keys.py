"""The OpenSearch-only store's API-key role: stored keys and the durable revocation list."""

from __future__ import annotations

from datetime import UTC, datetime

from opensearchpy import exceptions as os_exc

from ..records import iso
from ..values import ApiKeyRecord
from .indices import OpenSearchIndices


class OpenSearchApiKeys:
    """The :class:`~cognis_memory.stores.roles.ApiKeyStore` of an OpenSearch-only store."""

    def __init__(self, ix: OpenSearchIndices) -> None:
        self.ix = ix

    async def put_api_key(self, record: ApiKeyRecord) -> None:
        await self.ix.runner(
            self.ix.client.index, index=self.ix.apikeys, id=record.key_hash,
            body={"key_hash": record.key_hash, "tenant_id": record.tenant_id, "read_only": record.read_only,
                  "name": record.name},
            refresh=self.ix.refresh, request_timeout=self.ix.write_timeout_s,
        )  # fmt: skip

    async def get_api_key(self, key_hash: str) -> ApiKeyRecord | None:
        """One realtime multi-get of the key and of its revocation."""
        res = await self.ix.runner(
            self.ix.client.mget,
            body={
                "docs": [{"_index": self.ix.apikeys, "_id": key_hash}, {"_index": self.ix.revocations, "_id": key_hash}]
            },
            request_timeout=self.ix.write_timeout_s,
        )
        key, revocation = res["docs"]
        if not key.get("found") or revocation.get("found"):
            return None
        s = key["_source"]
        return ApiKeyRecord(
            key_hash=s["key_hash"], tenant_id=s["tenant_id"], read_only=bool(s["read_only"]), name=s["name"]
        )

    async def revoke_api_key(self, key_hash: str) -> bool:
        """The revocation first, then the key: a crash in between leaves a key that is refused."""
        await self.ix.create(
            self.ix.revocations, key_hash, {"key_hash": key_hash, "revoked_at": iso(datetime.now(UTC))}
        )
        try:
            await self.ix.runner(
                self.ix.client.delete, index=self.ix.apikeys, id=key_hash, refresh=self.ix.refresh,
                request_timeout=self.ix.write_timeout_s,
            )  # fmt: skip
            return True
        except os_exc.NotFoundError:
            return False

    async def api_key_revoked(self, key_hash: str) -> bool:
        return await self.ix.get_source(self.ix.revocations, key_hash) is not None
