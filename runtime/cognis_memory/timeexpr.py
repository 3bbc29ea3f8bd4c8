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

Granularity = Literal["day", "week", "month", "season", "year"]
Tense = Literal["past", "future"]

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


# --- tense of the clause around an expression ---------------------------------------------

_FUTURE_WORDS = {
    "will", "'ll", "shall", "gonna", "wanna", "gotta", "plan", "plans", "planning", "hope", "hopes",
    "hoping", "intend", "intends", "want", "wants", "might", "should", "must", "would", "wouldn",
    "upcoming", "soon", "supposed", "due", "scheduled", "expect", "expecting", "tomorrow",
}  # fmt: skip
_PAST_WORDS = {
    "was", "were", "wasn", "weren", "did", "didn", "had", "hadn", "ago", "went", "came", "saw",
    "got", "made", "took", "gave", "met", "left", "bought", "began", "broke", "brought", "built",
    "caught", "chose", "drove", "ate", "fell", "felt", "found", "flew", "forgot", "heard", "held",
    "kept", "knew", "lost", "paid", "ran", "said", "sold", "sent", "spent", "stood", "swam",
    "taught", "told", "thought", "threw", "understood", "woke", "won", "wore", "wrote", "sat",
    "slept", "spoke", "became", "grew", "hung", "quit", "learnt", "burnt", "dreamt", "split",
    "hurt", "shut", "rode", "drank", "sang", "led", "fed", "fought", "dug", "hid", "lit", "slid",
    "stole", "struck", "swore", "tore", "froze", "born", "yesterday",
}  # fmt: skip
# Future cues made of two words: "let's", "can't wait", "won't".
_FUTURE_AFTER = {("'s", "let"), ("wait", "n't"), ("wait", "can"), ("wait", "cannot")}
_FUTURE_BEFORE = {("won", "n't"), ("won", "'t")}
# Present-tense verbs of timetables ("the course starts in March") read as future.
_SCHEDULED = {
    "start", "starts", "begin", "begins", "end", "ends", "open", "opens", "close", "closes", "leave",
    "leaves", "arrive", "arrives", "finish", "finishes", "land", "lands", "depart", "departs",
    "return", "returns", "expire", "expires", "run", "runs", "come", "comes", "go", "goes", "turn",
    "turns", "fly", "flies", "get", "gets", "move", "moves", "is", "are", "am", "'m", "'re", "isn",
    "aren", "'s",
}  # fmt: skip
# Who a bare present verb follows when it is a verb ("they leave", "the results come"), not a noun
# ("sick leave", "a good run").
_SUBJECTS = {"i", "we", "you", "they"}
_BE_PRESENT = {"am", "'m", "is", "'s", "are", "'re"}
# "'s" is "is" after these ("it's my birthday"); after a noun it is a possessive ("Friday night's game").
_IS_AFTER = {"it", "he", "she", "that", "there", "what", "who", "where", "here", "this"}
_BE_GET = _BE_PRESENT | {"be", "being", "been", "get", "gets", "getting", "got", "was", "were"}
_HAVE = {"have", "has", "'ve"}
_NOT_VERBS_ING = {
    "thing", "something", "nothing", "anything", "everything", "morning", "evening", "spring",
    "during", "king", "ring", "wedding", "building", "meeting", "ceiling", "amazing", "interesting",
    "exciting", "boring", "annoying", "surprising", "relaxing", "stunning", "charming", "tiring",
    "exhausting", "fascinating", "frustrating", "overwhelming", "terrifying", "shocking", "missing",
    "willing", "outstanding", "upcoming", "ongoing", "feeling", "birthday", "thanksgiving",
}  # fmt: skip
_NOT_VERBS_ED = {
    "need", "feed", "seed", "speed", "bed", "red", "shed", "bleed", "breed", "indeed", "exceed",
    "proceed", "succeed", "hundred", "sacred", "naked", "wicked", "kindred", "wed", "weed", "ted",
    "fred", "ned", "bored", "tired", "excited", "scared", "married", "engaged", "interested",
    "supposed", "used",
}  # fmt: skip
# Words that neither carry nor block a tense between an auxiliary and its verb.
_ADVERBS = {"not", "n't", "'t", "still", "really", "finally", "also", "just", "already", "so", "all",
            "never", "ever", "probably", "definitely", "actually", "even", "always", "only"}  # fmt: skip
_MODALS = {"will", "'ll", "would", "'d", "could", "can", "should", "must", "might", "may", "to", "did",
           "didn", "do", "does", "don", "doesn", "shall", "wo", "won", "let", "gonna", "wanna"}  # fmt: skip
_CLAUSE_BREAK = re.compile(r"[,:;()\"]|\s(?:and|but|so|because|although|though|while|whereas|or)\s")
_SENTENCE_BREAK = re.compile(r"[.!?\n]+(?:\s|$)")
_HABITUAL = re.compile(r"\b(?:usually|typically|always|often|generally|normally|every|each|tradition)\b")
_TOKEN = re.compile(r"[a-z]+|'[a-z]+")


def _tokens(text: str) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for m in _TOKEN.finditer(text):
        word = m.group(0)
        if word == "'t" and out and out[-1][1].endswith("n"):  # "didn't" -> "didn" + "'t"
            word = "n't"
        out.append((m.start(), word))
    return out


def _prev(tokens: list[tuple[int, str]], i: int, skip: int = 0) -> str:
    """The nearest word before ``tokens[i]`` that is not a filler adverb (``skip`` more back)."""
    j = i - 1
    while j >= 0:
        if tokens[j][1] not in _ADVERBS:
            if skip == 0:
                return tokens[j][1]
            skip -= 1
        j -= 1
    return ""


# Every word that can be a cue by itself or as the head of a pair (the rest end in -ing or -ed).
_CUE_WORDS = (
    _FUTURE_WORDS
    | _PAST_WORDS
    | _SCHEDULED
    | _HAVE
    | {"going", "used", "'d", "'s", "wait", "won", "been", "done"}
    | {"gone", "seen"}
)


def _cues(tokens: list[tuple[int, str]]) -> list[tuple[int, Tense]]:
    """(position, tense) of each word that places the clause in the past or the future."""
    out: list[tuple[int, Tense]] = []
    for i, (pos, w) in enumerate(tokens):
        if w not in _CUE_WORDS and not w.endswith(("ing", "ed")):  # most words: no cue
            continue
        prev = _prev(tokens, i)
        nxt = tokens[i + 1][1] if i + 1 < len(tokens) else ""
        if w == "going" and nxt == "to":
            out.append((pos, "past" if prev in ("was", "were", "wasn", "weren") else "future"))
        elif w in ("used", "had") and nxt == "to":
            out.append((pos, "past"))
        elif w in _HAVE and nxt == "to":
            out.append((pos, "future"))
        elif w == "'d":
            out.append((pos, "future" if nxt in ("like", "love", "prefer", "rather", "better") else "past"))
        elif w in _FUTURE_WORDS or (w, prev) in _FUTURE_AFTER or (w, nxt) in _FUTURE_BEFORE:
            out.append((pos, "future"))
        elif w == "got" and (prev in _HAVE or _prev(tokens, i, 1) in _HAVE):
            continue  # "have you got", "I've got": a possession now, no past
        elif w in _PAST_WORDS and prev not in _MODALS and prev not in _BE_GET:  # not "will be held"
            out.append((pos, "past"))
        elif len(w) > 4 and w.endswith("ing") and w not in _NOT_VERBS_ING:
            inverted = prev in _SUBJECTS and _prev(tokens, i, 1) in _BE_PRESENT  # "are you coming"
            if prev in _BE_PRESENT or inverted or i == 0:  # "I'm moving", "Moving in May!"
                out.append((pos, "future"))
        elif len(w) > 3 and w.endswith("ed") and w not in _NOT_VERBS_ED and not w.endswith("eed"):
            if prev not in _BE_GET and prev not in _MODALS:  # "is booked" is a state, not a past
                out.append((pos, "past"))
        elif w in ("been", "done", "gone", "seen") and prev in _HAVE and not nxt.endswith("ing"):
            # "I've been to Rome": past; "I've been thinking about going in October" places nothing
            out.append((pos, "past"))
        elif (
            w in _SCHEDULED
            and (
                w in ("am", "is", "are")
                or (w.endswith("s") and not w.startswith("'"))
                or w in ("'m", "'re")
                or (w == "'s" and prev in _IS_AFTER)
                or prev in _SUBJECTS
                or (prev.endswith("s") and len(prev) > 3)
            )
            and prev not in _MODALS
            and _prev(tokens, i, 1) not in _MODALS  # "did you get", "will we move": the auxiliary decides
            and not (w in _BE_PRESENT and nxt.endswith("ing"))
        ):
            out.append((pos, "future"))
    return out


class _ClauseTenses:
    """The tense cues of one text, found once, and the tense around any span of it.

    Cues, sentence breaks and clause breaks are each found in one pass; a span's clause and its
    nearest cue are then looked up by bisection, so a long message costs linear time.
    """

    def __init__(self, text: str) -> None:
        self.cues = _cues(_tokens(text))
        self.cue_pos = [p for p, _ in self.cues]
        self.sentences = [(m.start(), m.end()) for m in _SENTENCE_BREAK.finditer(text)]
        self.clauses = [(m.start(), m.end()) for m in _CLAUSE_BREAK.finditer(text)]
        self.size = len(text)
        self.habits = [m.start() for m in _HABITUAL.finditer(text)]

    def _bounds(self, breaks: list[tuple[int, int]], a: int, b: int) -> tuple[int, int]:
        """From the end of the last break before ``a`` to the start of the first after ``b``."""
        i = bisect.bisect_right(breaks, (a, self.size + 1))  # breaks starting at or before a
        lo = next((e for s, e in reversed(breaks[max(0, i - 2) : i]) if e <= a), 0)
        j = bisect.bisect_left(breaks, (b, -1))
        hi = breaks[j][0] if j < len(breaks) else self.size
        return lo, hi

    def _nearest(self, lo: int, hi: int, a: int, b: int) -> Tense | None:
        before = bisect.bisect_left(self.cue_pos, a) - 1
        after = bisect.bisect_left(self.cue_pos, b)
        best: tuple[int, Tense] | None = None
        if before >= 0 and self.cue_pos[before] >= lo:
            best = (a - self.cue_pos[before], self.cues[before][1])
        if after < len(self.cues) and self.cue_pos[after] < hi:
            dist = self.cue_pos[after] - b
            if best is None or dist < best[0]:
                best = (dist, self.cues[after][1])
        return best[1] if best else None

    def habitual(self, a: int, b: int) -> bool:
        """Whether the clause around ``[a, b)`` speaks of a habit ("usually", "every", ...)."""
        s_lo, s_hi = self._bounds(self.sentences, a, b)
        c_lo, c_hi = self._bounds(self.clauses, a, b)
        i = bisect.bisect_left(self.habits, max(s_lo, c_lo))
        return i < len(self.habits) and self.habits[i] < min(s_hi, c_hi)

    def around(self, a: int, b: int) -> Tense | None:
        """The tense of the cue nearest ``[a, b)`` in its clause, else in its sentence."""
        s_lo, s_hi = self._bounds(self.sentences, a, b)
        c_lo, c_hi = self._bounds(self.clauses, a, b)
        return self._nearest(max(s_lo, c_lo), min(s_hi, c_hi), a, b) or self._nearest(s_lo, s_hi, a, b)


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
    tenses: _ClauseTenses | None = None
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
                tenses = tenses or _ClauseTenses(lowered)
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
