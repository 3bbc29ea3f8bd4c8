"""The retrieval pipeline, wiring the eight stages (see the modules of this package).

Measured additions sit between the stages when the recipe enables them (the
``default`` recipe does): speaker-aware queries after stage 1 (:mod:`.speakers`: names of
the user's speakers leave the embedded and keyword query and boost those speakers'
memories after fusion) and session-neighbour expansion after stage 4 (:mod:`.session_neighbours`),
then the role prior (:mod:`.role_prior`); current-state ordering (:mod:`.current_state`) follows the reranker.

Plain async Python over the store, encoder, reranker and cache protocols: no web framework
and no concrete backend. Every stage is timed into the request's :class:`StageRecorder`;
a stage whose dependency fails (BM25 backend, reranker) is skipped and the response lists
it under ``degraded``.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from ..caching.result_cache import Cache
from ..domain import Memory, Owner, utcnow
from ..encoding.batching import Priority
from ..encoding.encoder import MatryoshkaEncoder, normalise_rows
from ..errors import DependencyUnavailableError
from ..providers.base import Reranker
from ..stores.base import ScoredMemory, SearchFilter, VectorSearchResult
from ..stores.roles import KeywordSearch, MemoryVersions, VectorSearch
from ..telemetry.recorder import StageRecorder
from .config import RetrievalConfig
from .current_state import order_by_state
from .dedup import dedup_indices
from .fusion import min_max_normalise, weighted_rrf
from .query_analysis import QueryAnalysis, analyze_query, keyword_text, strip_names, without_state_words
from .role_prior import query_role, role_boosted
from .session_neighbours import neighbour_scores
from .speakers import SpeakerDirectory
from .temporal import blend, temporal_score


@dataclass(slots=True)
class SearchQuery:
    """A search: its text, what it may see (``filter``, the owner included) and how to answer."""

    filter: SearchFilter
    text: str
    limit: int = 10
    include_history: bool = False
    explain: bool = False
    now: datetime | None = None

    @property
    def owner(self) -> Owner:
        return self.filter.owner


@dataclass(slots=True)
class SearchHit:
    memory: Memory
    score: float
    scores: dict[str, float] = field(default_factory=dict)
    history: list[Memory] = field(default_factory=list)


@dataclass(slots=True)
class SearchResponse:
    hits: list[SearchHit]
    analysis: QueryAnalysis
    degraded: list[str] = field(default_factory=list)
    explain: dict[str, Any] | None = None


class RetrievalPipeline:
    def __init__(
        self,
        encoder: MatryoshkaEncoder,
        *,
        vectors: VectorSearch,
        keywords: KeywordSearch,
        memories: MemoryVersions,
        cache: Cache,
        config: RetrievalConfig,
        reranker: Reranker | None = None,
        reranker_timeout_s: float = 1.5,
    ) -> None:
        self.vectors, self.keywords, self.memories = vectors, keywords, memories
        self.encoder, self.cache, self.config = encoder, cache, config
        self.reranker, self.reranker_timeout_s = reranker, reranker_timeout_s
        self.speakers = SpeakerDirectory()

    async def _probe_speakers(self, owner: Owner, word: str) -> list[Memory]:
        """Memories that mention ``word`` (for the speaker directory); none when BM25 is down."""
        try:
            return [h.memory for h in await self.keywords.keyword_search(SearchFilter(owner=owner), word, limit=10)]
        except DependencyUnavailableError:
            return []

    async def embed_query(self, owner: Owner, text: str) -> tuple[np.ndarray, np.ndarray]:
        """The query's vectors: from the encoder's in-process query cache, else the shared cache, else the
        model (off the event loop, ahead of ingest work). Both caches are keyed by what the model sees
        of the text, so a query that only differs in case or spacing (a query whose speaker names were
        stripped, say) is not embedded again."""
        enc = self.encoder
        key = enc.input_key(text)
        full = enc.query_cache.get(owner.tenant_id, owner.user_id, key)
        if full is None:
            shared = await self.cache.get_query_embedding(owner, enc.name, key)
            if shared is not None and shared.shape == (enc.dim,):
                full = shared.astype(np.float32)
            else:
                full = (await enc.encode_async([text], Priority.QUERY))[0][0]
                await self.cache.set_query_embedding(owner, enc.name, key, full)
            enc.query_cache.put(owner.tenant_id, owner.user_id, key, full)
        return full, normalise_rows(full[None, : enc.dim_short])[0]

    def analyze(self, q: SearchQuery, config: RetrievalConfig | None = None) -> QueryAnalysis:
        """Stage 1 alone (cheap and deterministic): what the query asks about time and state."""
        cfg = config or self.config
        if not cfg.query_analysis:
            return QueryAnalysis("none")
        return analyze_query(
            q.text,
            q.now or utcnow(),
            default_window_days=cfg.temporal_window_days,
            state_from_tense=cfg.state_from_tense,
        )

    async def search(self, q: SearchQuery, rec: StageRecorder, config: RetrievalConfig | None = None) -> SearchResponse:
        cfg = config or self.config
        flt = q.filter
        with rec.stage("query_analysis"):
            analysis = self.analyze(q, cfg)
        degraded: list[str] = []
        candidates: dict[str, Memory] = {}
        explain: dict[str, dict[str, float]] = {}
        names: list[str] = []
        text = q.text  # what is embedded and sent to BM25
        if cfg.speaker_aware:
            with rec.stage("speaker_names"):
                names, probed = await self.speakers.names_in_query(
                    q.owner, q.text, lambda w: self._probe_speakers(q.owner, w), analysis.spans
                )
                if names:
                    text = strip_names(q.text, names, analysis.spans)
            rec.fields["speaker_probe"] = probed
        if cfg.current_state and analysis.state == "present":
            text = without_state_words(text)
        bm25_text = keyword_text(text, analysis) if cfg.keyword_cleanup else text

        # Stages 2 and 3 run concurrently.
        async def vector_side() -> VectorSearchResult | None:
            if not cfg.use_vector:
                return None
            with rec.stage("embed_query"):
                full, short = await self.embed_query(q.owner, text)
            result = await self.vectors.vector_search(
                flt, full, short if cfg.two_stage else None, limit=cfg.vector_k, shortlist=cfg.shortlist
            )
            rec.add_completed(result.timings_ms)  # timed inside the store, ended just now
            return result

        async def keyword_side() -> list[ScoredMemory] | None:
            if not cfg.use_bm25:
                return None
            with rec.stage("bm25"):
                try:
                    return await self.keywords.keyword_search(flt, bm25_text, limit=cfg.bm25_k)
                except DependencyUnavailableError as exc:
                    degraded.append(f"bm25:{exc.dependency}")
                    return None

        vec, kw = await asyncio.gather(vector_side(), keyword_side())
        lists: list[tuple[list[str], float]] = []
        if vec is not None:
            rec.fields["candidates_short"] = vec.candidates_short
            rec.fields["candidates_full"] = len(vec.hits)
            ids = []
            for rank, h in enumerate(vec.hits, start=1):
                candidates[h.memory.id] = h.memory
                ids.append(h.memory.id)
                explain.setdefault(h.memory.id, {}).update(vector=h.score, vector_rank=rank)
            lists.append((ids, cfg.weight_vector))
        if kw is not None:
            rec.fields["candidates_bm25"] = len(kw)
            ids = []
            for rank, h in enumerate(kw, start=1):
                candidates.setdefault(h.memory.id, h.memory)
                ids.append(h.memory.id)
                explain.setdefault(h.memory.id, {}).update(bm25=h.score, bm25_rank=rank)
            lists.append((ids, cfg.weight_bm25 if cfg.use_vector else 1.0))
        if cfg.use_vector and vec is not None and not cfg.use_bm25:
            lists[0] = (lists[0][0], 1.0)

        with rec.stage("rrf_fusion"):
            fused = weighted_rrf(lists, cfg.rrf_k)
            for doc, s in fused.items():
                explain[doc]["rrf"] = s
        if cfg.speaker_aware:
            self.speakers.observe(q.owner, candidates.values())

        base = fused  # fused score, adjusted by the speaker and context steps when enabled
        if names and cfg.speaker_boost > 0 and base:
            with rec.stage("speaker_boost"):
                wanted = {n.lower() for n in names}
                base = {
                    d: s * (1.0 + cfg.speaker_boost) if (candidates[d].speaker or "").strip().lower() in wanted else s
                    for d, s in base.items()
                }
        if cfg.context and cfg.context_weight > 0 and base:
            with rec.stage("context"):
                ctx = neighbour_scores(base, candidates, window_minutes=cfg.context_window_minutes)
                base = {d: s + cfg.context_weight * ctx[d] for d, s in base.items()}
                for d, c in ctx.items():
                    if c:
                        explain[d]["context"] = c
        role = query_role(q.text) if cfg.role_boost > 0 else None
        if role is not None and base:
            with rec.stage("role_prior"):
                base = role_boosted(base, candidates, role, cfg.role_boost)
        final = dict(base)

        if cfg.temporal_boost and analysis.is_temporal and final:
            with rec.stage("temporal_boost"):
                norm = min_max_normalise(base)
                for doc, fused_norm in norm.items():
                    mem = candidates[doc]
                    if analysis.temporal == "when":
                        t = 1.0 if mem.event_time is not None else 0.0
                        final[doc] = blend(fused_norm, t, cfg.when_weight)
                    else:
                        assert analysis.target_start and analysis.target_end and analysis.window_days
                        t = temporal_score(
                            mem.effective_time,
                            analysis.target_start,
                            analysis.target_end,
                            window_days=analysis.window_days,
                            floor=cfg.temporal_floor,
                        )
                        final[doc] = blend(fused_norm, t, cfg.temporal_weight)
                    explain[doc].update(fused_norm=fused_norm, temporal=t, final=final[doc])
        ranked = sorted(final, key=lambda d: (-final[d], d))

        if cfg.dedup and ranked:
            with rec.stage("dedup"):
                # Only the head can be returned or reranked: dedup a window twice that size, and the
                # whole list only when the window loses so much that the head would run short.
                need = max(q.limit, cfg.rerank_top if cfg.rerank and self.reranker is not None else 0)
                window = ranked if len(ranked) <= 2 * need else ranked[: 2 * need]
                keep = dedup_indices([candidates[d].embedding for d in window], cfg.dedup_threshold)
                if len(keep) < need and len(window) < len(ranked):
                    window = ranked
                    keep = dedup_indices([candidates[d].embedding for d in window], cfg.dedup_threshold)
                rec.fields["dedup_removed"] = len(window) - len(keep)
                ranked = [window[i] for i in keep]

        if cfg.rerank and self.reranker is not None and ranked:
            with rec.stage("cross_encoder"):
                ranked = await self._rerank(q.text, ranked, candidates, final, explain, cfg, degraded)

        if cfg.current_state and analysis.state != "none" and ranked:
            with rec.stage("current_state"):
                ranked = self._order_by_state(ranked, candidates, final, explain, analysis, cfg)

        top = ranked[: q.limit]
        hits = [SearchHit(candidates[d], final[d], explain.get(d, {}) if q.explain else {}) for d in top]

        if cfg.history and (analysis.history or q.include_history) and hits:
            with rec.stage("version_chain"):
                # a first version has no earlier versions: no store round trip for it
                walk = [hit for hit in hits if hit.memory.version > 1 or hit.memory.replaces_id is not None]
                chains = await asyncio.gather(*(self.memories.get_chain(q.owner, hit.memory.id) for hit in walk))
                for hit, chain in zip(walk, chains, strict=True):
                    hit.history = [m for m in chain if m.version < hit.memory.version]

        rec.fields.update(results_final=len(hits), temporal_query=analysis.is_temporal, history_query=analysis.history)
        if names:
            rec.fields["speaker_names"] = len(names)
        for d in degraded:
            rec.mark_degraded(d)
        response = SearchResponse(hits=hits, analysis=analysis, degraded=degraded)
        if q.explain:
            response.explain = {
                "analysis": analysis.to_dict()
                | {"speaker_names": names, "search_text": text, "keyword_text": bm25_text},
                "config": cfg.model_dump(),
                "stage_durations": rec.stage_durations(),
                "candidates": {k: v for k, v in rec.fields.items() if k.startswith("candidates")},
            }
        return response

    @staticmethod
    def _order_by_state(
        ranked: list[str],
        candidates: dict[str, Memory],
        final: dict[str, float],
        explain: dict[str, dict[str, float]],
        analysis: QueryAnalysis,
        cfg: RetrievalConfig,
    ) -> list[str]:
        """Current-state ordering (:mod:`.current_state`); scores stay non-increasing down the ranking:
        a statement moved up takes the score of the one it now precedes."""
        assert analysis.state in ("present", "history")
        out, below = order_by_state(
            ranked, candidates, analysis.state, head=cfg.state_head, min_similarity=cfg.state_similarity,
            min_gap=timedelta(minutes=cfg.state_gap_minutes), same_speaker=cfg.state_same_speaker,
        )  # fmt: skip
        if not below:
            return ranked
        for d, first in below.items():
            final[first] = max(final[first], final[d])
            explain.setdefault(d, {})["state_rank_below"] = float(out.index(first) + 1)
        for prev, d in itertools.pairwise(out):
            final[d] = min(final[d], final[prev])
        return out

    async def _rerank(
        self,
        text: str,
        ranked: list[str],
        candidates: dict[str, Memory],
        final: dict[str, float],
        explain: dict[str, dict[str, float]],
        cfg: RetrievalConfig,
        degraded: list[str],
    ) -> list[str]:
        assert self.reranker is not None
        head, tail = ranked[: cfg.rerank_top], ranked[cfg.rerank_top :]
        try:
            scores = await asyncio.wait_for(
                self.reranker.rerank(text, [candidates[d].content for d in head]), timeout=self.reranker_timeout_s
            )
        except (DependencyUnavailableError, TimeoutError):
            degraded.append("reranker")
            return ranked
        if len(scores) != len(head):
            degraded.append("reranker")
            return ranked
        rr = min_max_normalise(dict(zip(head, map(float, scores), strict=True)))
        prev = min_max_normalise({d: final[d] for d in head})
        for d in head:
            final[d] = cfg.rerank_weight * rr[d] + (1 - cfg.rerank_weight) * prev[d]
            explain.setdefault(d, {}).update(rerank=rr[d])
        return sorted(head, key=lambda d: (-final[d], d)) + tail
