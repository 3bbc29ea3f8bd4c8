"""The paging cursors: what one says comes back exactly (microseconds, times before 1970, any id), and a
cursor of one listing is refused by the other, naming the field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from cognis_memory.errors import InvalidInputError
from cognis_memory.paging import MAX_CURSOR_CHARS, Listing, decode_cursor, encode_cursor
from cognis_memory.stores.values import PagePosition


@pytest.mark.parametrize(
    "position",
    [
        PagePosition(datetime(2025, 5, 1, 12, 0, 0, 123457, tzinfo=UTC), "0f" * 16),
        PagePosition(datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), "a"),
        PagePosition(datetime(1, 1, 1, tzinfo=UTC), "A" + "=" * 127),
        PagePosition(datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), "user@example.com|x:y+z"),
    ],
)
def test_a_cursor_gives_back_its_position_exactly(position: PagePosition) -> None:
    for listing in Listing:
        cursor = encode_cursor(listing, position)
        assert len(cursor) <= MAX_CURSOR_CHARS and cursor.replace("-", "").replace("_", "").isalnum()
        assert decode_cursor("cursor", listing, cursor) == position


def test_times_in_another_offset_are_the_same_instant() -> None:
    here = datetime(2025, 5, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    got = decode_cursor("cursor", Listing.MEMORIES, encode_cursor(Listing.MEMORIES, PagePosition(here, "x")))
    assert got == PagePosition(datetime(2025, 5, 1, 12, 0, tzinfo=UTC), "x")


def test_no_cursor_is_the_first_page_and_another_listings_cursor_is_refused() -> None:
    assert decode_cursor("cursor", Listing.MESSAGES, None) is None
    theirs = encode_cursor(Listing.MEMORIES, PagePosition(datetime(2025, 1, 1, tzinfo=UTC), "x"))
    with pytest.raises(InvalidInputError) as err:
        decode_cursor("cursor", Listing.MESSAGES, theirs)
    assert err.value.field == "cursor"
