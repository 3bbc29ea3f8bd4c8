"""The plain-JSON record form (serialization.py): times stay aware, a record without a creation time is refused."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cognis_memory.domain import Category, Memory
from cognis_memory.serialization import memory_from_dict, memory_to_dict


def _memory() -> Memory:
    return Memory(
        tenant_id="t",
        user_id="u",
        content="likes tea",
        category=Category.PERSONAL_DETAILS,
        event_time=datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC),
        created_at=datetime(2030, 1, 2, 3, 4, 6, 7, tzinfo=UTC),
    )


def test_round_trip_keeps_every_field_and_aware_times() -> None:
    m = _memory()
    back = memory_from_dict(memory_to_dict(m))
    assert memory_to_dict(back) == memory_to_dict(m)
    assert back.created_at == m.created_at and back.created_at.tzinfo is not None


def test_a_time_without_offset_is_read_as_utc() -> None:
    d = memory_to_dict(_memory()) | {"created_at": "2030-01-02T03:04:06", "event_time": "2030-01-02T03:04:05"}
    back = memory_from_dict(d)
    assert back.created_at == datetime(2030, 1, 2, 3, 4, 6, tzinfo=UTC)
    assert back.event_time == datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.mark.parametrize("missing", [None, ""])
def test_a_record_without_creation_time_is_refused_not_dated_now(missing: str | None) -> None:
    with pytest.raises(ValueError, match="created_at"):
        memory_from_dict(memory_to_dict(_memory()) | {"created_at": missing})


@pytest.mark.parametrize("field", ["scope", "category", "kind"])
def test_a_stored_value_no_member_has_is_refused(field: str) -> None:
    with pytest.raises(ValueError, match="not-a-member"):
        memory_from_dict(memory_to_dict(_memory()) | {field: "not-a-member"})
