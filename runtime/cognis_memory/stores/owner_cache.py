"""Per-owner in-memory indexes, loaded on demand and evicted least recently used.

The embedded store keeps, per (tenant, user), a vector index (:mod:`.numpy_index`) and, for large
users, a keyword index (:mod:`.keyword_index`). Each kind lives in an :class:`OwnerCache` that
bounds the rows it holds over all owners (``max_rows``): past it, the least recently used owners
are dropped and reloaded on their next search. A loader runs *outside* the cache's lock (a large
user's first search does not stall every other user's), and its result is kept only when no
write reached that owner's rows while it ran (:meth:`OwnerCache.written` bumps a generation that
the loader's start and end are compared on); otherwise the caller is told to load again. One
load per owner runs at a time: a second caller waits for it rather than reading the rows twice.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from ..domain import Owner

T = TypeVar("T")

#: Loads of at least this many rows hand freed heap pages back: a trim walks the whole heap (5-10 ms
#: with the model loaded, measured), which a small user's load (a few megabytes of buffers, reused by
#: the next load) does not repay; a 10,000-row user's load and keyword build left about 13 MiB resident.
TRIM_MIN_ROWS = 5_000


def release_free_memory() -> None:
    """Hand the heap pages freed by a load back to the system (glibc's ``malloc_trim``): a load reads a
    user's rows through short-lived buffers, and without this the process keeps their pages resident."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None).malloc_trim(0)
        except (OSError, AttributeError):  # not glibc
            pass


class OwnerCache(Generic[T]):
    """``owner -> T``, at most ``max_rows`` rows (``size(T)``) over all owners but the last one loaded."""

    def __init__(self, size: Callable[[T], int], max_rows: int = 2_000_000) -> None:
        self.max_rows = max_rows
        self._size = size
        self._entries: OrderedDict[Owner, T] = OrderedDict()
        self._generation: dict[Owner, int] = {}  # owner -> the clock at its last write
        self._clock = 0
        self._loading = 0  # loads under way (generations are not pruned meanwhile)
        self._inflight: dict[Owner, threading.Event] = {}  # owner -> set when its load under way ends
        self._lock = threading.RLock()

    @property
    def lock(self) -> threading.RLock:
        """Held by every reader and writer of a cached entry (entries are not thread-safe themselves)."""
        return self._lock

    def get(self, owner: Owner, loader: Callable[[], T]) -> T:
        """The owner's entry, loaded by ``loader`` (outside the lock) when absent; loaded again while a
        write to this owner lands during a load. One load per owner at a time: a caller that finds the
        owner's load under way (the fact channel's search beside the main one, say) waits for it
        instead of reading the same rows again."""
        while True:
            with self._lock:
                entry = self._entries.get(owner)
                if entry is not None:
                    self._entries.move_to_end(owner)
                    return entry
                pending = self._inflight.get(owner)
                if pending is None:
                    done = self._inflight[owner] = threading.Event()
                    start = self._generation.get(owner, 0)
                    self._loading += 1
            if pending is not None:
                pending.wait()
                continue
            try:
                fresh = loader()
                if self._size(fresh) >= TRIM_MIN_ROWS:
                    release_free_memory()
                with self._lock:
                    entry = self._entries.get(owner)
                    if entry is not None:  # put there meanwhile (a load that began before a clear)
                        self._entries.move_to_end(owner)
                        return entry
                    if self._generation.get(owner, 0) == start:
                        self._entries[owner] = fresh
                        self._evict()
                        return fresh
            finally:
                with self._lock:
                    self._loading -= 1
                    if self._inflight.get(owner) is done:
                        del self._inflight[owner]
                done.set()

    def loaded(self, owner: Owner) -> T | None:
        """The loaded entry of this owner (now the most recently used), without loading it."""
        with self._lock:
            entry = self._entries.get(owner)
            if entry is not None:
                self._entries.move_to_end(owner)
            return entry

    def peek(self, owner: Owner) -> T | None:
        """The loaded entry of this owner, without loading it."""
        with self._lock:
            return self._entries.get(owner)

    def written(self, owner: Owner) -> None:
        """A write reached this owner's rows (call with :attr:`lock` held, after updating the entry)."""
        with self._lock:
            self._clock += 1
            self._generation[owner] = self._clock
            if not self._loading and len(self._generation) > 4 * max(len(self._entries), 1024):
                self._generation = {o: g for o, g in self._generation.items() if o in self._entries}

    def drop(self, owner: Owner) -> None:
        with self._lock:
            self._entries.pop(owner, None)
            self.written(owner)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._generation.clear()

    def _evict(self) -> None:
        total = sum(self._size(e) for e in self._entries.values())
        while total > self.max_rows and len(self._entries) > 1:
            _, old = self._entries.popitem(last=False)
            total -= self._size(old)
