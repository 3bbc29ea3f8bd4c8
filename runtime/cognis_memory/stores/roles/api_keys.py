"""The API-key role: stored keys and the durable revocation list."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..values import ApiKeyRecord


@runtime_checkable
class ApiKeyStore(Protocol):
    async def put_api_key(self, record: ApiKeyRecord) -> None: ...

    async def get_api_key(self, key_hash: str) -> ApiKeyRecord | None:
        """The stored key, or None when there is none or it was revoked."""

    async def revoke_api_key(self, key_hash: str) -> bool:
        """Record the hash as revoked for good (also for keys that are not stored: the keys of
        ``COGNIS_API_KEYS``) and remove the stored key. Returns whether a stored key was removed."""

    async def api_key_revoked(self, key_hash: str) -> bool:
        """Whether the hash was ever revoked."""
