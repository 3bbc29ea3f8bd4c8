"""The approximate prefix index of a large user's vector index: faiss's HNSW graph.

Chosen on measured recall and speed (docs/benchmarks.md, "Vector stage at scale";
``scripts/bench_ann.py``): among the maintained libraries with wheels for this platform, faiss's
``IndexHNSWFlat`` (inner product, M = 16, efConstruction = 128) kept recall@10 of the final,
rescored top 10 at 0.98 of the exact scan's at 200,000 vectors with a shortlist of 200, searched in
1-2 CPU-ms, and built in half the CPU time of USearch's HNSW at the same settings; faiss's IVF lists
built fastest but lost recall (0.905 at 16 of 1,024 lists). efSearch is 1,024: at 1,000,000
vectors of one user 256 gave recall@10 0.949, short of the 0.98 it is held to; at 200,000, 256 / 512 / 1,024
gave 0.991 / 0.9985 / 1.0 for 0.85 / 1.25 / 2.05 CPU-ms a search, against 16 for the exact scan.
The graph holds its own copy of the prefix vectors (float32).

An HNSW graph cannot delete: a memory that leaves the user's index (a new version, a delete) stays
in the graph, its hits are dropped by the vector index (its key maps to no row any more), and the
search asks for as many more candidates as were removed, up to twice the shortlist; past
``STALE_FRACTION`` removed the store builds the graph again.

:func:`build_prefix_ann` returns None when faiss is not installed: the store then keeps the exact
scan (correct, slower for very large users).
"""

from __future__ import annotations

import logging
import threading

import numpy as np

log = logging.getLogger(__name__)

#: Removed keys, as a share of the graph, past which the store rebuilds it.
STALE_FRACTION = 0.25
_omp = threading.Lock()  # faiss's OpenMP thread count is process-wide


class FaissPrefixIndex:
    """HNSW (inner product) over unit prefix vectors, keyed by the vector index's stable row keys."""

    def __init__(self, dim: int, *, m: int = 16, ef_construction: int = 128, ef_search: int = 1024) -> None:
        import faiss

        self._faiss = faiss
        hnsw = faiss.IndexHNSWFlat(dim, m, faiss.METRIC_INNER_PRODUCT)
        hnsw.hnsw.efConstruction = ef_construction
        hnsw.hnsw.efSearch = ef_search
        self._hnsw = hnsw  # the id map does not own it: keep it alive
        self._index = faiss.IndexIDMap(hnsw)
        self.added = 0
        self.removed = 0

    def __len__(self) -> int:
        return self.added - self.removed

    @property
    def stale(self) -> bool:
        return self.removed > STALE_FRACTION * max(self.added, 1)

    def add(self, keys: np.ndarray, vectors: np.ndarray, *, threads: int = 1) -> None:
        if not len(keys):
            return
        with _omp:
            self._faiss.omp_set_num_threads(threads)
            try:
                self._index.add_with_ids(
                    np.ascontiguousarray(vectors, dtype=np.float32), np.asarray(keys, dtype=np.int64)
                )
            finally:
                self._faiss.omp_set_num_threads(1)
        self.added += len(keys)

    def remove(self, key: int) -> None:
        self.removed += 1  # the graph keeps it; the vector index no longer maps its key to a row

    def search(self, query: np.ndarray, k: int) -> np.ndarray:
        want = k + min(self.removed, k)
        return self._index.search(np.ascontiguousarray(query[None, :], dtype=np.float32), want)[1][0]


def build_prefix_ann(keys: np.ndarray, vectors: np.ndarray, *, threads: int) -> FaissPrefixIndex | None:
    """An index of ``vectors`` under ``keys`` built with ``threads`` threads, or None without faiss."""
    try:
        index = FaissPrefixIndex(vectors.shape[1])
    except ImportError:
        log.warning("faiss is not installed: large users' vector searches stay exact scans")
        return None
    index.add(keys, vectors, threads=threads)
    return index
