"""Retrieval configuration and named recipes.

Every weight, k, window and threshold of the eight stages is a field here. The defaults
are the formulas of ARCHITECTURE §5. A *recipe* is a named configuration the runtime
exposes (``cognis-memory recipes`` lists them; the benchmark scripts run them side by
side as ablations and baselines).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class RetrievalConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # stage 1: query analysis
    query_analysis: bool = Field(True, description="Detect temporal and history intent in the query.")
    # stage 2: vector search
    use_vector: bool = True
    two_stage: bool = Field(True, description="Prefix shortlist, then full-vector rescoring.")
    shortlist: int = Field(200, ge=1, description="Prefix candidates rescored with full vectors.")
    vector_k: int = Field(50, ge=1, description="Vector hits passed to fusion.")
    # stage 3: BM25
    use_bm25: bool = True
    bm25_k: int = Field(50, ge=1, description="BM25 hits passed to fusion.")
    # stage 4: weighted reciprocal rank fusion
    rrf_k: float = Field(10.0, gt=0, description="k in 1 / (k + rank).")
    weight_vector: float = Field(0.70, ge=0)
    weight_bm25: float = Field(0.30, ge=0)
    # stage 5: temporal boosting
    temporal_boost: bool = True
    temporal_weight: float = Field(0.40, ge=0, le=1, description="final = (1-w) * fused_norm + w * temporal.")
    temporal_floor: float = Field(0.10, ge=0, le=1, description="Lowest temporal score.")
    temporal_window_days: float = Field(30.0, gt=0, description="Default window when the query names none.")
    # stage 6: dedup
    dedup: bool = True
    dedup_threshold: float = Field(0.99, gt=0, le=1)
    # stage 7: cross-encoder
    rerank: bool = Field(True, description="Use the configured reranker, if any.")
    rerank_top: int = Field(30, ge=1, description="Candidates sent to the reranker.")
    rerank_weight: float = Field(1.0, ge=0, le=1, description="Blend of reranker score with the previous order.")
    # stage 8: history
    history: bool = True
    when_weight: float = Field(
        0.15, ge=0, le=1, description="'When did ...' queries: weight of having a resolved event time."
    )

    def with_overrides(self, **overrides: object) -> RetrievalConfig:
        return self.model_copy(update={k: v for k, v in overrides.items() if v is not None})


_DEFAULT = RetrievalConfig()

RECIPES: dict[str, RetrievalConfig] = {
    "bm25": RetrievalConfig(
        use_vector=False, query_analysis=False, temporal_boost=False, dedup=False, rerank=False, history=False
    ),
    "vector": RetrievalConfig(
        use_bm25=False, two_stage=False, query_analysis=False, temporal_boost=False, dedup=False, rerank=False,
        history=False,
    ),
    "vector_two_stage": RetrievalConfig(
        use_bm25=False, two_stage=True, query_analysis=False, temporal_boost=False, dedup=False, rerank=False,
        history=False,
    ),
    "rrf": RetrievalConfig(query_analysis=False, temporal_boost=False, dedup=False, rerank=False, history=False),
    "rrf_temporal": RetrievalConfig(query_analysis=True, dedup=False, rerank=False, history=False),
    "rrf_temporal_dedup": RetrievalConfig(query_analysis=True, rerank=False, history=False),
    "rrf_temporal_dedup_rerank": RetrievalConfig(query_analysis=True, history=False),
    "default": _DEFAULT,
}  # fmt: skip

RECIPE_DESCRIPTIONS: dict[str, str] = {
    "bm25": "BM25 keyword search only",
    "vector": "exact full-vector search only",
    "vector_two_stage": "prefix shortlist, then full-vector rescoring",
    "rrf": "weighted RRF of two-stage vector and BM25",
    "rrf_temporal": "RRF + query analysis + temporal boosting",
    "rrf_temporal_dedup": "RRF + temporal boosting + near-duplicate removal",
    "rrf_temporal_dedup_rerank": "... + cross-encoder reranking (when a reranker is configured)",
    "default": "the full pipeline (all eight stages)",
}


def get_recipe(name: str) -> RetrievalConfig:
    try:
        return RECIPES[name]
    except KeyError:
        raise ValueError(f"recipe: unknown recipe {name!r}; known: {', '.join(RECIPES)}") from None
