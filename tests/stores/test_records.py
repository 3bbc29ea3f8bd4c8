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


def test_a_column_a_stored_row_lacks_reads_as_the_domain_default() -> None:
    """A row or document stored before a column existed (a message of an older release: no ``scope``, no
    ``raw_memory_id``) reads with the domain defaults, in every backend's values."""
    from cognis_memory.domain import Message, Scope
    from cognis_memory.stores.records import OPENSEARCH, PLAIN_JSON, message_from_row, message_to_row

    sent = Message("t", "u", "hello", datetime(2024, 1, 2, tzinfo=UTC), scope=Scope.CONTEXT, raw_memory_id="r1")
    for values in (OPENSEARCH, PLAIN_JSON):
        old = {k: v for k, v in message_to_row(sent, values).items() if k not in ("scope", "raw_memory_id")}
        read = message_from_row(old, values)
        assert (read.scope, read.raw_memory_id, read.content) == (Scope.USER, None, "hello")
        assert message_from_row(message_to_row(sent, values), values) == sent  # present values are read as stored
