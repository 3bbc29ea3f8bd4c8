"""Stage 1: query analysis — temporal intent and history intent.

* **Explicit time** ("last week", "in May", "on 7 May 2023", "yesterday"): the expression
  is resolved against the query's reference time (the caller's ``now``); the boost then
  favours memories whose event time falls in or near that interval.
* **Recency** ("recently", "lately", "latest", "these days"): the target is ``now``.
* **When-questions** ("when did ...", "what date", "how long ago"): no target time exists,
  but memories whose text carried a resolvable date are the ones that can answer; they get
  a small boost (see ``when_weight``).
* **History intent** ("used to", "before", "previously", "changed", "no longer", ...): the
  answer should include earlier versions of the matching memories.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from ..timeexpr import TimeSpan, find_time_spans

_HISTORY = re.compile(
    r"\b(used to|previously|formerly|originally|before|earlier|changed?|changes|history|no longer|anymore|"
    r"any more|at first|in the past|old|former|prior)\b",
    re.I,
)
_RECENT = re.compile(r"\b(recently|lately|latest|these days|nowadays|currently|most recent|right now)\b", re.I)
_WHEN = re.compile(r"\b(when|what (?:date|day|time|year|month)|how long ago|since when|which (?:day|year|month))\b", re.I)

TemporalKind = Literal["none", "explicit", "recent", "when"]


@dataclass(slots=True, frozen=True)
class QueryAnalysis:
    temporal: TemporalKind
    target_start: datetime | None = None
    target_end: datetime | None = None
    window_days: float | None = None
    history: bool = False
    spans: tuple[TimeSpan, ...] = ()

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
            "expressions": [s.text for s in self.spans],
        }


def analyze_query(query: str, now: datetime, *, default_window_days: float) -> QueryAnalysis:
    history = bool(_HISTORY.search(query))
    spans = tuple(find_time_spans(query, now))
    if spans:
        start = min(s.start for s in spans)
        end = max(s.end for s in spans)
        span_days = (end - start).total_seconds() / 86400
        return QueryAnalysis(
            "explicit", start, end, max(default_window_days, span_days), history=history, spans=spans
        )
    if _RECENT.search(query):
        return QueryAnalysis("recent", now, now, default_window_days, history=history)
    if _WHEN.search(query):
        return QueryAnalysis("when", history=history)
    return QueryAnalysis("none", history=history)
