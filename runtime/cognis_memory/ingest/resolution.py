"""The ingest pipeline's second stage: speaker and time resolution.

Names the speaker (the message's speaker, else its role), parses relative time
expressions against the message's own timestamp and picks the ``event_time``: the centre
of the first expression found, else none (the memory then falls back to the message time).
The expressions become the raw memory's ``time_expressions`` (each with its absolute date);
the text itself is never changed. What gets embedded and indexed is the text with the speaker
in front and each expression followed by its absolute date ("Maya: I went hiking yesterday
[7 May 2023]", :mod:`cognis_memory.search_text`), so a later query that names the speaker or
the absolute date finds it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from ..domain import Message, as_utc
from ..search_text import annotate, said_text
from ..stores.records import iso
from ..timeexpr import SEASON_NAMES, TimeSpan, find_time_spans
from .parts import split_text


@dataclass(slots=True)
class ResolvedMessage:
    message: Message
    speaker: str
    message_time: datetime
    event_time: datetime | None
    spans: list[TimeSpan] = field(default_factory=list)
    #: the text of the message (of this part of it), as said
    text: str = ""
    part: int = 0  # which part of a long message this is (0-based), of ``parts``
    parts: int = 1

    @property
    def time_expressions(self) -> list[dict[str, Any]]:
        """The spans as a raw memory keeps them (:func:`time_expression`)."""
        return [time_expression(s) for s in self.spans]

    @property
    def annotated_text(self) -> str:
        """The text with each relative date followed by its absolute one in brackets."""
        return annotate(self.text, self.time_expressions)

    @property
    def display_text(self) -> str:
        """``speaker: text`` with absolute dates annotated: the raw memory's search text, which the
        extraction prompt shows too."""
        return said_text(self.speaker, self.text, self.time_expressions)


def format_span(span: TimeSpan) -> str:
    """The span in words: "7 May 2023", "May 2023", "summer 2023", a range as "March 2023 to May 2023"."""
    d, last = span.start, span.end - timedelta(microseconds=1)
    if span.granularity == "week":
        return f"week of {d.day} {d:%B %Y}"
    if span.granularity == "season":
        name = SEASON_NAMES.get(d.month, "season")
        return f"winter {d.year}/{(d.year + 1) % 100:02d}" if name == "winter" else f"{name} {d.year}"
    one = {
        "day": lambda t: f"{t.day} {t:%B %Y}",
        "month": lambda t: f"{t:%B %Y}",
        "year": lambda t: f"{t.year}",
    }[span.granularity]
    first, final = one(d), one(last)
    return first if first == final else f"{first} to {final}"  # a range ("from March to May")


def time_expression(span: TimeSpan) -> dict[str, Any]:
    """A resolved span as a memory keeps it: the words, the absolute date they mean (as the search text
    notes it), the interval and its granularity."""
    return {
        "text": span.text,
        "date": format_span(span),
        "start": iso(span.start),
        "end": iso(span.end),
        "granularity": span.granularity,
    }


def resolve_message(message: Message) -> ResolvedMessage:
    ts = as_utc(message.timestamp)
    spans = find_time_spans(message.content, ts)
    speaker = (message.speaker or message.role or "").strip()
    return ResolvedMessage(
        message=message,
        speaker=speaker,
        message_time=ts,
        event_time=spans[0].center if spans else None,
        spans=spans,
        text=message.content,
    )


def resolve_parts(message: Message, max_bytes: int) -> list[ResolvedMessage]:
    """:func:`resolve_message` for a message, or for each part of one longer than ``max_bytes``
    (its text cut by :func:`~.parts.split_text`); every part keeps the message (id, speaker,
    time) and resolves the dates in its own text. A part's memory content is its at most
    ``max_bytes`` of the message, as said."""
    texts = split_text(message.content, max_bytes)
    if len(texts) == 1:
        return [resolve_message(message)]
    out = []
    for i, text in enumerate(texts):
        r = resolve_message(replace(message, content=text))
        r.message, r.part, r.parts = message, i, len(texts)
        out.append(r)
    return out
