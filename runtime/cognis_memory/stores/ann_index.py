"""The approximate prefix index of a large user's vector index: USearch's HNSW graph.

Chosen on measured recall and speed (docs/benchmarks.md, "Vector stage at scale";
``scripts/bench_ann.py``): among the maintained libraries with wheels for this platform, USearch
answers a 200-candidate shortlist over a million 128-dimension prefixes in about a millisecond with
recall@10 of the final (rescored) top 10 at the exact scan's, builds on every core, and, unlike
faiss's HNSW, removes keys, which the store needs to follow deletes and new versions. It holds its
own copy of the prefix vectors (float32: the int8 copy lost recall on these vectors).

:func:`build_prefix_ann` returns None when the library is not installed: the store then keeps the
exact scan (correct, slower for very large users).
"""

from __future__ import annotations

import logging

import numpy as np

log = logging.getLogger(__name__)


class USearchPrefixIndex:
    """HNSW (inner product) over unit prefix vectors, keyed by the vector index's stable row keys."""

    def __init__(
        self, dim: int, *, connectivity: int = 16, expansion_add: int = 128, expansion_search: int = 256
    ) -> None:
        from usearch.index import Index

        self._index = Index(
            ndim=dim, metric="ip", dtype="f32", connectivity=connectivity,
            expansion_add=expansion_add, expansion_search=expansion_search,
        )  # fmt: skip

    def __len__(self) -> int:
        return len(self._index)

    def add(self, keys: np.ndarray, vectors: np.ndarray, *, threads: int = 1) -> None:
        if len(keys):
            self._index.add(np.asarray(keys, dtype=np.uint64), np.ascontiguousarray(vectors), threads=threads)

    def remove(self, key: int) -> None:
        self._index.remove(int(key))

    def search(self, query: np.ndarray, k: int) -> np.ndarray:
        return self._index.search(np.ascontiguousarray(query), k, threads=1).keys.astype(np.int64)


def build_prefix_ann(keys: np.ndarray, vectors: np.ndarray, *, threads: int) -> USearchPrefixIndex | None:
    """An index of ``vectors`` under ``keys`` built with ``threads`` threads, or None without USearch."""
    try:
        index = USearchPrefixIndex(vectors.shape[1])
    except ImportError:
        log.warning("usearch is not installed: large users' vector searches stay exact scans")
        return None
    index.add(keys, vectors, threads=threads)
    return index
