"""Relative-date resolution table (ARCHITECTURE §4 stage 2), against a fixed reference."""

from datetime import UTC, datetime

import pytest

from cognis_memory.timeexpr import find_time_spans

# Monday 8 May 2023, 13:56 UTC
REF = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "start", "end", "granularity"),
    [
        ("I went there yesterday", "2023-05-07", "2023-05-08", "day"),
        ("today was long", "2023-05-08", "2023-05-09", "day"),
        ("see you tomorrow", "2023-05-09", "2023-05-10", "day"),
        ("the day before yesterday", "2023-05-06", "2023-05-07", "day"),
        ("last Friday was fun", "2023-05-05", "2023-05-06", "day"),
        ("last Monday", "2023-05-01", "2023-05-02", "day"),  # same weekday as the reference: a week back
        ("next Monday", "2023-05-15", "2023-05-16", "day"),
        ("this Friday", "2023-05-12", "2023-05-13", "day"),
        ("two weeks ago we met", "2023-04-24", "2023-05-01", "week"),
        ("3 days ago", "2023-05-05", "2023-05-06", "day"),
        ("a few months ago", "2023-02-01", "2023-03-01", "month"),
        ("a year ago", "2022-01-01", "2023-01-01", "year"),
        ("in 3 days", "2023-05-11", "2023-05-12", "day"),
        ("in two weeks", "2023-05-22", "2023-05-29", "week"),
        ("next month I move", "2023-06-01", "2023-07-01", "month"),
        ("last month", "2023-04-01", "2023-05-01", "month"),
        ("next week", "2023-05-15", "2023-05-22", "week"),
        ("last weekend", "2023-05-06", "2023-05-08", "week"),
        ("this weekend", "2023-05-13", "2023-05-15", "week"),
        ("last year", "2022-01-01", "2023-01-01", "year"),
        ("in May I ran", "2023-05-01", "2023-06-01", "month"),
        ("in December", "2022-12-01", "2023-01-01", "month"),  # nearest December is the past one
        ("in July", "2023-07-01", "2023-08-01", "month"),  # nearest July is the coming one
        ("next March", "2024-03-01", "2024-04-01", "month"),
        ("last December", "2022-12-01", "2023-01-01", "month"),
        ("on 7 May 2023", "2023-05-07", "2023-05-08", "day"),
        ("March 5th", "2023-03-05", "2023-03-06", "day"),
        ("June 3, 2021", "2021-06-03", "2021-06-04", "day"),
        ("in 2019", "2019-01-01", "2020-01-01", "year"),
        ("2023-04-01", "2023-04-01", "2023-04-02", "day"),
    ],
)
def test_resolution_table(text: str, start: str, end: str, granularity: str) -> None:
    spans = find_time_spans(text, REF)
    assert len(spans) == 1, spans
    s = spans[0]
    assert (s.start.date().isoformat(), s.end.date().isoformat(), s.granularity) == (start, end, granularity)


@pytest.mark.parametrize("text", ["may I ask you something", "I may go", "a second opinion", "March on!"])
def test_words_that_are_not_dates(text: str) -> None:
    assert find_time_spans(text, REF) == []


def test_sunday_reference_this_weekend_is_the_current_one() -> None:
    sunday = datetime(2023, 5, 14, 9, tzinfo=UTC)
    (span,) = find_time_spans("this weekend", sunday)
    assert span.start.date().isoformat() == "2023-05-13"


def test_several_expressions_in_text_order_and_original_case() -> None:
    spans = find_time_spans("Yesterday I booked flights for next month", REF)
    assert [s.text for s in spans] == ["Yesterday", "next month"]


def test_naive_reference_is_taken_as_utc() -> None:
    (span,) = find_time_spans("yesterday", datetime(2023, 5, 8, 1, 0))
    assert span.start == datetime(2023, 5, 7, tzinfo=UTC)


def test_invalid_calendar_dates_are_ignored() -> None:
    assert find_time_spans("2023-02-30", REF) == []
    assert find_time_spans("February 30, 2023", REF) == []


def test_dates_beyond_the_calendar_are_ignored_not_raised() -> None:
    far = datetime(9990, 1, 1, tzinfo=UTC)
    assert find_time_spans("in 999 years", far) == []
    assert find_time_spans("until 31 December 9999", REF) == []
    assert [s.text for s in find_time_spans("in 999 years, then yesterday", far)] == ["yesterday"]
