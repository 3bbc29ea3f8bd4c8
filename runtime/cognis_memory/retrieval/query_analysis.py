"""Stage 1: query analysis — temporal intent and history intent.

* **Explicit time** ("last week", "in May", "on 7 May 2023", "yesterday"): the expression
  is resolved against the query's reference time (the caller's ``now``); the boost then
  favours memories whose event time falls in or near that interval.
* **Recency** ("recently", "lately", "latest", "these days"): the target is ``now``.
* **When-questions** ("when did ...", "what date", "how long ago"): no target time exists,
  but memories whose text carried a resolvable date are the ones that can answer; they get
  a small boost (see ``when_weight``).
* **History intent** ("used to", "before", "previous", "my old ...", "changed", "no longer", ...): the
  answer should include earlier versions of the matching memories, and older statements
  come before the ones that replaced them (see :mod:`.current_state`).
* **Present-state intent** ("now", "currently", "still", "anymore", "these days", or a
  question in the present tense: "where do I live?", "what is my dog called?"): the answer
  is what holds *now*, so a newer statement about the same thing comes before the one it
  replaced (see :mod:`.current_state`). It is told from grammar only (tense auxiliaries and
  temporal adverbs), never from what the query is about. The adverbs say *when*, not
  *what*: :func:`without_state_words` drops them from the searched text, as matching
  "now" finds every message that says "now".
* **Speaker names**: a name that is one of the user's conversation speakers says *whose*
  messages are wanted, but it occurs in (or is the speaker of) a large share of that user's
  memories, so as a search term it mostly adds noise: with all-MiniLM-L6-v2 the name
  dominates the query vector. :func:`name_candidates` finds the capitalised words worth
  checking against the speaker directory (see :mod:`.speakers`); :func:`name_mentions`
  finds where a known speaker's name is *used as a name* in the query, and
  :func:`strip_names` removes exactly those mentions (and their possessive) from the text
  that is embedded and sent to BM25; the pipeline boosts those speakers' memories instead.

  Many names are also ordinary words (Will, May, Mark, Hope, Bill). A word is used as a
  name only when it is written like one: capitalised in the query ("What did Will say?"),
  not a capitalised function word opening a sentence ("Will I ...?", "May I ...?"), and not
  part of a time expression ("in May"). "What will I cook next week?" therefore keeps its
  "will" whoever the user's speakers are.
* **Role** ("what did *you* recommend?", "where do *I* live?"): whose turns the question asks
  about, from its grammatical person (:func:`query_role`; see :mod:`.role_prior`).

A search's text is analysed once: :func:`analyze_query` reads its intent, the speaker directory
is asked about its :func:`name_candidates`, and :func:`analysed_query` makes every cut of the text
the pipeline and its stages read into one :class:`AnalysedQuery`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from ..timeexpr import TimeSpan, find_time_spans

Role = Literal["user", "assistant"]

_HISTORY = re.compile(
    r"\b(used to|use to|previous|previously|formerly|originally|before|earlier|changed?|changes|no longer|"
    r"(?:my|your|our|his|her|their|\w+'s)\s+old(?!\s+(?:age|enough))|"
    r"at first|in the past(?!\s+(?:few|couple|several|\d+|\w+\s+(?:days?|weeks?|months?|years?)))|former|prior)\b",
    re.I,
)
_RECENT = re.compile(r"\b(recently|lately|latest|most recent)\b", re.I)
#: Adverbs that ask for the present state ("still" and "anymore" ask whether a state holds now).
_PRESENT_WORDS = re.compile(
    r"\b(right now|now|currently|current|still|anymore|any more|these days|nowadays|at the moment|at present)\b", re.I
)
#: A question in the present (or present perfect) tense: a present auxiliary or copula among its first words,
#: or one in question position before a pronoun ("how many plants do I keep", "how long have we known ...").
_PRESENT_TENSE = re.compile(
    r"^\W*(?:\w+\W+){0,3}?(?:do|does|am|is|are|have|has|what's|where's|who's|how's)\b"
    r"|\b(?:do|does|am|is|are|have|has|can)\s+(?:i|we|you|he|she|they)\b",
    re.I,
)
#: The past tense: a past auxiliary or copula, or "had" in question position ("had I").
_PAST_TENSE = re.compile(r"\b(did|was|were|went|used)\b|\bhad\s+(?:i|we|you|he|she|they)\b", re.I)

StateIntent = Literal["none", "present", "history"]
_WHEN = re.compile(
    r"\b(when|what (?:date|day|time|year|month)|how long ago|since when|which (?:day|year|month))\b", re.I
)

TemporalKind = Literal["none", "explicit", "recent", "when"]

_CAPITALISED = re.compile(r"\b[A-Z][\w\-]*(?:'s|\u2019s)?\b")
#: Capitalised words that begin questions or sentences and are never names worth checking.
_NOT_NAMES = frozenset(
    "a an and are as at be but by can could did do does during for from had has have how i if in is it its may "
    "might my no not of on or our shall she should so than that the their then there these they this to was we "
    "were what when where which who whom whose why will with would you your yes he her his him me us them".split()
)


def _opens_sentence(query: str, pos: int) -> bool:
    before = query[:pos].rstrip()
    return not before or before[-1] in '.!?:;"(\u201c'


def _time_expression_ranges(query: str, spans: Iterable[TimeSpan]) -> list[tuple[int, int]]:
    """Character ranges of the query covered by the given time expressions ("in May")."""
    lowered, out = query.lower(), []
    for span in spans:
        i = lowered.find(span.text.lower())
        if i >= 0:
            out.append((i, i + len(span.text)))
    return out


def _used_as_name(query: str, start: int, word: str, time_ranges: Sequence[tuple[int, int]]) -> bool:
    """Whether ``word`` at ``start`` is written as a name: capitalised (not an all-caps acronym), not a
    capitalised function word opening a sentence ("Will I ...", "May I ..."), not inside a time expression."""
    if not word[:1].isupper() or (len(word) > 1 and word.isupper()):
        return False
    if word.lower() in _NOT_NAMES and _opens_sentence(query, start):
        return False
    return not any(a <= start < b for a, b in time_ranges)


def name_candidates(query: str, spans: Iterable[TimeSpan] = ()) -> list[str]:
    """Capitalised words of the query that could be a person's name (possessive stripped).

    Sentence openers and function words ("What", "When", "The") are skipped, and so are
    words of a time expression (``spans``: "in May"); anything else capitalised is a
    candidate and is only used once it is confirmed as a speaker of the user's memories. A
    function word in the middle of a sentence ("What did Will say?") is a candidate: there it
    can only be a name.
    """
    ranges = _time_expression_ranges(query, spans)
    out: dict[str, None] = {}
    for m in _CAPITALISED.finditer(query):
        word = re.sub(r"(?:'s|\u2019s)$", "", m.group(0))
        if len(word) < 2 or not _used_as_name(query, m.start(), word, ranges):
            continue
        out[word] = None
    return list(out)


def name_mentions(query: str, names: Iterable[str], spans: Iterable[TimeSpan] = ()) -> list[tuple[int, int, str]]:
    """Where the given speaker names are used as names in the query: ``(start, end, name)``, in
    text order. ``end`` covers a possessive 's. A name matches whole words only, whatever its
    case in the directory, but the query must write it as a name (see :func:`_used_as_name`)."""
    ranges = _time_expression_ranges(query, spans)
    out = []
    for name in {n for n in names if n}:
        for m in re.finditer(rf"(?<!\w){re.escape(name)}(?:'s|\u2019s)?(?!\w)", query, re.I):
            if _used_as_name(query, m.start(), query[m.start() : m.start() + len(name)], ranges):
                out.append((m.start(), m.end(), name))
    return sorted(out)


def find_names(query: str, names: Iterable[str], spans: Iterable[TimeSpan] = ()) -> list[str]:
    """The given names that the query uses as names (see :func:`name_mentions`), in text order."""
    return list(dict.fromkeys(name for _, _, name in name_mentions(query, names, spans)))


#: Words of a request that say what the caller wants done, not what to find ("tell me about ...").
#: BM25 needs no stop-word list of its own here (the store has one); these are conversational
#: fillers that would otherwise match large parts of a chat history.
_FILLER = re.compile(
    r"\b(?:tell|say|said|says|about|know|knows|remember|mention|mentioned|anything|something|things?|kind|type|sort)\b",
    re.I,
)
_ABSOLUTE = re.compile(r"\d|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)", re.I)


def keyword_text(query: str, analysis: QueryAnalysis) -> str:
    """The text sent to BM25: fillers and *relative* time expressions removed.

    "last week" or "yesterday" are handled by temporal boosting; as keywords they match
    every memory that mentions any week. Absolute dates ("May 2023", "7 May") stay: the
    ingest stage annotates memories with absolute dates, so they are good keywords. A text
    that would become empty is returned unchanged.
    """
    out = query
    for span in analysis.spans:
        if not _ABSOLUTE.search(span.text):
            out = out.replace(span.text, " ")
    out = _FILLER.sub(" ", out)
    out = re.sub(r"\s+", " ", out).strip()
    content_words = [w for w in re.findall(r"\w+", out.lower()) if w not in _NOT_NAMES]
    return out if content_words else query


def strip_names(query: str, names: Iterable[str], spans: Iterable[TimeSpan] = ()) -> str:
    """The query without the mentions of the given names that are used as names (and their
    possessive 's), whitespace collapsed. "Will" in "What did Will say?" goes; "will" in "What
    will I cook?" stays. A query that would become empty is returned unchanged.
    """
    out, pos = [], 0
    for start, end, _ in name_mentions(query, names, spans):
        if start >= pos:
            out.append(query[pos:start] + " ")
            pos = end
    out.append(query[pos:])
    text = re.sub(r"\s+([?.!,;:])", r"\1", re.sub(r"\s+", " ", "".join(out))).strip()
    return text if re.search(r"\w", text) else query


def without_state_words(query: str) -> str:
    """The query without its present-state adverbs ("now", "currently", "these days", ...); a query
    that would become empty is returned unchanged."""
    out = re.sub(r"\s+([?.!,;:])", r"\1", re.sub(r"\s+", " ", _PRESENT_WORDS.sub(" ", query))).strip()
    return out if re.search(r"\w", out) else query


def state_intent(query: str, *, history: bool, explicit_time: bool, from_tense: bool = True) -> StateIntent:
    """``history`` for history questions; ``present`` for a present-state or recency adverb, or (with
    ``from_tense``) for a present-tense question that names no time and no past; else ``none``."""
    if history:
        return "history"
    if _PRESENT_WORDS.search(query) or _RECENT.search(query):
        return "present"
    if from_tense and not explicit_time and _PRESENT_TENSE.search(query) and not _PAST_TENSE.search(query):
        return "present"
    return "none"


#: "you" that asks the assistant to do something, not about what it said.
_REQUEST = re.compile(
    r"\b(?:can|could|would|will)\s+you\b|\bdo\s+you\s+(?:remember|know|recall|think)\b|\bthank\s+you\b", re.I
)
_SECOND = re.compile(r"\b(?:you|your|yours|yourself)\b", re.I)
_FIRST = re.compile(r"\b(?:i|me|my|mine|myself)\b", re.I)


def query_role(query: str) -> Role | None:
    """Whose turns the query asks about, from its grammatical person: ``assistant`` for a question about
    the assistant's words ("what did you recommend?"), ``user`` for a first-person question, else None (a
    third-person question, or none of the two). "you" in a request to the assistant ("can you remind me
    ...", "do you remember ...") is not a question about the assistant's turns."""
    text = _REQUEST.sub(" ", query)
    if _SECOND.search(text):
        return "assistant"
    if _FIRST.search(text):
        return "user"
    return None


@dataclass(slots=True, frozen=True)
class QueryAnalysis:
    temporal: TemporalKind
    target_start: datetime | None = None
    target_end: datetime | None = None
    window_days: float | None = None
    history: bool = False
    spans: tuple[TimeSpan, ...] = ()
    state: StateIntent = "none"

    @property
    def is_temporal(self) -> bool:
        return self.temporal != "none"

    def to_dict(self) -> dict[str, object]:
        return {
            "temporal": self.temporal,
            "target_start": self.target_start.isoformat() if self.target_start else None,
            "target_end": self.target_end.isoformat() if self.target_end else None,
            "window_days": self.window_days,
            "history": self.history,
            "state": self.state,
            "expressions": [s.text for s in self.spans],
        }


def analyze_query(
    query: str, now: datetime, *, default_window_days: float, state_from_tense: bool = True
) -> QueryAnalysis:
    history = bool(_HISTORY.search(query))
    spans = tuple(find_time_spans(query, now))
    state = state_intent(query, history=history, explicit_time=bool(spans), from_tense=state_from_tense)
    if spans:
        start = min(s.start for s in spans)
        end = max(s.end for s in spans)
        span_days = (end - start).total_seconds() / 86400
        return QueryAnalysis(
            "explicit", start, end, max(default_window_days, span_days), history=history, spans=spans, state=state
        )
    if _RECENT.search(query):
        return QueryAnalysis("recent", now, now, default_window_days, history=history, state=state)
    if _WHEN.search(query):
        return QueryAnalysis("when", history=history, state="history" if history else "none")
    return QueryAnalysis("none", history=history, state=state)


@dataclass(slots=True, frozen=True)
class AnalysedQuery:
    """A search's text analysed once, before anything is searched: every cut of the text the pipeline and
    its stages read (:func:`analysed_query` makes it)."""

    #: the text as asked
    text: str
    #: what it asks about time and state (the answer's ``query_analysis``)
    analysis: QueryAnalysis
    #: the user's speakers it names, in text order (speaker-aware recipes)
    speaker_names: tuple[str, ...]
    #: the text that is embedded: without those names and, for a present-state question, its state adverbs
    search_text: str
    #: the text sent to BM25: :attr:`search_text` without fillers and relative time expressions
    keyword_text: str
    #: whose turns it asks about (:func:`query_role`)
    role: Role | None


def analysed_query(
    text: str,
    analysis: QueryAnalysis,
    speakers: Iterable[str] = (),
    *,
    drop_state_words: bool = False,
    keyword_cleanup: bool = False,
) -> AnalysedQuery:
    """``text`` with its ``analysis`` and its cuts: the ``speakers`` (names the user's conversations are
    said by) it uses as names leave the searched text, so do the state adverbs of a present-state question
    when ``drop_state_words``, and with ``keyword_cleanup`` the keyword text loses fillers and relative
    time expressions (:func:`keyword_text`)."""
    names = tuple(find_names(text, speakers, analysis.spans))
    search = strip_names(text, names, analysis.spans) if names else text
    if drop_state_words and analysis.state == "present":
        search = without_state_words(search)
    return AnalysedQuery(
        text=text,
        analysis=analysis,
        speaker_names=names,
        search_text=search,
        keyword_text=keyword_text(search, analysis) if keyword_cleanup else search,
        role=query_role(text),
    )
