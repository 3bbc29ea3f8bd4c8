"""The text a memory is found by: what gets embedded, what the keyword index (BM25) holds and what the
cross-encoder reranker reads, built from the memory's fields by :func:`search_text`, the one place
every backend, the ingest pipeline, edits and re-indexing take it from.

A memory's ``content`` is kept exactly as it was said (a raw message) or written (a fact, by the
extraction model or the caller). Who said it and what its relative dates mean are fields of their
own (``speaker``, ``time_expressions``); the search text puts them back into the words, so that a
query naming the speaker or the absolute date finds the memory:

* a raw memory: ``speaker: content``, each time expression followed by its absolute date in
  brackets, e.g. ``Maya: I went hiking yesterday [7 May 2023]`` (an expression that is itself a
  full date, "on 2023-04-01", gets no note);
* a fact: its content; a fact written in the first person ("I moved to Lisbon") gets its speaker in
  front, as a raw memory does, so that it is never read as someone else's words.

Memories stored before ``content`` was kept verbatim hold that text already in ``content`` (the speaker
prefix and the date notes) and have no ``time_expressions``: their search text is their content as it
is, which is also the text they were embedded and indexed with.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .domain import Memory, MemoryKind

#: A first-person word anywhere in a fact (copied from the message rather than restated). Case-sensitive,
#: so that "US" and "ME" are not pronouns.
FIRST_PERSON = re.compile(r"\b(I|[Mm]y|[Mm]e|[Mm]ine|[Mm]yself|[Ww]e|[Oo]ur|[Oo]urs|[Oo]urselves)\b")
#: ... unless the fact names its subject first ("The user is getting a cold, I think.": the speaker's hedge).
NAMES_THE_USER = re.compile(r"^\W*(the\s+)?user\b", re.IGNORECASE)


def speaker_prefixed(speaker: str | None, content: str) -> bool:
    """Whether ``content`` already starts with ``speaker:`` (a raw memory stored before content was kept
    verbatim, or a message whose own text begins with its speaker's name)."""
    return bool(speaker) and content.startswith(f"{speaker}:")


def needs_date_note(expression: Mapping[str, Any]) -> bool:
    """Whether a time expression gets its absolute date noted: all but a full date written as one."""
    text = str(expression.get("text") or "")
    return (
        bool(text)
        and bool(expression.get("date"))
        and not (text[:1].isdigit() and expression.get("granularity") == "day")
    )


def annotate(text: str, expressions: Sequence[Mapping[str, Any]]) -> str:
    """``text`` with ``[absolute date]`` after each time expression (found in order, case-insensitively;
    one not found in the text, e.g. after an edit, is skipped)."""
    out, pos = [], 0
    lowered = text.lower()
    for e in expressions:
        surface = str(e.get("text") or "")
        i = lowered.find(surface.lower(), pos) if surface else -1
        if i < 0:
            continue
        j = i + len(surface)
        out.append(text[pos:j])
        if needs_date_note(e):
            out.append(f" [{e['date']}]")
        pos = j
    out.append(text[pos:])
    return "".join(out)


def said_text(speaker: str | None, content: str, expressions: Sequence[Mapping[str, Any]]) -> str:
    """The search text of something said: ``speaker: content`` with its dates noted (see the module)."""
    text = annotate(content, expressions) if expressions else content
    if not speaker or speaker_prefixed(speaker, content):
        return text
    return f"{speaker}: {text}"


def first_person(content: str, speaker: str | None) -> bool:
    """Whether a fact is written in the first person without naming its subject (then its speaker is
    named in its search text)."""
    return bool(
        speaker
        and FIRST_PERSON.search(content)
        and not NAMES_THE_USER.match(content)
        and not content.lower().startswith(speaker.lower())
    )


def fact_text(content: str, speaker: str | None) -> str:
    """The search text of a fact: its content, with ``speaker:`` in front when it is in the first person."""
    return f"{speaker}: {content}" if first_person(content, speaker) else content


def search_text(memory: Memory) -> str:
    """The text ``memory`` is embedded, keyword-indexed and reranked by (see the module)."""
    if memory.kind is MemoryKind.RAW:
        return said_text(memory.speaker, memory.content, memory.time_expressions)
    return fact_text(memory.content, memory.speaker)
