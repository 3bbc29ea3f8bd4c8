"""Context assembly: search hits turned into a compact text block for an agent's system prompt.

The block lists the most relevant memories first, one line each, with the date the thing
happened (``event_time``) or, failing that, the date it was said. For history questions
("where did she live before?") the earlier versions follow their memory, indented, newest
first, each with its own date. It is sized to a token budget: memories are added in rank order
while they fit; a memory whose history does not fit is added without it; one that does not
fit at all is skipped and smaller ones after it may still go in. An empty result is an empty
string, so the caller can leave the section out.

Token counts are estimates, because the model's tokenizer is not available offline: ASCII
text at 3.5 characters per token (English averages about 4 with current LLM tokenizers, so
the estimate errs high) and every other character as one token (CJK is close to one token a
character). Pass ``count_tokens`` to use an exact tokenizer instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from .domain import Memory, MemoryKind

HEADER = "What you remember about this user (most relevant first; [date] is when it happened or was said):"
MAX_ITEM_CHARS = 600


def estimate_tokens(text: str) -> int:
    """A deliberately generous token estimate; see the module docstring."""
    ascii_chars = sum(1 for ch in text if ch < "\x80")
    return math.ceil(ascii_chars / 3.5) + (len(text) - ascii_chars)


@dataclass(slots=True)
class ContextItem:
    memory: Memory
    history: list[Memory] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)


@dataclass(slots=True)
class AssembledContext:
    text: str
    tokens: int
    items: list[ContextItem]
    omitted: int = 0  # hits left out because the budget was spent


def _date(t: datetime | None) -> str:
    return t.date().isoformat() if t else "undated"


def _clip(text: str, limit: int = MAX_ITEM_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def memory_line(m: Memory, *, with_id: bool = False) -> str:
    """One memory as a line: ``- [2025-03-20] content``; raw messages name their speaker."""
    content = _clip(m.content)
    if m.kind == MemoryKind.RAW and m.speaker and not content.lower().startswith(m.speaker.lower() + ":"):
        content = f"{m.speaker} said: {content}"
    ident = f" (id {m.id})" if with_id else ""
    return f"- [{_date(m.effective_time)}]{ident} {content}"


def history_lines(history: Sequence[Memory]) -> list[str]:
    """Earlier versions, newest first, under their memory: ``  earlier [2024-01-10]: ...``."""
    out = []
    for v in sorted(history, key=lambda v: v.version, reverse=True):
        what = "(deleted)" if v.deleted else _clip(v.content)
        out.append(f"  earlier [{_date(v.effective_time or v.created_at)}]: {what}")
    return out


def assemble_context(
    hits: Sequence[tuple[Memory, Sequence[Memory]]],
    *,
    max_tokens: int,
    with_ids: bool = False,
    count_tokens: Callable[[str], int] = estimate_tokens,
    header: str = HEADER,
) -> AssembledContext:
    """Pack ``(memory, earlier versions)`` pairs, best first, into at most ``max_tokens`` tokens."""
    if max_tokens < 1:
        raise ValueError("max_tokens must be positive")
    if not hits:
        return AssembledContext(text="", tokens=0, items=[])
    lines = [header]
    used = count_tokens(header)
    items: list[ContextItem] = []
    omitted = 0
    for memory, history in hits:
        main = memory_line(memory, with_id=with_ids)
        older = history_lines(history)
        for candidate, kept in (([main, *older], list(history)), ([main], [])):
            cost = count_tokens("\n" + "\n".join(candidate))
            if used + cost <= max_tokens:
                lines.extend(candidate)
                used += cost
                items.append(ContextItem(memory=memory, history=kept, lines=candidate))
                break
        else:
            omitted += 1
    if not items:
        return AssembledContext(text="", tokens=0, items=[], omitted=omitted)
    return AssembledContext(text="\n".join(lines), tokens=used, items=items, omitted=omitted)
