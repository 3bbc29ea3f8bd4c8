"""In-memory BM25 over one user's current memories, scoring exactly as the embedded store's FTS5 table.

FTS5 answers a keyword query by computing ``bm25()`` for *every* row that holds any query term
and sorting them all; for a user with 100,000 memories that is thousands of rows per query, each
with a B-tree read of the row's size, and the cost grows with the user. :class:`UserKeywordIndex`
keeps the user's postings (term -> rows, term frequency) in numpy arrays instead, and scores a
query with a few vector operations over the query terms' postings only.

It answers what FTS5 answers, score for score and in the same order:

* the tokens are FTS5's own: :class:`FtsTokenizer` runs the table's tokenizer (same ``tokenize``
  spec) over the texts on a private in-memory SQLite database and reads them back through
  ``fts5vocab``; a query word that FTS5 would read as several tokens (a phrase) is not handled
  here (:meth:`FtsTokenizer.single_tokens` says so and the store asks FTS5);
* the formula is FTS5's ``bm25()`` (k1 = 1.2, b = 0.75, a phrase's IDF ``log((N - n + 0.5) /
  (n + 0.5))`` floored at 1e-6) with its column weights (0 for the owner column, 1 for the
  content), evaluated in double precision in the same order of operations, phrase after phrase;
* the statistics are the table's, as FTS5 reads them (:class:`FtsStatistics`): the row count and
  the total size of every row (all columns) from the table's averages record, and per term the
  number of rows that hold it in the content column (``fts5vocab``); a row's size is its owner
  token plus its content tokens;
* ties keep FTS5's order: ascending FTS rowid.
"""

from __future__ import annotations

import math
import sqlite3
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

#: FTS5's bm25() constants.
K1 = 1.2
B = 0.75
#: Tokens FTS5 counts in a row besides the content: the owner column's single token.
OWNER_TOKENS = 1


class FtsTokenizer:
    """The FTS5 tokenizer named by ``tokenize``, run on a private in-memory database (thread-safe)."""

    def __init__(self, tokenize: str, *, cache_words: int = 50_000) -> None:
        self._conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._tokenize = tokenize
        self._lock = threading.Lock()
        self._words: OrderedDict[str, tuple[str, ...]] = OrderedDict()
        self._cache_words = cache_words

    def _instances(self, texts: Sequence[str]) -> list[tuple[str, str]]:
        """(token, comma-separated positions in ``texts``, once per instance, ascending) per token.
        A database of its own, closed afterwards: an in-memory database keeps the pages it grew to."""
        c = sqlite3.connect(":memory:", isolation_level=None)
        try:
            c.execute(f"CREATE VIRTUAL TABLE t USING fts5(content, tokenize = '{self._tokenize}')")
            c.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
            c.execute("BEGIN")
            c.executemany("INSERT INTO t(rowid, content) VALUES (?, ?)", enumerate(texts))
            c.execute("COMMIT")
            return c.execute("SELECT term, group_concat(doc) FROM v GROUP BY term").fetchall()
        finally:
            c.close()

    def postings(self, texts: Sequence[str]) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], np.ndarray]:
        """Per token: the positions in ``texts`` that hold it (int32, ascending) and how often (float32,
        exact for counts); and the number of tokens of each text."""
        if not texts:
            return {}, np.zeros(0, dtype=np.float64)
        rows = self._instances(texts)
        out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        every: list[np.ndarray] = []
        for token, docs in rows:
            d = np.fromstring(docs, dtype=np.int32, sep=",")
            every.append(d)
            if d.size > 1 and (d[1:] == d[:-1]).any():
                u, counts = np.unique(d, return_counts=True)
                out[sys.intern(token)] = (u.astype(np.int32), counts.astype(np.float32))
            else:
                out[sys.intern(token)] = (d, np.ones(d.size, dtype=np.float32))
        sizes = np.bincount(np.concatenate(every), minlength=len(texts)) if every else np.zeros(len(texts))
        return out, sizes.astype(np.float64)

    def single_tokens(self, words: Sequence[str]) -> list[str] | None:
        """The one token FTS5 makes of each word (a quoted query term), in order; None when some word
        makes no token or several (FTS5 reads those as phrases, which this index does not score)."""
        with self._lock:
            missing = [w for w in dict.fromkeys(words) if w not in self._words]
            if missing:
                found: dict[int, list[tuple[int, str]]] = {}
                c = self._conn
                c.execute("DROP TABLE IF EXISTS temp.v")
                c.execute("DROP TABLE IF EXISTS temp.t")
                c.execute(f"CREATE VIRTUAL TABLE temp.t USING fts5(content, tokenize = '{self._tokenize}')")
                c.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(temp, t, 'instance')")
                c.executemany("INSERT INTO temp.t(rowid, content) VALUES (?, ?)", enumerate(missing))
                for term, doc, offset in c.execute("SELECT term, doc, offset FROM temp.v"):
                    found.setdefault(int(doc), []).append((int(offset), term))
                c.execute("DROP TABLE temp.v")
                c.execute("DROP TABLE temp.t")
                for i, w in enumerate(missing):
                    self._words[w] = tuple(t for _, t in sorted(found.get(i, [])))
                while len(self._words) > self._cache_words:
                    self._words.popitem(last=False)
            tokens = []
            for w in words:
                toks = self._words[w]
                self._words.move_to_end(w)
                if len(toks) != 1:
                    return None
                tokens.append(toks[0])
            return tokens

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    """An SQLite varint at ``buf[i]``: (value, next position)."""
    v = 0
    for j in range(8):
        c = buf[i + j]
        if c < 0x80:
            return (v << 7) | c, i + j + 1
        v = (v << 7) | (c & 0x7F)
    return (v << 8) | buf[i + 8], i + 9


@dataclass(frozen=True, slots=True)
class TableTotals:
    rows: int  #: rows of the FTS5 table (every user)
    tokens: int  #: tokens of every row, all columns


class FtsStatistics:
    """The table-wide figures FTS5's bm25() uses, read from the FTS5 table named ``table``.

    Rows per term are cached until :meth:`changed` (every write of the FTS table calls it)."""

    def __init__(self, table: str, *, cache_terms: int = 100_000) -> None:
        self.table = table
        self._vocab = f"temp.{table}_vocab_col"
        self._df: dict[str, int] = {}
        self._cache_terms = cache_terms
        self._lock = threading.Lock()
        self._prepared: set[int] = set()

    def changed(self) -> None:
        with self._lock:
            self._df.clear()

    def forget_connections(self) -> None:
        """The store closed its connections (their temporary vocabulary tables went with them)."""
        with self._lock:
            self._df.clear()
            self._prepared.clear()

    def totals(self, conn: sqlite3.Connection) -> TableTotals:
        """From the averages record (rowid 1 of ``<table>_data``): the row count, then each column's total size."""
        row = conn.execute(f"SELECT block FROM {self.table}_data WHERE id = 1").fetchone()
        if row is None:
            return TableTotals(0, 0)
        buf = bytes(row[0])
        rows, i = _varint(buf, 0)
        tokens = 0
        while i < len(buf):
            size, i = _varint(buf, i)
            tokens += size
        return TableTotals(rows, tokens)

    def doc_freq(self, conn: sqlite3.Connection, tokens: Iterable[str]) -> dict[str, int]:
        """Rows of the whole table that hold each token in the content column."""
        tokens = list(dict.fromkeys(tokens))
        with self._lock:
            out = {t: self._df[t] for t in tokens if t in self._df}
        missing = [t for t in tokens if t not in out]
        if missing:
            if id(conn) not in self._prepared:
                conn.execute(
                    f"CREATE VIRTUAL TABLE IF NOT EXISTS {self._vocab} USING fts5vocab(main, {self.table}, 'col')"
                )
                self._prepared.add(id(conn))
            q = ",".join("?" * len(missing))
            found = dict.fromkeys(missing, 0)
            for term, docs in conn.execute(
                f"SELECT term, doc FROM {self._vocab} WHERE term IN ({q}) AND col = 'content'", missing
            ):
                found[term] = int(docs)
            with self._lock:
                if len(self._df) + len(found) > self._cache_terms:
                    self._df.clear()
                self._df.update(found)
            out.update(found)
        return out


def idf(rows: int, hits: int) -> float:
    """FTS5's IDF of a phrase found in ``hits`` of ``rows`` rows."""
    value = math.log((rows - hits + 0.5) / (hits + 0.5))
    return value if value > 0.0 else 1e-6


class _Postings:
    """One token's postings: slots (int32) and term frequencies (float32), appended in chunks."""

    __slots__ = ("slots", "tf", "_pending")

    def __init__(self, slots: np.ndarray, tf: np.ndarray) -> None:
        self.slots, self.tf = slots, tf
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []

    def append(self, slots: np.ndarray, tf: np.ndarray) -> None:
        self._pending.append((slots, tf))

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if self._pending:
            self.slots = np.concatenate([self.slots, *(s for s, _ in self._pending)])
            self.tf = np.concatenate([self.tf, *(t for _, t in self._pending)])
            self._pending.clear()
        return self.slots, self.tf


class UserKeywordIndex:
    """Postings of one user's current memories; slots are never reused (a removed memory's slot is dead)."""

    def __init__(self, tokenizer: FtsTokenizer) -> None:
        self.tokenizer = tokenizer
        self.ids: list[str] = []
        self.slot_of: dict[str, int] = {}
        self.rowid = np.zeros(0, dtype=np.int64)  # FTS rowid of each slot (ties: ascending rowid)
        self.size = np.zeros(0, dtype=np.float64)  # FTS5's row size: owner token + content tokens
        self.alive = np.zeros(0, dtype=bool)
        self.postings: dict[str, _Postings] = {}
        self.dead = 0

    @property
    def n(self) -> int:
        """Live memories."""
        return len(self.slot_of)

    def add(self, rows: Sequence[tuple[str, int, str]]) -> None:
        """Index (memory id, FTS rowid, content) rows; ids already indexed are skipped."""
        rows = [r for r in rows if r[0] not in self.slot_of]
        if not rows:
            return
        base = len(self.ids)
        postings, sizes = self.tokenizer.postings([r[2] for r in rows])
        for i, (memory_id, _, _) in enumerate(rows):
            memory_id = sys.intern(memory_id)  # the vector index holds the same string
            self.ids.append(memory_id)
            self.slot_of[memory_id] = base + i
        self.rowid = np.concatenate([self.rowid, np.array([r[1] for r in rows], dtype=np.int64)])
        self.size = np.concatenate([self.size, sizes + OWNER_TOKENS])
        self.alive = np.concatenate([self.alive, np.ones(len(rows), dtype=bool)])
        for token, (slots, tf) in postings.items():
            slots = slots + base if base else slots
            p = self.postings.get(token)
            if p is None:
                self.postings[token] = _Postings(slots, tf)
            else:
                p.append(slots, tf)

    def compact(self) -> None:
        """Join every token's appended postings now (after a bulk load) rather than at its first query."""
        for p in self.postings.values():
            p.arrays()

    def remove(self, memory_id: str) -> None:
        slot = self.slot_of.pop(memory_id, None)
        if slot is not None:
            self.alive[slot] = False
            self.dead += 1

    def search(self, tokens: Sequence[str], idfs: Sequence[float], avgdl: float, limit: int) -> list[tuple[str, float]]:
        """Top ``limit`` (memory id, bm25 score) for the query phrases ``tokens`` with their IDFs, best first."""
        if limit <= 0 or not tokens or not self.slot_of:
            return []
        scores = np.zeros(len(self.ids), dtype=np.float64)
        matched = np.zeros(len(self.ids), dtype=bool)
        norm = K1 * ((1 - B) + (B * self.size) / avgdl)
        for token, w in zip(tokens, idfs, strict=True):
            p = self.postings.get(token)
            if p is None:
                continue
            slots, tf32 = p.arrays()
            tf = tf32.astype(np.float64)  # FTS5 computes in double precision
            scores[slots] += w * ((tf * (K1 + 1.0)) / (tf + norm[slots]))
            matched[slots] = True
        if self.dead:
            matched &= self.alive
        hit = np.flatnonzero(matched)
        if hit.size == 0:
            return []
        s = scores[hit]
        if hit.size > limit:
            keep = np.argpartition(-s, limit - 1)[:limit]
            # ties at the cut-off: keep FTS5's choice (lowest rowid among equal scores)
            cut = s[keep].min()
            keep = np.flatnonzero(s >= cut)
            hit, s = hit[keep], s[keep]
        order = np.lexsort((self.rowid[hit], -s))[:limit]
        return [(self.ids[int(hit[i])], float(s[i])) for i in order]
