"""Long messages as several memories.

A message longer than ``memory_max_bytes`` (UTF-8) is stored whole as one message, and its text
is cut into *parts* of at most that size, each stored as its own raw memory pointing to the
same source message (``source_message_ids``) and numbered in its metadata (``part``/``parts``).
Every part is embedded and indexed, so a search finds a passage anywhere in the message, and
forgetting the user removes them all.

Cuts fall on the largest boundary that leaves parts within the limit: paragraphs (blank lines),
then lines, then sentence ends, then spaces; a text without any (a long token) is cut between
characters. Parts are never split inside a character. The ids of the parts derive from the
message's raw-memory id (:func:`part_id`), so a retried ingest writes the same ids.
"""

from __future__ import annotations

import hashlib
import re

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
