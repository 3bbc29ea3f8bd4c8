"""In-memory vector search over one user's current memories (numpy, and an ANN index for large users).

The embedded store keeps one :class:`UserVectorIndex` per (tenant, user), loaded from SQLite on
first use with a query that selects only that owner's current rows (straight into contiguous
float32 matrices, in chunks: no per-row objects, nothing held twice), and kept in step with every
write. Filters become boolean masks evaluated before scoring (:func:`.filters.numpy_mask`, beside
the other backends' translations), so a search never sees another user's vectors or an old
version; the per-user cache (:mod:`.owner_cache`) bounds the rows held in memory.

The prefix stage is an exact scan of the user's prefix matrix: faiss's brute-force top-k
(``faiss.knn``: SIMD inner products into a bounded heap, one pass over the matrix, no score array to
partition; 2-3x less CPU than numpy's product and ``argpartition`` at 100,000 rows, the same
shortlist), or numpy's when faiss is not installed. From ``ann_min_rows`` rows on, an
approximate index over the prefix vectors (:mod:`.ann_index`) is built in the background (the exact
scan answers meanwhile) and then shortlists the unfiltered searches; filtered searches stay exact
(the filter's rows are scanned). The index counts the memories of each kind, so a search confined to
kinds the user has none of (the fact channel without extracted facts) answers at once.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..domain import Memory
from ..search_filter import SearchFilter
from .filters import ENUM_CODES, MASKED_RECORD, numpy_mask
from .records import Column

_faiss: Any
try:
    import faiss as _faiss
except ImportError:  # pragma: no cover - faiss is a core dependency; the numpy scan is the fallback
    _faiss = None


#: the int8 code of each kind (the index counts its memories per kind)
KIND_CODES = ENUM_CODES["kind"]


def _empty_column(c: Column, capacity: int) -> np.ndarray:
    """A kept column of ``capacity`` rows: int8 codes of an enum (the first member's until set), objects otherwise."""
    return np.zeros(capacity, dtype=np.int8) if c.enum is not None else np.empty(capacity, dtype=object)


def column_block(c: Column, values: Sequence[Any]) -> np.ndarray:
    """The values of one kept column (enum members or their values, text or None) as the index keeps them:
    an enum's codes, or the texts, each interned (the rows of one session or agent share one string)."""
    if c.enum is not None:
        codes = ENUM_CODES[c.name]
        return np.fromiter((codes[v] for v in values), dtype=np.int8, count=len(values))
    out = np.empty(len(values), dtype=object)
    out[:] = [v if v is None else sys.intern(v) for v in values]
    return out


def top_inner_products(matrix: np.ndarray, query: np.ndarray, k: int) -> np.ndarray:
    """Rows of ``matrix`` (float32, C-contiguous) with the ``k`` largest inner products with ``query``
    (any order); every row when ``k`` covers them."""
    n = matrix.shape[0]
    if k >= n:
        return np.arange(n)
    if _faiss is not None and matrix.flags.c_contiguous and matrix.dtype == np.float32:
        # one thread, as every model call and BLAS product here: OpenMP's thread count is a per-thread
        # setting (this runs on a worker thread), and its spinning threads would double the CPU time
        _faiss.omp_set_num_threads(1)
        rows = _faiss.knn(query[None, :], matrix, k, metric=_faiss.METRIC_INNER_PRODUCT)[1][0]
        return rows[rows >= 0]
    return np.argpartition(-(matrix @ query), k - 1)[:k]


class PrefixAnn(Protocol):
    """An approximate nearest-neighbour index over prefix vectors (inner product), keyed by int64 keys."""

    def add(self, keys: np.ndarray, vectors: np.ndarray) -> None: ...

    def remove(self, key: int) -> None: ...

    @property
    def stale(self) -> bool:
        """Whether it should be built again (too many of its keys were removed)."""

    def search(self, query: np.ndarray, k: int) -> np.ndarray:
        """The keys of (about) the ``k`` best rows, best first (-1 pads; removed keys may come back)."""


@dataclass(slots=True)
class IndexedRow:
    """What the index needs of a memory: its id, vectors and filterable attributes."""

    id: str
    embedding: np.ndarray
    embedding_short: np.ndarray
    values: dict[str, Any]  # the value of each column of :data:`.filters.MASKED_RECORD`, by name
    time: float  # effective time as epoch seconds, NaN when unknown
    rowid: int = -1  # where the store keeps the row (SQLite's rowid), -1 when not known

    @classmethod
    def from_memory(cls, memory: Memory, rowid: int = -1) -> IndexedRow:
        assert memory.embedding is not None and memory.embedding_short is not None
        t = memory.effective_time
        return cls(
            id=memory.id,
            embedding=memory.embedding,
            embedding_short=memory.embedding_short,
            values={c.name: getattr(memory, c.field) for c in MASKED_RECORD},
            time=t.timestamp() if t else math.nan,
            rowid=rowid,
        )


#: the per-row arrays besides the kept filter columns (:attr:`UserVectorIndex.columns`)
_ARRAYS = ("short", "prefix_norm", "tail", "time", "key", "rowid")


class UserVectorIndex:
    """Growable arrays of one user's current memories: the prefix stage scans exactly, or asks
    :attr:`ann` once one is attached; the full vectors rescore.

    A full vector is held as its parts, not beside its prefix: the unit prefix (:attr:`short`, what
    the prefix stage scans), the prefix's length (:attr:`prefix_norm`) and the rest of the vector
    (:attr:`tail`), since ``full = [prefix_norm * short, tail]`` (``short`` is the prefix scaled to
    unit length). Holding ``full`` too would store the prefix twice (a third of a 384-float vector
    at a 128-float prefix: 49 MiB per 100,000 memories). A full inner product is
    ``prefix_norm * (short . q[:d]) + tail . q[d:]``: the same value up to float32 rounding.
    """

    def __init__(self, dim: int, dim_short: int, capacity: int = 64) -> None:
        self.dim, self.dim_short = dim, dim_short
        self.n = 0
        self.ids: list[str] = []
        self.row_of: dict[str, int] = {}
        self.short = np.zeros((capacity, dim_short), dtype=np.float32)
        self.prefix_norm = np.zeros(capacity, dtype=np.float32)
        self.tail = np.zeros((capacity, dim - dim_short), dtype=np.float32)
        #: each column of :data:`.filters.MASKED_RECORD` (what the filters test), by name
        self.columns: dict[str, np.ndarray] = {c.name: _empty_column(c, capacity) for c in MASKED_RECORD}
        self.time = np.full(capacity, np.nan, dtype=np.float64)
        #: a stable key per row (rows move on removal; keys do not): what the ANN index knows rows by
        self.key = np.zeros(capacity, dtype=np.int64)
        self.next_key = 0
        #: where the store keeps each row (SQLite's rowid: a hit is read by it, one B-tree lookup instead of
        #: two by id), -1 when not known
        self.rowid = np.full(capacity, -1, dtype=np.int64)
        #: row of each key (-1: removed)
        self.row_of_key = np.full(capacity, -1, dtype=np.int64)
        self.kind_count = np.zeros(len(KIND_CODES), dtype=np.int64)
        self.ann: PrefixAnn | None = None
        #: writes since the ANN build started (replayed on it when it is attached): ("add", keys) / ("remove", key)
        self.ann_pending: list[tuple[str, object]] | None = None

    @classmethod
    def of_vectors(cls, ids: list[str], full: np.ndarray, short: np.ndarray) -> UserVectorIndex:
        """An index of these vectors alone (each enum column its first member: USER scope; no text or time to
        filter on): for tools."""
        k = len(ids)
        idx = cls(full.shape[1], short.shape[1], capacity=max(k, 1))
        idx.append_block(ids, full, short, {c.name: _empty_column(c, k) for c in MASKED_RECORD}, np.full(k, np.nan))
        return idx

    def full_vectors(self, rows: np.ndarray | int) -> np.ndarray:
        """The full vectors of ``rows`` (an index array, or one row)."""
        d = self.dim_short
        prefix = self.short[rows] * self.prefix_norm[rows][..., None]
        return np.concatenate([prefix, self.tail[rows]], axis=-1) if d < self.dim else prefix

    def full_scores(self, rows: np.ndarray | None, query: np.ndarray) -> np.ndarray:
        """Inner products of the full vectors of ``rows`` (None: every row) with ``query``."""
        d = self.dim_short
        sel = slice(0, self.n) if rows is None else rows
        scores = self.prefix_norm[sel] * (self.short[sel] @ query[:d])
        if d < self.dim:
            scores += self.tail[sel] @ query[d:]
        return scores

    def _grow(self, needed: int) -> None:
        cap = self.short.shape[0]
        if needed <= cap:
            return
        new_cap = max(needed, cap * 2)

        def grown(name: str, old: np.ndarray) -> np.ndarray:
            shape = (new_cap, *old.shape[1:])
            if old.dtype == object:
                fresh = np.empty(shape, dtype=object)
            elif name == "time":
                fresh = np.full(shape, np.nan, dtype=old.dtype)
            elif name == "rowid":
                fresh = np.full(shape, -1, dtype=old.dtype)
            else:
                fresh = np.zeros(shape, dtype=old.dtype)
            fresh[: self.n] = old[: self.n]
            return fresh

        for name in _ARRAYS:
            setattr(self, name, grown(name, getattr(self, name)))
        self.columns = {name: grown(name, old) for name, old in self.columns.items()}

    def _keys(self, count: int) -> np.ndarray:
        keys = np.arange(self.next_key, self.next_key + count, dtype=np.int64)
        self.next_key += count
        if self.next_key > self.row_of_key.shape[0]:
            grown = np.full(max(self.next_key, 2 * self.row_of_key.shape[0]), -1, dtype=np.int64)
            grown[: self.row_of_key.shape[0]] = self.row_of_key
            self.row_of_key = grown
        return keys

    def append_block(
        self,
        ids: list[str],
        full: np.ndarray,
        short: np.ndarray,
        columns: Mapping[str, np.ndarray],
        times: np.ndarray,
        rowids: np.ndarray | None = None,
    ) -> None:
        """Add a block of new rows given as columns (the bulk load; ids must be new): ``columns`` holds each
        column of :data:`.filters.MASKED_RECORD` as :func:`column_block` makes it."""
        k = len(ids)
        if k == 0:
            return
        self._grow(self.n + k)
        a, b = self.n, self.n + k
        self.short[a:b] = short
        self.prefix_norm[a:b] = np.linalg.norm(full[:, : self.dim_short], axis=1)
        self.tail[a:b] = full[:, self.dim_short :]
        for name, column in self.columns.items():
            column[a:b] = columns[name]
        self.time[a:b] = times
        self.rowid[a:b] = -1 if rowids is None else rowids
        keys = self._keys(k)
        self.key[a:b] = keys
        self.row_of_key[keys] = np.arange(a, b)
        self.kind_count += np.bincount(columns["kind"], minlength=len(KIND_CODES))
        for i, memory_id in enumerate(ids, start=a):
            self.row_of[memory_id] = i
        self.ids.extend(ids)
        self.n = b
        self._ann_add(keys, self.short[a:b])

    def add(self, rows: Iterable[IndexedRow]) -> None:
        rows = [r for r in rows if r.id not in self.row_of]
        if not rows:
            return
        self.append_block(
            [r.id for r in rows],
            np.stack([r.embedding for r in rows]),
            np.stack([r.embedding_short for r in rows]),
            {c.name: column_block(c, [r.values[c.name] for r in rows]) for c in MASKED_RECORD},
            np.array([r.time for r in rows], dtype=np.float64),
            np.array([r.rowid for r in rows], dtype=np.int64),
        )

    def remove(self, memory_id: str) -> None:
        """Swap-remove one row (no-op when absent)."""
        i = self.row_of.pop(memory_id, None)
        if i is None:
            return
        last = self.n - 1
        key = int(self.key[i])
        self.row_of_key[key] = -1
        self.kind_count[self.columns["kind"][i]] -= 1
        if i != last:
            moved = self.ids[last]
            self.ids[i] = moved
            self.row_of[moved] = i
            for arr in (*(getattr(self, name) for name in _ARRAYS), *self.columns.values()):
                arr[i] = arr[last]
            self.row_of_key[self.key[i]] = i
        self.ids.pop()
        for column in self.columns.values():
            if column.dtype == object:
                column[last] = None  # no reference kept past the live rows
        self.n = last
        if self.ann is not None:
            self.ann.remove(key)
        if self.ann_pending is not None:
            self.ann_pending.append(("remove", key))

    def _ann_add(self, keys: np.ndarray, short: np.ndarray) -> None:
        if self.ann is not None:
            self.ann.add(keys, short)
        if self.ann_pending is not None:
            self.ann_pending.append(("add", keys))

    def snapshot_for_ann(self) -> tuple[np.ndarray, np.ndarray]:
        """Keys and prefix vectors to build an ANN index from (copies); writes from now on are kept
        for :meth:`attach_ann`."""
        self.ann_pending = []
        return self.key[: self.n].copy(), self.short[: self.n].copy()

    def attach_ann(self, ann: PrefixAnn) -> None:
        """Replay the writes made since :meth:`snapshot_for_ann` on ``ann``, then search with it."""
        for op, what in self.ann_pending or []:
            if op == "add":
                keys = np.asarray(what)
                live = keys[self.row_of_key[keys] >= 0]
                if live.size:
                    ann.add(live, self.short[self.row_of_key[live]])
            else:
                ann.remove(int(what))  # type: ignore[call-overload]
        self.ann_pending = None
        self.ann = ann

    def search(
        self, flt: SearchFilter, query: np.ndarray, query_short: np.ndarray | None, limit: int, shortlist: int
    ) -> tuple[list[tuple[str, float]], int, dict[str, float]]:
        """Top ``limit`` (id, cosine) pairs; two-stage when ``query_short`` is given."""
        timings: dict[str, float] = {}
        n = self.n
        if n == 0 or limit <= 0:
            return [], 0, timings
        if flt.kinds is not None and not any(self.kind_count[KIND_CODES[k]] for k in flt.kinds):
            return [], 0, timings  # none of the user's memories is of these kinds
        mask = numpy_mask(flt, self)
        rows = np.flatnonzero(mask) if mask is not None else None
        if rows is not None and rows.size == 0:
            return [], 0, timings
        candidates_short = 0
        if query_short is not None:
            t0 = time.perf_counter()
            if rows is None and self.ann is not None and shortlist < n:
                keys = self.ann.search(query_short, shortlist)
                cand = self.row_of_key[keys[(keys >= 0) & (keys < self.next_key)]]
                cand = cand[cand >= 0][:shortlist]  # removed memories map to no row
            else:
                short = self.short[:n] if rows is None else self.short[rows]
                top = top_inner_products(short, np.ascontiguousarray(query_short, dtype=np.float32), shortlist)
                top.sort()  # row order: equal full scores (duplicate vectors) rank by row, however the scan ordered them
                cand = top if rows is None else rows[top]
            candidates_short = int(cand.size)
            timings["vector_short"] = (time.perf_counter() - t0) * 1000
            t1 = time.perf_counter()
            scores = self.full_scores(cand, query)
            timings["vector_full"] = (time.perf_counter() - t1) * 1000
        else:
            t1 = time.perf_counter()
            cand = np.arange(n) if rows is None else rows
            scores = self.full_scores(rows, query)
            timings["vector_full"] = (time.perf_counter() - t1) * 1000
        if scores.shape[0] == 0:
            return [], candidates_short, timings
        take = min(limit, scores.shape[0])
        best = np.argpartition(-scores, take - 1)[:take] if take < scores.shape[0] else np.arange(scores.shape[0])
        best = best[np.argsort(-scores[best], kind="stable")]
        return [(self.ids[int(cand[b])], float(scores[b])) for b in best], candidates_short, timings
