"""The OpenSearch-only store's vector-search and keyword-search roles, both over its memories index.

* Vectors: ``embedding_short`` and ``embedding`` are ``knn_vector`` fields (HNSW, engine
  ``lucene``, ``cosinesimil``; the native faiss/nmslib engines need JNI libraries). Two-stage
  search is one request: a ``knn`` query on ``embedding_short`` for ``shortlist`` candidates with
  every filter *inside* the knn clause (Lucene's efficient filtering: exact search when the
  filtered set is small, filtered HNSW otherwise), then a ``rescore`` of that window with a
  ``knn_score`` script on the full ``embedding``. The returned hits carry their full vectors,
  and the cosine reported is recomputed exactly with numpy from them. Without a short query
  vector the search is one exact ``script_score`` over the owner's filtered documents.
  Timings: ``vector_short`` is the whole request (both stages run server-side), ``vector_full``
  the local exact scoring.
* Keyword search: the same ``match``-only BM25 query and ``bool.filter`` clauses as the dual
  store's keyword index (:mod:`.keyword_index`).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ...search_filter import SearchFilter
from ..filters import opensearch_filter
from ..records import OPENSEARCH, memory_from_row
from ..values import ScoredMemory, VectorSearchResult
from .documents import knn_score, match_clause, match_text
from .memories import OpenSearchMemories


class OpenSearchVectorSearch:
    """The :class:`~cognis_memory.stores.roles.VectorSearch` of an OpenSearch-only store."""

    def __init__(self, memories: OpenSearchMemories) -> None:
        self.memories = memories

    async def vector_search(
        self,
        flt: SearchFilter,
        query: np.ndarray,
        query_short: np.ndarray | None,
        *,
        limit: int,
        shortlist: int,
    ) -> VectorSearchResult:
        if limit <= 0:
            return VectorSearchResult(hits=[])
        q = np.asarray(query, dtype=np.float32)
        size = limit + 3  # room for hits dropped as superseded
        knn_filter = {"bool": {"filter": opensearch_filter(flt)}}
        body: dict[str, Any]
        if query_short is not None:
            k = max(shortlist, size)
            body = {
                "size": size,
                "_source": {"excludes": ["embedding_short_b64"]},
                "track_total_hits": True,
                "query": {"knn": {"embedding_short": {"vector": np.asarray(query_short, dtype=float).tolist(), "k": k, "filter": knn_filter}}},
                "rescore": {
                    "window_size": k,
                    "query": {
                        "rescore_query": {"script_score": {"query": {"match_all": {}}, "script": knn_score("embedding", q)}},
                        "query_weight": 0.0,
                        "rescore_query_weight": 1.0,
                    },
                },
            }  # fmt: skip
        else:
            body = {
                "size": size,
                "_source": {"excludes": ["embedding_short_b64"]},
                "track_total_hits": False,
                "query": {"script_score": {"query": knn_filter, "script": knn_score("embedding", q)}},
            }
        t0 = time.perf_counter()
        found, drop = await self.memories.search_current(flt.owner, body)
        t_req = (time.perf_counter() - t0) * 1000
        t1 = time.perf_counter()
        memories = [
            memory_from_row(h["_source"], OPENSEARCH) for h in found["hits"] if h["_source"]["memory_id"] not in drop
        ]
        qn = q / (np.linalg.norm(q) or 1.0)
        scored = []
        for m in memories:
            assert m.embedding is not None
            e = m.embedding
            scored.append(ScoredMemory(m, float(e @ qn / (np.linalg.norm(e) or 1.0))))
        scored.sort(key=lambda s: -s.score)
        t_full = (time.perf_counter() - t1) * 1000
        if query_short is not None:
            return VectorSearchResult(
                hits=scored[:limit],
                candidates_short=int(found["total"]["value"]),
                timings_ms={"vector_short": t_req, "vector_full": t_full},
            )
        return VectorSearchResult(hits=scored[:limit], candidates_short=0, timings_ms={"vector_full": t_req + t_full})


class OpenSearchKeywordSearch:
    """The :class:`~cognis_memory.stores.roles.KeywordSearch` of an OpenSearch-only store."""

    def __init__(self, memories: OpenSearchMemories) -> None:
        self.memories = memories

    async def keyword_search(self, flt: SearchFilter, text: str, *, limit: int) -> list[ScoredMemory]:
        words = match_text(text)
        if not words or limit <= 0:
            return []
        body = {
            "size": limit + 3,
            "_source": {"excludes": ["embedding_short_b64"]},
            "track_total_hits": False,
            "query": {"bool": {"must": [match_clause(words)], "filter": opensearch_filter(flt)}},
        }
        found, drop = await self.memories.search_current(flt.owner, body)
        out = [
            ScoredMemory(memory_from_row(h["_source"], OPENSEARCH), float(h["_score"]))
            for h in found["hits"]
            if h["_source"]["memory_id"] not in drop
        ]
        return out[:limit]
