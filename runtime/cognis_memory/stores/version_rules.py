"""What every backend's ``write_version`` checks before it writes, written once; the embedded, PostgreSQL
and OpenSearch memory roles call these and keep only how they read the previous version and write.

1. The new version belongs to the owner the call names (:func:`check_new_version_owner`), checked before
   anything is read.
2. The previous version, read inside the owner's records, exists (:func:`require_previous_version`), is
   its chain's current version and shares its chain id with the new one (:func:`check_previous_version`).
"""

from __future__ import annotations

from typing import TypeVar

from ..domain import Memory, Owner
from ..errors import ConflictError, NotFoundError

Stored = TypeVar("Stored")


def check_new_version_owner(owner: Owner, new: Memory) -> None:
    """Refuse a new version of another owner than the one named (ValueError)."""
    if (new.tenant_id, new.user_id) != (owner.tenant_id, owner.user_id):
        raise ValueError("new version must belong to the same owner")


def require_previous_version(previous_id: str, stored: Stored | None) -> Stored:
    """The previous version as the backend read it (a row, a document); NotFoundError when the owner has
    no version ``previous_id`` (None)."""
    if stored is None:
        raise NotFoundError(f"memory {previous_id} not found")
    return stored


def check_previous_version(previous_id: str, new: Memory, *, is_current: bool, chain_id: str) -> None:
    """Refuse to write ``new`` over the stored version ``previous_id`` (``is_current``, ``chain_id``):
    ConflictError when it is no longer current, ValueError when the new version is of another chain."""
    if not is_current:
        raise ConflictError(f"memory {previous_id} is not the current version")
    if new.chain_id != chain_id:
        raise ValueError("new version must keep the chain id of the version it replaces")
