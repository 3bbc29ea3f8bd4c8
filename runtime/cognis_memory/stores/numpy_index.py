"""In-memory exact vector search over one user's current memories (numpy).

The embedded store keeps one :class:`UserVectorIndex` per (tenant, user), loaded from
SQLite on first use with a query that selects only that owner's current rows, and kept in
step with every write. Filters become boolean masks evaluated before scoring, so a search
never sees another user's vectors or an old version. :class:`VectorIndexCache` bounds the
total number of rows held in memory (least recently used users are dropped and reloaded
on demand).
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from ..domain import Category, Memory, MemoryKind, Owner, Scope
from .base import SearchFilter

_SCOPES = list(Scope)
_CATEGORIES = list(Category)
_KINDS = list(MemoryKind)


@dataclass(slots=True)
class IndexedRow:
    """What the index needs of a memory: its id, vectors and filterable attributes."""

    id: str
    embedding: np.ndarray
    embedding_short: np.ndarray
    scope: Scope
    category: Category
    kind: MemoryKind
    session_id: str | None
    agent_id: str | None
    time: float  # effective time as epoch seconds, NaN when unknown

    @classmethod
    def from_memory(cls, memory: Memory) -> IndexedRow:
        assert memory.embedding is not None and memory.embedding_short is not None
        t = memory.effective_time
        return cls(
            id=memory.id,
            embedding=memory.embedding,
            embedding_short=memory.embedding_short,
            scope=memory.scope,
            category=memory.category,
            kind=memory.kind,
            session_id=memory.session_id,
            agent_id=memory.agent_id,
            time=t.timestamp() if t else math.nan,
        )


class UserVectorIndex:
    """Growable arrays of one user's current memories, searched exactly."""

    def __init__(self, dim: int, dim_short: int, capacity: int = 64) -> None:
        self.dim, self.dim_short = dim, dim_short
        self.n = 0
        self.ids: list[str] = []
        self.row_of: dict[str, int] = {}
        self.full = np.zeros((capacity, dim), dtype=np.float32)
        self.short = np.zeros((capacity, dim_short), dtype=np.float32)
        self.scope = np.zeros(capacity, dtype=np.int8)
        self.category = np.zeros(capacity, dtype=np.int8)
        self.kind = np.zeros(capacity, dtype=np.int8)
        self.time = np.full(capacity, np.nan, dtype=np.float64)
        self.session = np.empty(capacity, dtype=object)
        self.agent = np.empty(capacity, dtype=object)

    def _grow(self, needed: int) -> None:
        cap = self.full.shape[0]
        if needed <= cap:
            return
        new_cap = max(needed, cap * 2)
        for name in ("full", "short", "scope", "category", "kind", "time", "session", "agent"):
            old = getattr(self, name)
            shape = (new_cap, *old.shape[1:])
            fresh = np.full(shape, np.nan, dtype=old.dtype) if name == "time" else np.zeros(shape, dtype=old.dtype)
            if old.dtype == object:
                fresh = np.empty(shape, dtype=object)
            fresh[: self.n] = old[: self.n]
            setattr(self, name, fresh)

    def add(self, rows: Iterable[IndexedRow]) -> None:
        rows = [r for r in rows if r.id not in self.row_of]
        self._grow(self.n + len(rows))
        for r in rows:
            i = self.n
            self.ids.append(r.id)
            self.row_of[r.id] = i
            self.full[i] = r.embedding
            self.short[i] = r.embedding_short
            self.scope[i] = _SCOPES.index(r.scope)
            self.category[i] = _CATEGORIES.index(r.category)
            self.kind[i] = _KINDS.index(r.kind)
            self.time[i] = r.time
            self.session[i] = r.session_id
            self.agent[i] = r.agent_id
            self.n += 1

    def remove(self, memory_id: str) -> None:
        """Swap-remove one row (no-op when absent)."""
        i = self.row_of.pop(memory_id, None)
        if i is None:
            return
        last = self.n - 1
        if i != last:
            moved = self.ids[last]
            self.ids[i] = moved
            self.row_of[moved] = i
            for arr in (
                self.full,
                self.short,
                self.scope,
                self.category,
                self.kind,
                self.time,
                self.session,
                self.agent,
            ):
                arr[i] = arr[last]
        self.ids.pop()
        self.session[last] = None
        self.agent[last] = None
        self.n = last

    def mask(self, flt: SearchFilter) -> np.ndarray | None:
        """Boolean mask of rows the filter admits, or None when it admits all."""
        n = self.n
        m: np.ndarray | None = None

        def both(cond: np.ndarray) -> None:
            nonlocal m
            m = cond if m is None else (m & cond)

        if flt.scopes is not None:
            both(np.isin(self.scope[:n], [_SCOPES.index(s) for s in flt.scopes]))
        if flt.categories is not None:
            both(np.isin(self.category[:n], [_CATEGORIES.index(c) for c in flt.categories]))
        if flt.kinds is not None:
            both(np.isin(self.kind[:n], [_KINDS.index(k) for k in flt.kinds]))
        if flt.session_id is not None:
            ctx = self.scope[:n] == _SCOPES.index(Scope.CONTEXT)
            both(~ctx | (self.session[:n] == flt.session_id))
        if flt.agent_id is not None:
            both(self.agent[:n] == flt.agent_id)
        if flt.time_from is not None or flt.time_to is not None:
            t = self.time[:n]
            cond = ~np.isnan(t)
            if flt.time_from is not None:
                cond &= t >= flt.time_from.timestamp()
            if flt.time_to is not None:
                cond &= t <= flt.time_to.timestamp()
            both(cond)
        return m

    def search(
        self, flt: SearchFilter, query: np.ndarray, query_short: np.ndarray | None, limit: int, shortlist: int
    ) -> tuple[list[tuple[str, float]], int, dict[str, float]]:
        """Top ``limit`` (id, cosine) pairs; two-stage when ``query_short`` is given."""
        timings: dict[str, float] = {}
        n = self.n
        if n == 0 or limit <= 0:
            return [], 0, timings
        mask = self.mask(flt)
        rows = np.flatnonzero(mask) if mask is not None else None
        if rows is not None and rows.size == 0:
            return [], 0, timings
        candidates_short = 0
        if query_short is not None:
            t0 = time.perf_counter()
            short = self.short[:n] if rows is None else self.short[rows]
            s = short @ query_short
            take = min(shortlist, s.shape[0])
            top = np.argpartition(-s, take - 1)[:take] if take < s.shape[0] else np.arange(s.shape[0])
            cand = top if rows is None else rows[top]
            candidates_short = int(cand.size)
            timings["vector_short"] = (time.perf_counter() - t0) * 1000
            t1 = time.perf_counter()
            scores = self.full[cand] @ query
            timings["vector_full"] = (time.perf_counter() - t1) * 1000
        else:
            t1 = time.perf_counter()
            cand = np.arange(n) if rows is None else rows
            scores = (self.full[:n] if rows is None else self.full[rows]) @ query
            timings["vector_full"] = (time.perf_counter() - t1) * 1000
        take = min(limit, scores.shape[0])
        best = np.argpartition(-scores, take - 1)[:take] if take < scores.shape[0] else np.arange(scores.shape[0])
        best = best[np.argsort(-scores[best], kind="stable")]
        return [(self.ids[int(cand[b])], float(scores[b])) for b in best], candidates_short, timings


class VectorIndexCache:
    """Per-owner indexes, loaded on demand and evicted least-recently-used past ``max_rows``."""

    def __init__(self, dim: int, dim_short: int, max_rows: int = 2_000_000) -> None:
        self.dim, self.dim_short, self.max_rows = dim, dim_short, max_rows
        self._indexes: OrderedDict[Owner, UserVectorIndex] = OrderedDict()
        self._lock = threading.RLock()

    def get(self, owner: Owner, loader: Callable[[], Iterable[IndexedRow]]) -> UserVectorIndex:
        with self._lock:
            idx = self._indexes.get(owner)
            if idx is not None:
                self._indexes.move_to_end(owner)
                return idx
            idx = UserVectorIndex(self.dim, self.dim_short)
            idx.add(loader())
            self._indexes[owner] = idx
            self._evict()
            return idx

    def peek(self, owner: Owner) -> UserVectorIndex | None:
        """The loaded index of this owner, without loading it."""
        with self._lock:
            return self._indexes.get(owner)

    def drop(self, owner: Owner) -> None:
        with self._lock:
            self._indexes.pop(owner, None)

    def clear(self) -> None:
        with self._lock:
            self._indexes.clear()

    @property
    def lock(self) -> threading.RLock:
        return self._lock

    def _evict(self) -> None:
        total = sum(i.n for i in self._indexes.values())
        while total > self.max_rows and len(self._indexes) > 1:
            _, old = self._indexes.popitem(last=False)
            total -= old.n
