"""A user's text as an FTS5 query: its words, common words left out, each one quoted so no FTS5 syntax gets in."""

from __future__ import annotations

import re

_WORD = re.compile(r"\w+", re.UNICODE)
#: Words too common to help BM25 that would make an OR query match most of a user's rows.
STOP_WORDS = frozenset(
    "a an and are as at be been but by did do does for from had has have he her his how i if in into is it its "
    "me my of on or our she so than that the their them then there these they this to was we were what when "
    "where which who whom why will with would you your".split()
)


def fts_query_terms(text: str, limit: int = 32) -> list[str]:
    """Plain words of ``text`` for a keyword query: lower-cased, stop words dropped, de-duplicated."""
    seen: dict[str, None] = {}
    for w in _WORD.findall(text.lower()):
        if w not in STOP_WORDS and w not in seen:
            seen[w] = None
    terms = list(seen)
    if not terms:  # a query made only of stop words still deserves an answer
        terms = list(dict.fromkeys(_WORD.findall(text.lower())))
    return terms[:limit]


def quote(term: str) -> str:
    """An FTS5 string literal: the term in double quotes, inner quotes doubled."""
    return '"' + term.replace('"', '""') + '"'
