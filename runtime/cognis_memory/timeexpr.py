"""Find time expressions in text and resolve them to absolute dates.

Used by ingest stage 2 (a message's relative expressions become an absolute ``event_time``,
resolved against the message's own timestamp) and by retrieval stage 1 (a query's
temporal intent becomes a reference time and a window).

Each match yields a :class:`TimeSpan`: an absolute ``[start, end)`` interval in UTC, its
granularity, and its centre (used as the point in time). Supported, case-insensitive:

===================================  ==========================================================
expression                           resolves to (reference = the message or query time)
===================================  ==========================================================
today / tonight / this morning       the reference day
yesterday / last night               the day before
tomorrow                             the day after
the day before yesterday             two days before; "the day after tomorrow" likewise
N days/weeks/months/years ago        the day / week / month / year N units before
(N as a digit or a word one..twelve, "a", "an", "a couple of", "a few" = 3)
in N days/weeks/months/years         N units after
last/next/this <weekday>             the previous / following / same-week weekday
last/this/next week|month|year       the previous / current / following calendar unit
last/this/next weekend               the Saturday-Sunday before / of / after the reference
in/on/during/since <Month> [YYYY]    that month; without a year, the occurrence nearest the
                                     reference (ties go to the past)
<Month> <day>[, YYYY] / <day> <Month> [YYYY]   that day (year as for months)
in/since/during YYYY                 that year
YYYY-MM-DD                           that day
===================================  ==========================================================
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

Granularity = Literal["day", "week", "month", "year"]

_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
_MONTHS.pop("may", None)
_MONTHS["may"] = 5
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "a few": 3,
    "couple of": 2, "few": 3, "several": 3,
}  # fmt: skip
_NUM = r"(?P<num>\d{1,3}|a couple of|couple of|a few|few|several|an|a|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_UNIT = r"(?P<unit>day|week|month|year)s?"
_MONTH_NAMES = "|".join(sorted((re.escape(m) for m in _MONTHS), key=len, reverse=True))
_WD = "|".join(_WEEKDAYS)


@dataclass(frozen=True, slots=True)
class TimeSpan:
    """An absolute interval ``[start, end)`` found in text."""

    text: str
    start: datetime
    end: datetime
    granularity: Granularity

    @property
    def center(self) -> datetime:
        return self.start + (self.end - self.start) / 2


def _day(d: datetime) -> datetime:
    return d.replace(hour=0, minute=0, second=0, microsecond=0)


def _add_months(d: datetime, months: int) -> datetime:
    y, m = divmod(d.month - 1 + months, 12)
    year, month = d.year + y, m + 1
    return d.replace(year=year, month=month, day=min(d.day, calendar.monthrange(year, month)[1]))


def _month_span(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    return start, _add_months(start, 1)


def _week_span(d: datetime) -> tuple[datetime, datetime]:
    start = _day(d) - timedelta(days=d.weekday())
    return start, start + timedelta(days=7)


def _nearest_year(ref: datetime, month: int, day: int | None = None) -> int:
    """The year that puts (month, day) nearest to ``ref``; ties go to the past."""
    best_year, best_dist = ref.year, None
    for year in (ref.year - 1, ref.year, ref.year + 1):
        try:
            point = datetime(year, month, day or 15, tzinfo=UTC)
        except ValueError:
            continue
        dist = abs((point - ref).total_seconds())
        if best_dist is None or dist < best_dist - 1 or (abs(dist - best_dist) <= 1 and point < ref):
            best_year, best_dist = year, dist
    return best_year


def _span(text: str, start: datetime, end: datetime, g: Granularity) -> TimeSpan:
    return TimeSpan(text=text, start=start, end=end, granularity=g)


def _num(value: str) -> int:
    return int(value) if value.isdigit() else _NUMBERS[value]


_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})\b"), "iso"),
    (re.compile(r"\bthe day before yesterday\b"), "rel-2"),
    (re.compile(r"\bthe day after tomorrow\b"), "rel+2"),
    (re.compile(r"\b(?:yesterday|last night)\b"), "rel-1"),
    (re.compile(r"\b(?:today|tonight|this morning|this afternoon|this evening)\b"), "rel+0"),
    (re.compile(r"\btomorrow\b"), "rel+1"),
    (re.compile(rf"\b{_NUM} {_UNIT} ago\b"), "ago"),
    (re.compile(rf"\bin {_NUM} {_UNIT}\b"), "in"),
    (re.compile(rf"\b(?P<rel>last|next|this|past|coming) (?P<wd>{_WD})\b"), "weekday"),
    (re.compile(r"\b(?P<rel>last|next|this|past|coming) (?P<unit>weekend|week|month|year)\b"), "unit"),
    (
        re.compile(rf"\b(?P<mon>{_MONTH_NAMES})\.? (?P<d>\d{{1,2}})(?:st|nd|rd|th)?(?:,? (?P<y>\d{{4}}))?\b"),
        "month-day",
    ),
    (
        re.compile(rf"\b(?P<d>\d{{1,2}})(?:st|nd|rd|th)? (?:of )?(?P<mon>{_MONTH_NAMES})\.?(?:,? (?P<y>\d{{4}}))?\b"),
        "day-month",
    ),
    (
        re.compile(
            rf"\b(?:in|on|during|since|by|last|this|next|early|late|mid) (?P<mon>{_MONTH_NAMES})(?: (?P<y>\d{{4}}))?\b"
        ),
        "month",
    ),
    (re.compile(rf"\b(?P<mon>{_MONTH_NAMES}) (?P<y>\d{{4}})\b"), "month"),
    (re.compile(r"\b(?:in|since|during|of|from) (?P<y>(?:19|20)\d{2})\b"), "year"),
]


def _resolve(kind: str, m: re.Match[str], ref: datetime) -> TimeSpan | None:
    text = m.group(0)
    today = _day(ref)
    if kind == "iso":
        try:
            start = datetime(int(m["y"]), int(m["m"]), int(m["d"]), tzinfo=UTC)
        except ValueError:
            return None
        return _span(text, start, start + timedelta(days=1), "day")
    if kind.startswith("rel"):
        start = today + timedelta(days=int(kind[3:]))
        return _span(text, start, start + timedelta(days=1), "day")
    if kind in ("ago", "in"):
        n = _num(m["num"]) * (-1 if kind == "ago" else 1)
        unit = m["unit"]
        if unit == "day":
            start = today + timedelta(days=n)
            return _span(text, start, start + timedelta(days=1), "day")
        if unit == "week":
            start, end = _week_span(today + timedelta(weeks=n))
            return _span(text, start, end, "week")
        if unit == "month":
            start, end = _month_span(*(lambda d: (d.year, d.month))(_add_months(today, n)))
            return _span(text, start, end, "month")
        start = datetime(ref.year + n, 1, 1, tzinfo=UTC)
        return _span(text, start, start.replace(year=start.year + 1), "year")
    if kind == "weekday":
        target = _WEEKDAYS.index(m["wd"])
        rel = m["rel"]
        delta = target - today.weekday()
        if rel in ("last", "past"):
            delta = delta - 7 if delta >= 0 else delta
        elif rel in ("next", "coming"):
            delta = delta + 7 if delta <= 0 else delta
        start = today + timedelta(days=delta)
        return _span(text, start, start + timedelta(days=1), "day")
    if kind == "unit":
        rel, unit = m["rel"], m["unit"]
        step = {"last": -1, "past": -1, "this": 0, "next": 1, "coming": 1}[rel]
        if unit == "weekend":
            # Saturday of the reference's own week (for a Sunday reference: the day before).
            saturday = today + timedelta(days=5 - today.weekday()) + timedelta(weeks=step)
            return _span(text, saturday, saturday + timedelta(days=2), "week")
        if unit == "week":
            start, end = _week_span(today + timedelta(weeks=step))
            return _span(text, start, end, "week")
        if unit == "month":
            d = _add_months(today, step)
            start, end = _month_span(d.year, d.month)
            return _span(text, start, end, "month")
        start = datetime(ref.year + step, 1, 1, tzinfo=UTC)
        return _span(text, start, start.replace(year=start.year + 1), "year")
    if kind in ("month-day", "day-month"):
        month = _MONTHS[m["mon"].lower()]
        day = int(m["d"])
        year = int(m["y"]) if m["y"] else _nearest_year(ref, month, day)
        try:
            start = datetime(year, month, day, tzinfo=UTC)
        except ValueError:
            return None
        return _span(text, start, start + timedelta(days=1), "day")
    if kind == "month":
        month = _MONTHS[m["mon"].lower()]
        year = int(m["y"]) if m["y"] else _nearest_year(ref, month)
        lead = text.split(" ", 1)[0].lower()
        if not m["y"] and lead in ("last", "next", "this"):
            year = ref.year + (-1 if lead == "last" and month >= ref.month else 0)
            if lead == "next" and month <= ref.month:
                year = ref.year + 1
        start, end = _month_span(year, month)
        return _span(text, start, end, "month")
    if kind == "year":
        start = datetime(int(m["y"]), 1, 1, tzinfo=UTC)
        return _span(text, start, start.replace(year=start.year + 1), "year")
    return None  # pragma: no cover


def find_time_spans(text: str, reference: datetime) -> list[TimeSpan]:
    """All time expressions in ``text``, resolved against ``reference``, in text order.

    Overlapping matches keep the earliest-listed rule (more specific rules come first).
    """
    ref = reference.astimezone(UTC) if reference.tzinfo else reference.replace(tzinfo=UTC)
    lowered = text.lower()
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, TimeSpan]] = []
    for pattern, kind in _RULES:
        for m in pattern.finditer(lowered):
            a, b = m.span()
            if any(a < e and s < b for s, e in taken):
                continue
            try:
                span = _resolve(kind, m, ref)
            except (ValueError, OverflowError):  # outside the calendar datetime can represent
                span = None
            if span is not None:
                taken.append((a, b))
                found.append((a, TimeSpan(text[a:b], span.start, span.end, span.granularity)))
    return [s for _, s in sorted(found, key=lambda x: x[0])]
