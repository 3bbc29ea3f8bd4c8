"""The retrieval pipeline: candidate generation, then the registered stages.

Candidate generation is fixed: query analysis (stage 1), the names of the user's speakers in the
query when the recipe is speaker-aware (:mod:`.speakers`: they leave the embedded and keyword
query), which together make the query's :class:`~.query_analysis.AnalysedQuery` (every cut of its
text, made once; the stages read it), vector search (stage 2) and BM25 (stage 3) concurrently,
weighted RRF (stage 4). What
follows fusion is the list of registered stages of :data:`~.registry.RETRIEVAL_STAGES`, run in that
order (:mod:`.stages`): the speaker boost, conversation context (:mod:`.conversation_context`), the
role prior, temporal boosting (stage 5), dedup (stage 6), the cross-encoder (stage 7), current-state
ordering and the version chain (stage 8), each deciding from the recipe and the query whether it runs.

Plain async Python over the store, encoder, reranker and cache protocols: no web framework
and no concrete backend. Every stage is timed into the request's :class:`StageRecorder`
(``<stage>_ms``; :func:`stage_names` lists them all); a stage whose dependency fails (BM25
backend, reranker) is skipped and the response lists it under ``degraded``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from ..caching.result_cache import Cache
from ..domain import Memory, MemoryKind, Owner, utcnow
from ..encoding.batching import Priority
from ..encoding.encoder import MatryoshkaEncoder, normalise_rows
from ..errors import DependencyUnavailableError
from ..providers.base import Reranker
from ..search_filter import SearchFilter
from ..stores.roles import KeywordSearch, MemoryVersions, VectorSearch
from ..stores.values import ScoredMemory, VectorSearchResult
from ..telemetry.recorder import StageRecorder
from .fusion import in_rank_order, tie_order, weighted_rrf
from .query_analysis import QueryAnalysis, analysed_query, analyze_query, name_candidates
from .recipes import RetrievalConfig
from .registry import RETRIEVAL_STAGES
from .search_types import SearchHit, SearchQuery, SearchResponse
from .speakers import SpeakerDirectory
from .stages import PHASES, Phase, SearchState, StageLoader, StageResources, load_stages

#: The stages of candidate generation, in pipeline order (``vector_short``/``vector_full`` are timed
#: inside the store); the registered stages follow them.
CANDIDATE_STAGES: tuple[str, ...] = (
    "query_analysis", "speaker_names", "embed_query", "vector_short", "vector_full", "bm25", "rrf_fusion",
)  # fmt: skip


def stage_names(registry: Mapping[str, StageLoader] = RETRIEVAL_STAGES) -> tuple[str, ...]:
    """Every stage a search can time (``<name>_ms``, the ``Stage`` dimension of ``StageLatency``), in order."""
    return CANDIDATE_STAGES + tuple(registry)


def fact_filter(flt: SearchFilter) -> SearchFilter | None:
    """The search's filter narrowed to extracted facts, for the fact channel; None when the search
    excludes facts, or asks for facts only (its main list is then the fact channel already)."""
    if flt.kinds is not None and (MemoryKind.FACT not in flt.kinds or flt.kinds == {MemoryKind.FACT}):
        return None
    return replace(flt, kinds=frozenset({MemoryKind.FACT}))


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
        stages: Mapping[str, StageLoader] = RETRIEVAL_STAGES,
    ) -> None:
        """``stages``: the registered stages to run after fusion, ``name -> loader`` in order (:mod:`.registry`)."""
        self.vectors, self.keywords, self.memories = vectors, keywords, memories
        self.encoder, self.cache, self.config = encoder, cache, config
        self.speakers = SpeakerDirectory(keywords)
        self.stages = load_stages(stages, StageResources(memories, reranker, reranker_timeout_s))

    async def embed_query(self, owner: Owner, text: str) -> tuple[np.ndarray, np.ndarray]:
        """The query's vectors: from the encoder's in-process query cache, else the shared cache, else the
        model (off the event loop, ahead of ingest work), after the model's query instruction if one is set
        (``embedding_query_prefix``). Both caches are keyed by what the model sees
        of the text, so a query that only differs in case or spacing (a query whose speaker names were
        stripped, say) is not embedded again."""
        enc = self.encoder
        text = enc.query_text(text)
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
        known: list[str] = []
        if cfg.speaker_aware:
            with rec.stage("speaker_names"):
                known, probed = await self.speakers.known_after_probe(q.owner, name_candidates(q.text, analysis.spans))
            rec.fields["speaker_probe"] = probed
        query = analysed_query(
            q.text, analysis, known, drop_state_words=cfg.current_state, keyword_cleanup=cfg.keyword_cleanup
        )
        degraded: list[str] = []
        candidates: dict[str, Memory] = {}
        explain: dict[str, dict[str, float]] = {}

        fact_flt = fact_filter(flt) if cfg.use_vector and cfg.fact_channel else None
        facts: VectorSearchResult | None = None

        # Stages 2 and 3 run concurrently (and the fact channel beside stage 2).
        async def vector_side() -> VectorSearchResult | None:
            nonlocal facts
            if not cfg.use_vector:
                return None
            with rec.stage("embed_query"):
                full, short = await self.embed_query(q.owner, query.search_text)
            main = self.vectors.vector_search(
                flt, full, short if cfg.two_stage else None, limit=cfg.vector_k, shortlist=cfg.shortlist
            )
            if fact_flt is None:
                result = await main
            else:
                result, facts = await asyncio.gather(
                    main, self.vectors.vector_search(fact_flt, full, None, limit=cfg.fact_k, shortlist=cfg.fact_k)
                )
            rec.add_completed(result.timings_ms)  # timed inside the store, ended just now
            return result

        async def keyword_side() -> list[ScoredMemory] | None:
            if not cfg.use_bm25:
                return None
            with rec.stage("bm25"):
                try:
                    return await self.keywords.keyword_search(flt, query.keyword_text, limit=cfg.bm25_k)
                except DependencyUnavailableError as exc:
                    degraded.append(f"bm25:{exc.dependency}")
                    return None

        vec, kw = await asyncio.gather(vector_side(), keyword_side())

        def ranked(hits: list[ScoredMemory], source: str) -> list[str]:
            """One source's ids in rank order; its hits join the candidates and its score and rank the explain."""
            ids = []
            for rank, h in enumerate(in_rank_order(hits), start=1):
                candidates.setdefault(h.memory.id, h.memory)
                ids.append(h.memory.id)
                explain.setdefault(h.memory.id, {}).update({source: h.score, f"{source}_rank": rank})
            return ids

        lists: list[tuple[list[str], float]] = []
        if vec is not None:
            rec.fields["candidates_short"] = vec.candidates_short
            rec.fields["candidates_full"] = len(vec.hits)
            lists.append((ranked(vec.hits, "vector"), cfg.weight_vector))
        if kw is not None:
            rec.fields["candidates_bm25"] = len(kw)
            lists.append((ranked(kw, "bm25"), cfg.weight_bm25 if cfg.use_vector else 1.0))
        if cfg.use_vector and vec is not None and not cfg.use_bm25:
            lists[0] = (lists[0][0], 1.0)
        if facts is not None and facts.hits:
            rec.fields["candidates_facts"] = len(facts.hits)
            lists.append((ranked(facts.hits, "fact"), cfg.weight_facts))

        with rec.stage("rrf_fusion"):
            fused = weighted_rrf(lists, cfg.rrf_k)
            for doc, s in fused.items():
                explain[doc]["rrf"] = s
        if cfg.speaker_aware:
            self.speakers.observe(q.owner, candidates.values())

        state = SearchState(
            query=q, analysed=query, cfg=cfg, rec=rec, candidates=candidates, explain=explain,
            degraded=degraded, fused=fused, ties=tie_order(candidates, explain),
        )  # fmt: skip
        if q.explain:  # the place each stage's moves start from
            for rank, d in enumerate(state.by_score(fused, fused), start=1):
                explain[d]["rrf_rank"] = rank
        await self._run_stages(state)
        hits = state.hits

        rec.fields.update(results_final=len(hits), temporal_query=analysis.is_temporal, history_query=analysis.history)
        if query.speaker_names:
            rec.fields["speaker_names"] = len(query.speaker_names)
        for d in degraded:
            rec.mark_degraded(d)
        response = SearchResponse(hits=hits, analysis=analysis, degraded=degraded)
        if q.explain:
            response.explain = {
                "analysis": analysis.to_dict()
                | {
                    "speaker_names": list(query.speaker_names),
                    "search_text": query.search_text,
                    "keyword_text": query.keyword_text,
                },
                "config": cfg.model_dump(),
                "stage_durations": rec.stage_durations(),
                "candidates": {k: v for k, v in rec.fields.items() if k.startswith("candidates")},
            }
        return response

    async def _run_stages(self, state: SearchState) -> None:
        """The registered stages in order, each timed when it runs; every phase's data is made when
        the first stage of that phase comes, and the rest at the end (the answers always)."""
        phase = 0
        for stage in self.stages:
            while PHASES[phase] != stage.phase:
                phase += 1
                self._enter(state, PHASES[phase])
            if stage.enabled(state):
                before = state.standing(stage.phase) if state.query.explain else None
                with state.rec.stage(stage.name):
                    await stage.apply(state)
                if before is not None:
                    state.record_moves(stage.name, before, state.standing(stage.phase))
        for later in PHASES[phase + 1 :]:
            self._enter(state, later)

    @staticmethod
    def _enter(s: SearchState, phase: Phase) -> None:
        """Make the data of ``phase`` from the previous phase's (see :mod:`.stages`)."""
        if phase == "final":
            s.final = dict(s.fused)
        elif phase == "ranking":
            s.ranked = s.by_score(s.final, s.final)
        elif phase == "hits":
            explain = s.query.explain
            s.hits = [
                SearchHit(
                    s.candidates[d], s.final[d], s.explain.get(d, {}) if explain else {},
                    moves=list(s.moves.get(d, ())) if explain else [],
                )
                for d in s.ranked[: s.query.limit]
            ]  # fmt: skip
