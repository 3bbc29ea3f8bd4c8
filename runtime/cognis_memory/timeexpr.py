"""Find time expressions in text and resolve them to absolute dates, reading the tense around them.

Used by ingest stage 2 (a message's relative expressions become an absolute ``event_time``,
resolved against the message's own timestamp) and by retrieval stage 1 (a query's
temporal intent becomes a reference time and a window).

Each match yields a :class:`TimeSpan`: an absolute ``[start, end)`` interval in UTC, its
granularity, and its centre (used as the point in time). Supported, case-insensitive:

=========================================  =====================================================
expression                                 resolves to (reference = the message or query time)
=========================================  =====================================================
today / tonight / this morning             the reference day
yesterday / last night                     the day before
tomorrow                                   the day after
the day before yesterday                   two days before; "the day after tomorrow" likewise
N days/weeks/months/years ago              the day / week / month / year N units before
(N as a digit or a word one..twenty, thirty, "a", "an", "a couple of", "a few" = 3; a
fortnight = 2 weeks)
in N days/weeks/months/years               N units after; nothing when the clause is in the past
                                           ("I learnt it in two weeks" is a duration)
last/next/this <weekday>                   the previous / following / same-week weekday
[on] <weekday>                             past tense: the latest before the reference day;
                                           otherwise the first after it ("a/every Monday",
                                           "Mondays" are not dates)
last/this/next week|month|year             the previous / current / following calendar unit
last/this/next weekend                     the Saturday-Sunday before / of / after the reference
in/on/of/from/since/by... <Month> [YYYY]   that month; without a year, by tense (below)
<Month> <day>[, YYYY] / <day> <Month>      that day; without a year, by tense (below)
last/this/next <Month>                     the previous / this year's / following one
in/since/by/around... YYYY, the year YYYY  that year
last/this/next <season>                    the last one ended / the one of the reference
                                           (else the nearest) / the first to begin after it
in/over/during [the] <season>              by tense (below); seasons are meteorological and
                                           northern: spring = March-May ... winter = December-
                                           February, "winter 2026" from December 2026
<season> [of] YYYY                         that season
from/between X to/until/through/and Y      one span from X's start to Y's end, for X and Y
                                           months, month-days, "12 to 15 July", years or
                                           weekdays; the tense places the range as a whole
YYYY-MM-DD                                 that day
=========================================  =====================================================

**Tense.** A month, month-day, season, range or bare weekday without a year takes the tense
of the verb nearest to it in its own clause (clauses end at punctuation and at "and", "but",
"so", "because", ...; with no verb there, the nearest in the sentence):

* past ("moved", "went", "was", "did", "have been", "used to"; "since May", "back in May")
  -> the most recent occurrence that has begun (the current month counts);
* future ("will", "'ll", "going to", "gonna", "plan/hope/want to", "have to", "might", "would
  like", "let's", "am/is/are + -ing" as in "I'm getting married in June", and the scheduled
  present "is", "starts", "leaves", "comes" ...; a month after "for": "flights for October")
  -> the next occurrence not yet over;
* no tense cue ("Lisbon in May.") -> the occurrence nearest the reference (ties go to the
  past); a bare weekday with no cue is the coming one.
"""

from __future__ import annotations

import bisect
import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from .tense import ClauseTenses, Tense

Granularity = Literal["day", "week", "month", "season", "year"]

_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
_SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}
SEASON_NAMES = {3: "spring", 6: "summer", 9: "autumn", 12: "winter"}
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
    "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20,
    "thirty": 30, "a couple of": 2, "a few": 3, "couple of": 2, "few": 3, "several": 3,
}  # fmt: skip
_NUM = rf"(?P<num>\d{{1,3}}|{'|'.join(sorted(_NUMBERS, key=len, reverse=True))})"
_UNIT = r"(?P<unit>day|week|fortnight|month|year)s?"
_FULL_MONTHS = "|".join(name.lower() for name in calendar.month_name if name)
_ABBREVIATIONS = "|".join(sorted((m for m in _MONTHS if m not in _FULL_MONTHS.split("|")), key=len, reverse=True))
# A month; the dot of an abbreviation ("Jan.") belongs to it, a full stop after a name does not.
_MON = rf"(?:{_FULL_MONTHS}|(?:{_ABBREVIATIONS})\.?)"
_WD = "|".join(_WEEKDAYS)
_SEASON = "spring|summer|autumn|fall|winter"
_ORD = r"(?:st|nd|rd|th)?"
_YEAR = r"(?:1[89]|20|21)\d{2}"
_Y4 = r"\d{4}"  # a year written after a month: any four digits, so "31 December 9999" is not read without it
_TO = r"(?:to|till|until|through|thru|and|-)"


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


# --- calendar helpers ------------------------------------------------------------------------


def _day(d: datetime) -> datetime:
    return d.replace(hour=0, minute=0, second=0, microsecond=0)


def _add_months(d: datetime, months: int) -> datetime:
    y, m = divmod(d.month - 1 + months, 12)
    year, month = d.year + y, m + 1
    return d.replace(year=year, month=month, day=min(d.day, calendar.monthrange(year, month)[1]))


def _month_span(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    return start, _add_months(start, 1)


def _season_span(year: int, first_month: int) -> tuple[datetime, datetime]:
    start = datetime(year, first_month, 1, tzinfo=UTC)
    return start, _add_months(start, 3)


def _week_span(d: datetime) -> tuple[datetime, datetime]:
    start = _day(d) - timedelta(days=d.weekday())
    return start, start + timedelta(days=7)


def _pick(spans: list[tuple[datetime, datetime]], ref: datetime, tense: Tense | None) -> tuple[datetime, datetime]:
    """Of yearly occurrences in time order: the latest begun (past), the first not over (future),
    else the one containing ``ref`` or nearest it (ties to the past)."""
    if tense == "past":
        return [s for s in spans if s[0] <= ref][-1]
    if tense == "future":
        return next(s for s in spans if s[1] > ref)
    return min(
        spans,
        key=lambda s: (0 if s[0] <= ref < s[1] else abs((s[0] + (s[1] - s[0]) / 2 - ref).total_seconds()), s[0] > ref),
    )


def _yearly(ref: datetime, make: Callable[[int], tuple[datetime, datetime]]) -> list[tuple[datetime, datetime]]:
    """``make(year)`` for the years around ``ref``, skipping dates a year lacks."""
    out = []
    for year in range(ref.year - 2, ref.year + 3):
        try:
            out.append(make(year))
        except ValueError:  # 29 February in a common year
            continue
    return out


def _span(text: str, start: datetime, end: datetime, g: Granularity) -> TimeSpan:
    return TimeSpan(text=text, start=start, end=end, granularity=g)


def _num(value: str) -> int:
    return int(value) if value.isdigit() else _NUMBERS[value]


def _date(year: int, month: int, day: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, day, tzinfo=UTC)
    return start, start + timedelta(days=1)


# --- the rules, most specific first -----------------------------------------------------------

# Words before a weekday that make it a habit ("every Monday"), an indefinite one ("a Monday") or
# a feast ("Palm Sunday", "Black Friday"), not a date.
_NOT_A_DAY = "".join(
    rf"(?<!\b{w} )" for w in ("every", "each", "a", "good", "black", "cyber", "palm", "easter", "ash", "holy", "bowl")
)

_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})\b"), "iso"),
    (
        re.compile(
            rf"\b(?:from|between) (?:the )?(?P<d1>\d{{1,2}}){_ORD} {_TO} (?:the )?(?P<d2>\d{{1,2}}){_ORD} (?:of )?"
            rf"(?P<mon>{_MON})(?:,? (?P<y>{_YEAR}))?\b"
        ),
        "range-days",
    ),
    (
        re.compile(
            rf"\b(?:from|between) (?:(?P<m1>{_MON}) (?P<d1>\d{{1,2}}){_ORD}|(?:the )?(?P<d1b>\d{{1,2}}){_ORD} (?:of )?(?P<m1b>{_MON})) "
            rf"{_TO} (?:(?P<m2>{_MON}) (?P<d2>\d{{1,2}}){_ORD}|(?:the )?(?P<d2b>\d{{1,2}}){_ORD} (?:of )?(?P<m2b>{_MON}))"
            rf"(?:,? (?P<y>{_YEAR}))?\b"
        ),
        "range-dates",
    ),
    (
        re.compile(
            rf"\b(?:from|between) (?P<m1>{_MON})(?: (?P<y1>{_YEAR}))? {_TO} (?P<m2>{_MON})(?: (?P<y2>{_YEAR}))?(?!\w)"
        ),
        "range-months",
    ),
    (re.compile(rf"\b(?:from|between) (?P<y1>{_YEAR}) {_TO} (?P<y2>{_YEAR})\b"), "range-years"),
    (re.compile(rf"\b(?:from|between) (?P<w1>{_WD}) {_TO} (?P<w2>{_WD})\b"), "range-weekdays"),
    (re.compile(r"\bthe day before yesterday\b"), "rel-2"),
    (re.compile(r"\bthe day after tomorrow\b"), "rel+2"),
    (re.compile(r"\b(?:yesterday|last night)\b"), "rel-1"),
    (re.compile(r"\b(?:today|tonight|this morning|this afternoon|this evening)\b"), "rel+0"),
    (re.compile(r"\btomorrow\b"), "rel+1"),
    (re.compile(rf"\b{_NUM} {_UNIT} ago\b"), "ago"),
    (re.compile(rf"\bin {_NUM} {_UNIT}\b"), "in"),
    (re.compile(rf"\b(?P<rel>last|next|this|past|coming) (?P<wd>{_WD})\b"), "weekday"),
    (re.compile(r"\b(?P<rel>last|next|this|past|coming) (?P<unit>weekend|week|month|year)\b"), "unit"),
    (re.compile(rf"\b(?:this )?(?P<rel>last|next|this|past|coming) (?P<season>{_SEASON})\b"), "season-rel"),
    (re.compile(rf"\b(?:the )?(?P<season>{_SEASON}) (?:of )?(?P<y>{_YEAR})\b"), "season-year"),
    (
        re.compile(
            rf"\b(?:(?:in|over|during|through|throughout) (?:the )?|by the )(?P<season>{_SEASON})\b(?! (?:house|rolls?|term|school|camp|sale)\b)"
        ),
        "season",
    ),
    (
        re.compile(rf"\b(?P<mon>{_MON}) (?P<d>\d{{1,2}}){_ORD}(?:,? (?P<y>{_Y4}))?(?![\d:])"),
        "month-day",
    ),
    (
        re.compile(rf"\b(?P<d>\d{{1,2}}){_ORD} (?:of )?(?P<mon>{_MON})(?:,? (?P<y>{_Y4}))?(?!\w)"),
        "month-day",
    ),
    (
        re.compile(rf"\b(?P<rel>last|this|next) (?P<mon>{_MON})(?: (?P<y>{_YEAR}))?(?!\w)"),
        "month-rel",
    ),
    (
        re.compile(
            rf"\b(?P<prep>in|on|during|since|by|early|late|mid|of|from|for|until|till|before|after|around|through|throughout)"
            rf"[ -](?P<mon>{_MON})(?: (?P<y>{_YEAR}))?(?!\w)"
        ),
        "month",
    ),
    (re.compile(rf"\b(?P<mon>{_MON}) (?P<y>{_Y4})\b"), "month"),
    (
        re.compile(rf"\b(?:in|since|during|of|from|by|until|till|before|after|around|circa|the year) (?P<y>{_YEAR})\b"),
        "year",
    ),
    (
        re.compile(rf"{_NOT_A_DAY}\b(?P<wd>{_WD})(?!s\b)\b"),
        "weekday-bare",
    ),
]

# Words after a weekday that make it part of a name or a habit, not a date ("Sunday roast").
_WEEKDAY_NOUNS = {"roast", "school", "best", "league", "paper", "papers", "blues"}


def _resolve_range(kind: str, m: re.Match[str], ref: datetime, tense: Tense | None) -> TimeSpan | None:
    text = m.group(0)
    today = _day(ref)
    if kind == "range-years":
        y1, y2 = int(m["y1"]), int(m["y2"])
        if y2 < y1:
            return None
        return _span(text, datetime(y1, 1, 1, tzinfo=UTC), datetime(y2 + 1, 1, 1, tzinfo=UTC), "year")
    if kind == "range-weekdays":
        w1, w2 = _WEEKDAYS.index(m["w1"]), _WEEKDAYS.index(m["w2"])
        start = _bare_weekday(today, w1, tense)
        end = start + timedelta(days=(w2 - w1) % 7 + 1)
        return _span(text, start, end, "day")
    if kind == "range-months":
        m1, m2 = _MONTHS[m["m1"].rstrip(".")], _MONTHS[m["m2"].rstrip(".")]
        wrap = 1 if m2 < m1 else 0
        if m["y1"] or m["y2"]:
            y2 = int(m["y2"] or m["y1"]) if m["y2"] else int(m["y1"]) + wrap
            y1 = int(m["y1"]) if m["y1"] else y2 - wrap
        else:
            # The whole range: past -> the latest one that has ended (or is ending this month),
            # future -> the first one that begins this month or later.
            spans = _yearly(ref, lambda y: (_month_span(y, m1)[0], _month_span(y + wrap, m2)[1]))
            if tense == "past":
                start = [s for s, e in spans if _add_months(e, -1) <= ref][-1]
            elif tense == "future":
                start = next(s for s, e in spans if _add_months(s, 1) > ref)
            else:
                start = _pick(spans, ref, None)[0]
            y1 = start.year
            y2 = y1 + wrap
        if (y2, m2) < (y1, m1):
            return None
        return _span(text, _month_span(y1, m1)[0], _month_span(y2, m2)[1], "month")
    # days: "from 12 to 15 July", "from March 3 to March 20", "between 1 May and 3 June"
    if kind == "range-days":
        m1 = m2 = _MONTHS[m["mon"].rstrip(".")]
        d1, d2 = int(m["d1"]), int(m["d2"])
    else:
        m1 = _MONTHS[(m["m1"] or m["m1b"]).rstrip(".")]
        m2 = _MONTHS[(m["m2"] or m["m2b"]).rstrip(".")]
        d1, d2 = int(m["d1"] or m["d1b"]), int(m["d2"] or m["d2b"])
    if m["y"]:
        first = _date(int(m["y"]), m1, d1)
    else:
        first = _pick(_yearly(today, lambda y: _date(y, m1, d1)), today, tense)
    last_year = first[0].year + (1 if (m2, d2) < (m1, d1) else 0)
    last = _date(last_year, m2, d2)
    return _span(text, first[0], last[1], "day")


def _bare_weekday(today: datetime, target: int, tense: Tense | None) -> datetime:
    if tense == "past":
        return today - timedelta(days=(today.weekday() - target) % 7 or 7)
    return today + timedelta(days=(target - today.weekday()) % 7 or 7)


def _resolve(kind: str, m: re.Match[str], ref: datetime, tense: Tense | None) -> TimeSpan | None:
    text = m.group(0)
    today = _day(ref)
    if kind.startswith("range"):
        return _resolve_range(kind, m, ref, tense)
    if kind == "iso":
        return _span(text, *_date(int(m["y"]), int(m["m"]), int(m["d"])), "day")
    if kind.startswith("rel"):
        start = today + timedelta(days=int(kind[3:]))
        return _span(text, start, start + timedelta(days=1), "day")
    if kind in ("ago", "in"):
        if kind == "in" and tense == "past":  # "I learnt to knit in two weeks": a duration
            return None
        n = _num(m["num"]) * (-1 if kind == "ago" else 1)
        unit = m["unit"]
        if unit == "fortnight":
            unit, n = "week", 2 * n
        if unit == "day":
            start = today + timedelta(days=n)
            return _span(text, start, start + timedelta(days=1), "day")
        if unit == "week":
            start, end = _week_span(today + timedelta(weeks=n))
            return _span(text, start, end, "week")
        if unit == "month":
            d = _add_months(today, n)
            return _span(text, *_month_span(d.year, d.month), "month")
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
    if kind == "weekday-bare":
        start = _bare_weekday(today, _WEEKDAYS.index(m["wd"]), tense)
        return _span(text, start, start + timedelta(days=1), "day")
    if kind == "unit":
        rel, unit = m["rel"], m["unit"]
        step = {"last": -1, "past": -1, "this": 0, "next": 1, "coming": 1}[rel]
        if unit == "weekend":
            # Saturday of the reference's own week (for a Sunday reference: the day before).
            saturday = today + timedelta(days=5 - today.weekday()) + timedelta(weeks=step)
            return _span(text, saturday, saturday + timedelta(days=2), "week")
        if unit == "week":
            return _span(text, *_week_span(today + timedelta(weeks=step)), "week")
        if unit == "month":
            d = _add_months(today, step)
            return _span(text, *_month_span(d.year, d.month), "month")
        start = datetime(ref.year + step, 1, 1, tzinfo=UTC)
        return _span(text, start, start.replace(year=start.year + 1), "year")
    if kind.startswith("season"):
        first = _SEASONS[m["season"]]
        if kind == "season-year":
            return _span(text, *_season_span(int(m["y"]), first), "season")
        spans = _yearly(ref, lambda y: _season_span(y, first))
        rel = m["rel"] if kind == "season-rel" else None
        if rel in ("last", "past"):
            chosen = [s for s in spans if s[1] <= ref][-1]
        elif rel in ("next", "coming"):
            chosen = next(s for s in spans if s[0] > ref)
        else:
            chosen = _pick(spans, ref, None if rel == "this" else tense)
        return _span(text, *chosen, "season")
    if kind == "month-day":
        month, day = _MONTHS[m["mon"].rstrip(".")], int(m["d"])
        if m["y"]:
            return _span(text, *_date(int(m["y"]), month, day), "day")
        if not 1 <= day <= calendar.monthrange(2024, month)[1]:
            return None
        return _span(text, *_pick(_yearly(today, lambda y: _date(y, month, day)), today, tense), "day")
    if kind == "month-rel":
        month = _MONTHS[m["mon"].rstrip(".")]
        year = int(m["y"]) if m["y"] else ref.year
        if not m["y"] and m["rel"] == "last" and month >= ref.month:
            year -= 1
        if not m["y"] and m["rel"] == "next" and month <= ref.month:
            year += 1
        return _span(text, *_month_span(year, month), "month")
    if kind == "month":
        month = _MONTHS[m["mon"].rstrip(".")]
        if m["y"]:
            return _span(text, *_month_span(int(m["y"]), month), "month")
        prep = m.groupdict().get("prep")
        if prep == "since":
            tense = "past"
        elif prep == "for":  # "flights booked for October": arranged for the coming one
            tense = "future"
        return _span(text, *_pick(_yearly(ref, lambda y: _month_span(y, month)), ref, tense), "month")
    if kind == "year":
        start = datetime(int(m["y"]), 1, 1, tzinfo=UTC)
        return _span(text, start, start.replace(year=start.year + 1), "year")
    return None  # pragma: no cover


_TENSED = ("range-months", "range-days", "range-dates", "range-weekdays", "in", "weekday-bare", "season",
           "season-rel", "month-day", "month")  # fmt: skip


def _is_name(text: str, start: int, end: int) -> bool:
    """A capitalised weekday or season followed by a capitalised word is a name ("Friday Night
    Lights", "Fall River"), as is a weekday before a word of _WEEKDAY_NOUNS ("Sunday roast")."""
    after = text[end:].split(None, 1)
    word = after[0] if after else ""
    if word.lower().strip(".,!?") in _WEEKDAY_NOUNS:
        return True
    return text[start].isupper() and word[:1].isupper() and word != "I" and start > 0


# "Back in May" places May in the past, unless "back" belongs to a verb ("come back in May").
_BACK_IN = re.compile(
    r"(?<!come )(?<!comes )(?<!coming )(?<!go )(?<!goes )(?<!going )(?<!get )(?<!be )(?<!fly )(?<!move )"
    r"(?<!moving )(?<!flying )(?<!getting )(?<!call )\bback in\b"
)


def find_time_spans(text: str, reference: datetime) -> list[TimeSpan]:
    """All time expressions in ``text``, resolved against ``reference``, in text order.

    Overlapping matches keep the earliest-listed rule (more specific rules come first).
    """
    ref = reference.astimezone(UTC) if reference.tzinfo else reference.replace(tzinfo=UTC)
    # Lower-cased character by character, so offsets in it are offsets in ``text``.
    lowered = text.lower()
    if len(lowered) != len(text):  # a character whose lower case is longer ("İ") stays as it is
        lowered = "".join(c if len(low := c.lower()) != 1 else low for c in text)
    lowered = lowered.replace("\u2019", "'")
    tenses: ClauseTenses | None = None
    taken: list[tuple[int, int]] = []  # matched intervals, sorted and disjoint
    found: list[tuple[int, TimeSpan]] = []
    for pattern, kind in _RULES:
        for m in pattern.finditer(lowered):
            a, b = m.span()
            i = bisect.bisect_left(taken, (b, b))
            if i > 0 and taken[i - 1][1] > a:  # overlaps an earlier rule's match
                continue
            if kind in ("weekday-bare", "season") and _is_name(text, *m.span(m.re.groupindex.get("season", 0))):
                continue
            if kind.startswith("range") and m.group(0).startswith("from") and " and " in m.group(0):
                continue  # "receipts from January and February" lists two months, it is no range
            tense = None
            if kind in _TENSED:
                tenses = tenses or ClauseTenses(lowered)
                tense = tenses.around(a, b)
                if kind in ("weekday-bare", "season") and tenses.habitual(a, b):
                    continue  # "I usually swim on Friday", "it's always cold in the winter": no one date
            if kind in ("month", "season") and a >= 5 and _BACK_IN.match(lowered, a - 5):
                tense = "past"
            try:
                span = _resolve(kind, m, ref, tense)
            except (ValueError, OverflowError, StopIteration, IndexError):  # outside the calendar
                span = None
            if span is not None:
                bisect.insort(taken, (a, b))
                found.append((a, TimeSpan(text[a:b], span.start, span.end, span.granularity)))
    return [s for _, s in sorted(found, key=lambda x: x[0])]
