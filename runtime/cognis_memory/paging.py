"""The opaque paging cursors of the time-ordered listings: a user's memories and a session's messages.

A cursor says where the previous page ended (:class:`~cognis_memory.stores.values.PagePosition`: the
last record's time in exact microseconds and its id) and which listing it belongs to. It is URL-safe
base64 of a small JSON object; callers treat it as opaque and pass it back as ``cursor``. Anything else
passed as a cursor (garbled, truncated, crafted, from the other listing) is an
:class:`~cognis_memory.errors.InvalidInputError` naming the field, never a store query.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from .errors import InvalidInputError
from .stores.values import PagePosition
from .validation import check_id

#: longer than any cursor this module writes (a 128-character id and a 20-digit time)
MAX_CURSOR_CHARS = 400
_BASE64URL = re.compile(r"[A-Za-z0-9_-]+")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_INVALID = "is not a cursor of this listing (pass back the next_cursor of the previous page)"


class Listing(StrEnum):
    """The listing a cursor pages through (a cursor of one is refused by the other)."""

    MEMORIES = "memories"
    MESSAGES = "messages"


def encode_cursor(listing: Listing, position: PagePosition) -> str:
    t = position.time if position.time.tzinfo else position.time.replace(tzinfo=UTC)
    payload = {"l": listing.value, "t": (t - _EPOCH) // timedelta(microseconds=1), "id": position.id}
    raw = json.dumps(payload, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(field_name: str, listing: Listing, cursor: str | None) -> PagePosition | None:
    """The position a cursor of ``listing`` holds (None for no cursor: the first page)."""
    if cursor is None:
        return None
    if not isinstance(cursor, str) or not 0 < len(cursor) <= MAX_CURSOR_CHARS or not _BASE64URL.fullmatch(cursor):
        raise InvalidInputError(field_name, _INVALID)
    try:
        payload = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError):  # not base64, not UTF-8, not JSON
        raise InvalidInputError(field_name, _INVALID) from None
    if not isinstance(payload, dict) or set(payload) != {"l", "t", "id"} or payload["l"] != listing.value:
        raise InvalidInputError(field_name, _INVALID)
    micros, record_id = payload["t"], payload["id"]
    if isinstance(micros, bool) or not isinstance(micros, int) or not isinstance(record_id, str):
        raise InvalidInputError(field_name, _INVALID)
    try:
        time = _EPOCH + timedelta(microseconds=micros)
    except OverflowError:
        raise InvalidInputError(field_name, _INVALID) from None
    check_id(field_name, record_id)
    return PagePosition(time, record_id)
