"""Retrieval configuration and named recipes.

Every weight, k, window and threshold of the eight stages is a field here. The field
defaults are the formulas of ARCHITECTURE §5 (RRF k = 10, weights 0.70/0.30, temporal
0.60/0.40 with floor 0.10, dedup at 0.99) with the additions switched off; that plain
configuration is the ``architecture`` recipe. A *recipe* is a named configuration the
runtime exposes (``cognis-memory recipes`` lists them; the benchmark scripts run them
side by side as ablations and baselines).

The ``default`` recipe (what the service uses unless told otherwise) adds measured
mechanisms and re-weights the fusion; docs/benchmarks.md has the figures behind each, on
LoCoMo, LongMemEval and the project's knowledge-update set:

* speaker-aware queries (:mod:`.speakers`): a name of one of the user's speakers is taken
  out of the embedded and keyword query and boosts that speaker's memories instead;
* conversation context (:mod:`.conversation_context`): a candidate said next to a strong match, in the
  same session, inherits part of its score (at most ``context_max_lift`` times its own);
* fusion weights 0.5/0.5: with all-MiniLM-L6-v2 on conversational text BM25 is the
  stronger ranker, and the 0.7/0.3 vector-heavy split loses recall;
* current-state ordering (:mod:`.current_state`): for a present-state question a newer
  statement of the same speaker about the same thing ranks above the one it replaced (history
  questions: the reverse);
* role prior (:mod:`.role_prior`): a first-person question ranks the user's turns up, a question
  about the assistant's own words ("what did you recommend?") the assistant's turns; neutral
  where turns carry speaker names.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import InvalidInputError


class RetrievalConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # stage 1: query analysis
    query_analysis: bool = Field(True, description="Detect temporal and history intent in the query.")
    speaker_aware: bool = Field(
        False, description="Strip names of the user's speakers from the query and boost their memories instead."
    )
    speaker_boost: float = Field(
        0.4, ge=0, description="Memories of a speaker named in the query: score * (1 + boost)."
    )
    # stage 2: vector search
    use_vector: bool = True
    two_stage: bool = Field(True, description="Prefix shortlist, then full-vector rescoring.")
    shortlist: int = Field(200, ge=1, description="Prefix candidates rescored with full vectors.")
    vector_k: int = Field(50, ge=1, description="Vector hits passed to fusion.")
    # stage 2b: the fact channel
    fact_channel: bool = Field(
        False,
        description="A third fused list: vector search over the user's extracted facts alone, so a fact competes "
        "with the few facts (not with every raw message). No facts (no extraction LLM): nothing changes.",
    )
    fact_k: int = Field(20, ge=1, description="Fact-channel hits passed to fusion.")
    weight_facts: float = Field(0.5, ge=0, description="Weight of the fact channel in the fusion.")
    raw_weight: float = Field(
        1.0,
        gt=0,
        le=1,
        description="Where the candidates hold extracted facts, raw messages' fused scores times this (a fact "
        "outranks a raw message of about the same score); 1 turns it off.",
    )
    # stage 3: BM25
    use_bm25: bool = True
    bm25_k: int = Field(50, ge=1, description="BM25 hits passed to fusion.")
    keyword_cleanup: bool = Field(
        False, description="Drop conversational fillers and relative time expressions from the BM25 query."
    )
    # stage 4: weighted reciprocal rank fusion
    rrf_k: float = Field(10.0, gt=0, description="k in 1 / (k + rank).")
    weight_vector: float = Field(0.70, ge=0)
    weight_bm25: float = Field(0.30, ge=0)
    # after fusion: conversation context
    context: bool = Field(False, description="Candidates near a strong match in its session inherit part of its score.")
    context_weight: float = Field(0.3, ge=0, description="score + weight * best nearby score in the same session.")
    context_max_lift: float = Field(
        0.5,
        ge=0,
        description="A candidate's context lift is at most this times its own score, so it cannot pass a "
        "candidate whose own score is more than 1 + this times its own.",
    )
    context_window_minutes: float = Field(30.0, gt=0, description="How close in message time 'nearby' is.")
    # after fusion: role prior
    role_boost: float = Field(
        0.0,
        ge=0,
        description="First-person questions: user turns, questions about the assistant's words: "
        "assistant turns (turns stored without a speaker name) score * (1 + boost).",
    )
    # after fusion: current-state ordering
    current_state: bool = Field(
        False,
        description="Present-state queries: a newer statement of the same speaker about the same thing ranks above "
        "the one it replaced (history queries: the reverse); present-state adverbs leave the searched text.",
    )
    state_from_tense: bool = Field(
        True, description="A present-tense question without a time ('where do I live?') counts as present-state."
    )
    state_head: int = Field(5, ge=2, description="Best-ranked candidates among which statements can supersede.")
    state_same_speaker: bool = Field(True, description="Only a statement of the same speaker supersedes.")
    state_similarity: float = Field(
        0.55, ge=0, le=1, description="Cosine at or above which two statements are about the same thing."
    )
    state_gap_minutes: float = Field(
        60.0, ge=0, description="A restatement sooner than this after the first is elaboration, not an update."
    )
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


ARCHITECTURE = RetrievalConfig()
_DEFAULT = RetrievalConfig(
    speaker_aware=True,
    context=True,
    keyword_cleanup=True,
    weight_vector=0.5,
    weight_bm25=0.5,
    current_state=True,
    role_boost=1.0,
    fact_channel=True,
)
_NO_RERANK = {"rerank": False}

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
    "architecture": ARCHITECTURE,
    # one addition at a time on top of the architecture pipeline (no reranker)
    "arch+speakers": ARCHITECTURE.with_overrides(speaker_aware=True, **_NO_RERANK),
    "arch+context": ARCHITECTURE.with_overrides(context=True, **_NO_RERANK),
    "arch+weights_50_50": ARCHITECTURE.with_overrides(weight_vector=0.5, weight_bm25=0.5, **_NO_RERANK),
    "arch+current_state": ARCHITECTURE.with_overrides(current_state=True, **_NO_RERANK),
    "arch+role_prior": ARCHITECTURE.with_overrides(role_boost=1.0, **_NO_RERANK),
    "arch+fact_channel": ARCHITECTURE.with_overrides(fact_channel=True, **_NO_RERANK),
    # leave-one-out from the default
    "default-speakers": _DEFAULT.with_overrides(speaker_aware=False, **_NO_RERANK),
    "default-context": _DEFAULT.with_overrides(context=False, **_NO_RERANK),
    "default-weights_70_30": _DEFAULT.with_overrides(weight_vector=0.7, weight_bm25=0.3, **_NO_RERANK),
    "default-temporal": _DEFAULT.with_overrides(temporal_boost=False, **_NO_RERANK),
    "default-dedup": _DEFAULT.with_overrides(dedup=False, **_NO_RERANK),
    "default-two_stage": _DEFAULT.with_overrides(two_stage=False, **_NO_RERANK),
    "default-keyword_cleanup": _DEFAULT.with_overrides(keyword_cleanup=False, **_NO_RERANK),
    "default-current_state": _DEFAULT.with_overrides(current_state=False, **_NO_RERANK),
    "default-role_prior": _DEFAULT.with_overrides(role_boost=0.0, **_NO_RERANK),
    "default-fact_channel": _DEFAULT.with_overrides(fact_channel=False, **_NO_RERANK),
    "default+kind_prior": _DEFAULT.with_overrides(raw_weight=0.85, **_NO_RERANK),
    "default-rerank": _DEFAULT.with_overrides(**_NO_RERANK),
    "default": _DEFAULT,
}  # fmt: skip

#: Recipes that differ from another recipe only when a reranker is configured.
RERANKER_RECIPES = frozenset({"rrf_temporal_dedup_rerank", "default-rerank"})

RECIPE_DESCRIPTIONS: dict[str, str] = {
    "bm25": "BM25 keyword search only",
    "vector": "exact full-vector search only",
    "vector_two_stage": "prefix shortlist, then full-vector rescoring",
    "rrf": "weighted RRF of two-stage vector and BM25",
    "rrf_temporal": "RRF + query analysis + temporal boosting",
    "rrf_temporal_dedup": "RRF + temporal boosting + near-duplicate removal",
    "rrf_temporal_dedup_rerank": "... + cross-encoder reranking (when a reranker is configured)",
    "architecture": "the eight stages exactly as ARCHITECTURE §5 (0.7/0.3 fusion, no additions)",
    "arch+speakers": "architecture + speaker-aware queries (no reranker)",
    "arch+context": "architecture + conversation-context expansion (no reranker)",
    "arch+weights_50_50": "architecture with 0.5/0.5 fusion weights (no reranker)",
    "arch+current_state": "architecture + current-state ordering (no reranker)",
    "arch+role_prior": "architecture + role prior from the question's grammatical person (no reranker)",
    "arch+fact_channel": "architecture + the fact channel (differs only where facts were extracted)",
    "default-speakers": "default without speaker-aware queries",
    "default-context": "default without conversation-context expansion",
    "default-weights_70_30": "default with the architecture's 0.7/0.3 fusion weights",
    "default-temporal": "default without temporal boosting",
    "default-dedup": "default without near-duplicate removal",
    "default-two_stage": "default with exact full-vector search instead of the prefix shortlist",
    "default-keyword_cleanup": "default with the raw query text sent to BM25",
    "default-current_state": "default without current-state ordering",
    "default-role_prior": "default without the role prior",
    "default-fact_channel": "default without the fact channel (differs only where facts were extracted)",
    "default+kind_prior": "default with the kind prior: raw messages x 0.85 where facts were extracted (not in the "
    "default: it bought nothing with the oracle and cost with a real model's facts)",
    "default-rerank": "default without cross-encoder reranking (differs only when a reranker is configured)",
    "default": "speaker-aware queries + conversation context + 0.5/0.5 RRF + fact channel + role prior + "
    "temporal + dedup + rerank + current-state ordering + history",
}


def with_knobs(cfg: RetrievalConfig, knobs: Mapping[str, object]) -> RetrievalConfig:
    """``cfg`` with ``knobs`` set, validated as a recipe is: an unknown knob or a value out of its range is
    a ``ValueError`` naming the knob."""
    if not knobs:
        return cfg
    try:
        return RetrievalConfig.model_validate({**cfg.model_dump(), **knobs})
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ValueError(f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None


def get_recipe(name: str) -> RetrievalConfig:
    try:
        return RECIPES[name]
    except KeyError:
        raise InvalidInputError("recipe", f"unknown recipe {name!r}; known: {', '.join(RECIPES)}") from None
