"""The ingest pipeline's second stage: a message resolved into the raw memories it becomes, once.

**Parts.** A message longer than ``memory_max_bytes`` (UTF-8) is stored whole as one message, and its
text is cut into *parts* of at most that size, each stored as its own raw memory pointing to the same
source message (``source_message_ids``) and numbered in its metadata (``part``/``parts``). Every part is
embedded and indexed, so a search finds a passage anywhere in the message, and forgetting the user
removes them all. Cuts fall on the largest boundary that leaves parts within the limit: paragraphs
(blank lines), then lines, then sentence ends, then spaces; a text without any (a long token) is cut
between characters. Parts are never split inside a character. The ids of the parts derive from the
message's raw-memory id (:func:`part_id`), so a retried ingest writes the same ids.

**Speaker and time.** Each part names the speaker (the message's speaker, else its role), parses
relative time expressions against the message's own timestamp and picks the ``event_time``: the
centre of the first expression found, else none (the memory then falls back to the message time).
The expressions become the raw memory's ``time_expressions`` (each with its absolute date); the
text itself is never changed. What gets embedded and indexed is the text with the speaker in front
and each expression followed by its absolute date ("Maya: I went hiking yesterday [7 May 2023]",
:mod:`cognis_memory.search_text`), so a later query that names the speaker or the absolute date
finds it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from ..domain import Message, as_utc
from ..search_text import annotate, said_text
from ..stores.records import iso
from ..timeexpr import SEASON_NAMES, TimeSpan, find_time_spans


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
    #: the id of the raw memory this part becomes (:func:`part_id`); None for a message stored without one
    memory_id: str | None = None

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
    """The speaker (the message's, else its role) and the times of one text: the message's time, and the
    event time of the first expression found (none when there is none)."""
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
        memory_id=message.raw_memory_id,
    )


def resolve_parts(message: Message, max_bytes: int) -> list[ResolvedMessage]:
    """:func:`resolve_message` for a message, or for each part of one longer than ``max_bytes``
    (its text cut by :func:`split_text`); every part keeps the message (id, speaker, time), resolves
    the dates in its own text and has its own raw-memory id (:func:`part_id`). A part's memory content
    is its at most ``max_bytes`` of the message, as said."""
    texts = split_text(message.content, max_bytes)
    out = []
    for i, text in enumerate(texts):
        # a part is resolved as a message of its own text and raw-memory id, then keeps the message it is of
        own_id = (
            part_id(message.raw_memory_id, i) if len(texts) > 1 and message.raw_memory_id else message.raw_memory_id
        )
        r = resolve_message(replace(message, content=text, raw_memory_id=own_id))
        r.message, r.part, r.parts = message, i, len(texts)
        out.append(r)
    return out


#: Boundaries, from the most to the least natural; each pattern matches the separator to cut after.
_BOUNDARIES = (
    re.compile(r"\n[ \t]*\n\s*"),  # paragraph
    re.compile(r"\n"),  # line
    re.compile(r"(?<=[.!?])[\"')\]]*\s+|(?<=[。！？])"),  # sentence end (CJK ones need no space)
    re.compile(r"\s+"),  # word
)


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def split_text(text: str, max_bytes: int) -> list[str]:
    """``text`` in order, cut into pieces of at most ``max_bytes`` UTF-8 bytes on natural boundaries.

    Joining the pieces gives back the text, except for the whitespace at the cuts."""
    if max_bytes < 4:
        raise ValueError("max_bytes must be at least 4 (one UTF-8 character)")
    if _size(text) <= max_bytes:
        return [text]
    return [p for p in _split(text, max_bytes, 0) if p.strip()]


def _split(text: str, max_bytes: int, level: int) -> list[str]:
    if _size(text) <= max_bytes:
        return [text]
    if level == len(_BOUNDARIES):
        return _hard_cut(text, max_bytes)
    pieces = _pieces(text, _BOUNDARIES[level])
    if len(pieces) == 1:
        return _split(text, max_bytes, level + 1)
    out: list[str] = []
    current = ""
    for piece in pieces:
        if current and _size(current + piece) > max_bytes:
            out.append(current.rstrip())
            current = ""
        if _size(piece) > max_bytes:  # one piece alone is too large: cut it at a finer boundary
            out.extend(_split(piece.rstrip(), max_bytes, level + 1))
            continue
        current += piece
    if current.strip():
        out.append(current.rstrip())
    return out


def _pieces(text: str, boundary: re.Pattern[str]) -> list[str]:
    """``text`` cut after each match of ``boundary`` (each piece keeps its trailing separator)."""
    pieces, start = [], 0
    for m in boundary.finditer(text):
        if m.end() > start:
            pieces.append(text[start : m.end()])
            start = m.end()
    if start < len(text):
        pieces.append(text[start:])
    return pieces


def _hard_cut(text: str, max_bytes: int) -> list[str]:
    out: list[str] = []
    current: list[str] = []
    size = 0
    for ch in text:
        n = _size(ch)
        if size + n > max_bytes:
            out.append("".join(current))
            current, size = [], 0
        current.append(ch)
        size += n
    if current:
        out.append("".join(current))
    return out


def part_id(raw_memory_id: str, index: int) -> str:
    """The id of part ``index`` (0-based) of a message whose raw memory id is ``raw_memory_id``:
    part 0 is that id itself; later parts are derived from it (32 hex characters, stable across retries)."""
    if index == 0:
        return raw_memory_id
    return hashlib.sha256(f"{raw_memory_id}:part:{index}".encode()).hexdigest()[:32]
