"""The retrieval pipeline behind the shared search-result cache.

:class:`CachedRetrieval` has the pipeline's ``search``: a search whose answer is
cached (same owner, text, filter, options, configuration and hour, for relative queries) is
answered from the cache, with its query analysis recomputed (cheap and deterministic); any other
is run and, unless degraded or explained, stored. Writes invalidate the owner's entries (the
ingest pipeline and the service do that on the cache itself).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import fields
from datetime import datetime
from typing import Any

from ..caching.result_cache import Cache, NullCache
from ..domain import utcnow
from ..search_filter import SearchFilter
from ..serialization import memory_from_dict, memory_to_dict
from ..telemetry.recorder import StageRecorder
from .pipeline import RetrievalPipeline, SearchHit, SearchQuery, SearchResponse
from .query_analysis import QueryAnalysis
from .recipes import RetrievalConfig

#: The form of a cached answer, part of every key: entries of another form (written by an earlier release, e.g.
#: memories without their ``chain_id``, form 1, or with a fact's ``superseded_sources`` in its metadata, form 2)
#: are never read, they expire unread.
CACHED_FORM = 3


class CachedRetrieval:
    def __init__(self, pipeline: RetrievalPipeline, cache: Cache) -> None:
        self.pipeline, self.cache = pipeline, cache

    async def search(self, q: SearchQuery, rec: StageRecorder, config: RetrievalConfig | None = None) -> SearchResponse:
        # no key for an explained search, nor without a cache (no key to make, no answer to serialise)
        cacheable = not (q.explain or isinstance(self.cache, NullCache))
        key = search_cache_key(q, config or self.pipeline.config) if cacheable else None
        if key is not None:
            cached = await self.cache.get_search(q.owner, key)
            if cached is not None:
                rec.fields["cache"] = "hit"
                return response_from_cache(cached, self.pipeline.analyze(q, config))
        response = await self.pipeline.search(q, rec, config)
        if key is not None and not response.degraded:
            await self.cache.set_search(q.owner, key, response_to_cache(response))
        return response


def search_cache_key(q: SearchQuery, cfg: RetrievalConfig) -> str:
    """A digest of everything that determines a search's answer (the owner is in the cache key): what the
    search asks, which its :class:`~.query_analysis.AnalysedQuery` is made from. The key is made before the
    query is analysed, as the speaker names of the analysis may need a probe of the store that an answer
    from the cache must not wait for."""
    now = q.now or utcnow().replace(minute=0, second=0, microsecond=0)  # relative queries: hourly
    parts = {
        "text": q.text,
        "limit": q.limit,
        **filter_key_parts(q.filter),
        "history": q.include_history,
        "now": now.isoformat(),
        "config": cfg.model_dump(),
        "form": CACHED_FORM,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def filter_key_parts(flt: SearchFilter) -> dict[str, Any]:
    """Every field of the filter but the owner (which the cache key holds apart), as JSON-ready values: sets
    sorted, times in ISO 8601, no filter (None) apart from an empty set. Derived from the dataclass, so a new
    filter field is part of the key without anyone remembering to add it (a field left out would serve one
    filter's cached answer to another)."""
    out: dict[str, Any] = {}
    for f in fields(flt):
        if f.name == "owner":
            continue
        value = getattr(flt, f.name)
        if isinstance(value, frozenset):
            value = sorted(value)
        elif isinstance(value, datetime):
            value = value.isoformat()
        out[f.name] = value
    return out


def response_to_cache(response: SearchResponse) -> dict[str, Any]:
    return {
        "hits": [
            {
                "memory": memory_to_dict(h.memory),
                "score": h.score,
                "history": [memory_to_dict(m) for m in h.history],
            }
            for h in response.hits
        ]
    }


def response_from_cache(cached: dict[str, Any], analysis: QueryAnalysis) -> SearchResponse:
    """A cached answer with its query analysis."""
    hits = [
        SearchHit(
            memory=memory_from_dict(h["memory"]),
            score=float(h["score"]),
            history=[memory_from_dict(m) for m in h["history"]],
        )
        for h in cached["hits"]
    ]
    return SearchResponse(hits=hits, analysis=analysis)
