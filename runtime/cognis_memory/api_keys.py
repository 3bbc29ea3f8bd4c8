"""API keys: hashing, and the list of ``COGNIS_API_KEYS`` (its grammar and how it meets stored keys).

The list is comma separated; whitespace around an entry is ignored, none is allowed inside one::

    entry  = key "=" tenant [ ":" mode ]
    mode   = "read" | "write"                 lower case; no mode means "write" (read-write)
    key    = 1-512 visible ASCII characters, no "," or "=" (what clients send as the Bearer token)
    tenant = an id as the service checks every id, without ":" (and without "=", the separator)

An entry that does not match (no ``=``, a second ``=`` or ``:``, an unknown mode such as ``READ``,
``readonly`` or ``ro``, an empty entry, whitespace inside, a key listed twice, an invalid tenant)
stops the service at start with :class:`ApiKeyListError`, which names the entry by its position and
a masked form of its key, never the key itself.

Lifecycle (rotation: docs/deploy.md, "The first API key"):

* The list is authoritative for its own keys. A process holds them in memory (as SHA-256 hashes)
  and never writes them to the store, so a key removed from the list stops working in every
  process started without it, and a process still running with the old list keeps it until it
  stops (a rolling deployment). Keys made by ``cognis-memory api-key create`` live in the store and
  are not affected by the list.
* Revocation is durable: ``cognis-memory api-key revoke`` records the key's hash in the store's
  revocation list, and a revoked key is refused by every process, also when the list still names it.
  A revocation is never undone; give the tenant a new key.
* Stores written by releases that copied the list into the store hold those keys as rows named ``bootstrap``
  (:data:`LEGACY_LIST_KEY_NAME`); those rows are ignored, so they cannot outlive the list.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping

from .errors import ConfigurationError
from .stores.values import ApiKeyRecord

#: The longest key the service looks up (a longer Bearer token is refused without a store lookup).
MAX_KEY_LENGTH = 512
#: The name of rows that earlier releases copied from the list into the store; they are ignored, never keys.
LEGACY_LIST_KEY_NAME = "bootstrap"
MODES = {"read": True, "write": False}  # mode -> read_only
_SETTING = "api_keys (COGNIS_API_KEYS)"


class ApiKeyListError(ConfigurationError, ValueError):
    """``COGNIS_API_KEYS`` is malformed; the message names the entry without revealing its key."""


def hash_api_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def mask_key(key: str) -> str:
    """A form of a key that identifies it to its owner without revealing it: its first four
    characters (only for keys of 16 characters or more) and its length."""
    shown = key[:4] if len(key) >= 16 else ""
    return f"'{shown}…' ({len(key)} character{'' if len(key) == 1 else 's'})"


def _key_problem(key: str) -> str | None:
    if not key:
        return "the key before '=' is empty"
    if len(key) > MAX_KEY_LENGTH:
        return f"the key is longer than {MAX_KEY_LENGTH} characters"
    if not all("!" <= ch <= "~" for ch in key):
        return "the key must be visible ASCII characters"
    return None


def parse_api_key_list(text: str, check_tenant: Callable[[str, str], None]) -> dict[str, ApiKeyRecord]:
    """The keys of a ``COGNIS_API_KEYS`` value, by hash. ``check_tenant(field, value)`` raises
    ``ValueError`` for a tenant id the service would refuse. Raises :class:`ApiKeyListError`."""
    if not text.strip():
        return {}
    entries = text.split(",")
    out: dict[str, ApiKeyRecord] = {}
    first_seen: dict[str, int] = {}
    for n, raw in enumerate(entries, start=1):
        entry = raw.strip()

        def fail(why: str, n: int = n, entry: str = entry) -> ApiKeyListError:
            where = f"entry {n} of {len(entries)} (key {mask_key(entry.partition('=')[0])})"
            return ApiKeyListError(f"{_SETTING}: {where}: {why}")

        if not entry:
            raise ApiKeyListError(f"{_SETTING}: entry {n} of {len(entries)} is empty (two commas or a trailing comma)")
        if any(ch.isspace() for ch in entry):
            raise fail("whitespace inside an entry; write 'key=tenant' or 'key=tenant:read'")
        if entry.count("=") != 1:
            raise fail("an entry is 'key=tenant' or 'key=tenant:read' with exactly one '='")
        key, _, rest = entry.partition("=")
        if (problem := _key_problem(key)) is not None:
            raise fail(problem)
        tenant, colon, mode = rest.partition(":")
        if colon and ":" in mode:
            raise fail("more than one ':' after the tenant")
        if colon and mode not in MODES:
            raise fail(f"unknown mode {mode!r}; the modes are ':read' and ':write' (lower case)")
        if not tenant:
            raise fail("the tenant after '=' is empty")
        try:
            check_tenant("tenant", tenant)
        except ValueError as exc:
            raise fail(f"the tenant {getattr(exc, 'message', str(exc))}") from None
        key_hash = hash_api_key(key)
        if key_hash in first_seen:
            raise fail(f"the same key as entry {first_seen[key_hash]}; list each key once")
        first_seen[key_hash] = n
        out[key_hash] = ApiKeyRecord(
            key_hash, tenant, read_only=MODES[mode] if colon else False, name=f"COGNIS_API_KEYS entry {n}"
        )
    return out


def describe_api_key_list(keys: Mapping[str, ApiKeyRecord]) -> list[str]:
    """What each listed key serves, one line per entry in list order, naming the entry by its position
    (never the key): ``COGNIS_API_KEYS entry 1 serves tenant 'default' (read-write)``. A server prints
    these when it starts, so a search answered from another tenant than the one imported into is plain."""
    return [
        f"{record.name} serves tenant {record.tenant_id!r} ({'read-only' if record.read_only else 'read-write'})"
        for record in keys.values()
    ]
