"""The ingest pipeline's second stage: speaker and time resolution.

Names the speaker (the message's speaker, else its role), parses relative time
expressions against the message's own timestamp and picks the ``event_time``: the centre
of the first expression found, else none (the memory then falls back to the message time).
It also produces ``annotated_text``: the text with each expression followed by its absolute
date in brackets ("yesterday [7 May 2023]"), which is what gets embedded and indexed, so a
later query that names the absolute date finds it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from ..domain import Message, as_utc
from ..timeexpr import SEASON_NAMES, TimeSpan, find_time_spans
from .parts import split_text


@dataclass(slots=True)
class ResolvedMessage:
    message: Message
    speaker: str
    message_time: datetime
    event_time: datetime | None
    spans: list[TimeSpan] = field(default_factory=list)
    annotated_text: str = ""
    part: int = 0  # which part of a long message this is (0-based), of ``parts``
    parts: int = 1

    @property
    def display_text(self) -> str:
        """``speaker: text`` with absolute dates annotated."""
        return f"{self.speaker}: {self.annotated_text}" if self.speaker else self.annotated_text


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


def annotate(text: str, spans: list[TimeSpan]) -> str:
    """Insert ``[absolute date]`` after each span's text (spans must come from ``text``)."""
    out, pos = [], 0
    lowered = text.lower()
    for span in spans:
        i = lowered.find(span.text.lower(), pos)
        if i < 0:
            continue
        j = i + len(span.text)
        out.append(text[pos:j])
        if not span.text[:1].isdigit() or span.granularity != "day":  # an absolute date needs no note
            out.append(f" [{format_span(span)}]")
        pos = j
    out.append(text[pos:])
    return "".join(out)


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
        annotated_text=annotate(message.content, spans),
    )


def resolve_parts(message: Message, max_bytes: int) -> list[ResolvedMessage]:
    """:func:`resolve_message` for a message, or for each part of one longer than ``max_bytes``
    (its text cut by :func:`~.parts.split_text`); every part keeps the message (id, speaker,
    time) and resolves the dates in its own text. A part's memory text is its at most
    ``max_bytes`` of the message plus the speaker prefix and date notes."""
    texts = split_text(message.content, max_bytes)
    if len(texts) == 1:
        return [resolve_message(message)]
    out = []
    for i, text in enumerate(texts):
        r = resolve_message(replace(message, content=text))
        r.message, r.part, r.parts = message, i, len(texts)
        out.append(r)
    return out
