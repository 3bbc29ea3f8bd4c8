"""The API keys a request may present: the keys of ``COGNIS_API_KEYS`` (held in memory, by hash) and the
keys made by ``api-key create`` (in the store), with the store's durable revocation list over both.

The list's grammar and the lifecycle rules are in :mod:`cognis_memory.api_keys`; this module applies
them to a store's :class:`~cognis_memory.stores.roles.ApiKeyStore`. :class:`~cognis_memory.service.MemoryService`
hands its key operations here.
"""

from __future__ import annotations

import secrets

from .api_keys import LEGACY_LIST_KEY_NAME, MAX_KEY_LENGTH, hash_api_key, parse_api_key_list
from .errors import InvalidInputError
from .stores.roles import ApiKeyStore
from .stores.values import ApiKeyRecord
from .validation import check_id


class KeyRegistry:
    """Creates, authenticates and revokes keys over ``store``; ``listed`` is the ``COGNIS_API_KEYS`` text
    (None for no list). A malformed list raises :class:`~cognis_memory.api_keys.ApiKeyListError`, so the
    service that builds the registry never starts."""

    def __init__(self, store: ApiKeyStore, listed: str | None) -> None:
        self.store = store
        self._listed = {} if listed is None else parse_api_key_list(listed, check_id)

    async def create(self, tenant_id: str, *, read_only: bool = False, name: str = "") -> str:
        """A new random key for the tenant; only its hash is stored, so show it once."""
        check_id("tenant_id", tenant_id)
        if name == LEGACY_LIST_KEY_NAME:
            raise InvalidInputError("name", f"{LEGACY_LIST_KEY_NAME!r} is reserved (keys copied from COGNIS_API_KEYS)")
        key = "cgm_" + secrets.token_urlsafe(32)
        await self.store.put_api_key(ApiKeyRecord(hash_api_key(key), tenant_id, read_only=read_only, name=name))
        return key

    async def authenticate(self, key: str) -> ApiKeyRecord | None:
        """The key's record: a key of ``COGNIS_API_KEYS`` that was never revoked, or a stored key."""
        if not key or len(key) > MAX_KEY_LENGTH:
            return None
        key_hash = hash_api_key(key)
        listed = self._listed.get(key_hash)
        if listed is not None:
            return None if await self.store.api_key_revoked(key_hash) else listed
        record = await self.store.get_api_key(key_hash)
        if record is None or record.name == LEGACY_LIST_KEY_NAME:  # an earlier version's copy of a listed key
            return None
        return record

    async def revoke(self, key: str) -> bool:
        """Revoke a key for good, in every process: a stored key, or a key of ``COGNIS_API_KEYS`` (whether or
        not this process was given that list). Returns whether the key was valid here until now."""
        if not isinstance(key, str) or not key:
            raise InvalidInputError("key", "is required")
        key_hash = hash_api_key(key)
        listed = key_hash in self._listed and not await self.store.api_key_revoked(key_hash)
        removed = await self.store.revoke_api_key(key_hash)
        return listed or removed
