"""The retrieval stage registry: what it holds, what it refuses, and that a stage defined outside the
pipeline runs in its place, timed under its own name, with nothing else to change."""

from __future__ import annotations

import pytest

from cognis_memory.domain import Owner
from cognis_memory.retrieval.pipeline import CANDIDATE_STAGES, RetrievalPipeline, SearchQuery, stage_names
from cognis_memory.retrieval.registry import RETRIEVAL_STAGES
from cognis_memory.retrieval.stages import PHASES, RetrievalStage, SearchState, StageResources, load_stages
from cognis_memory.search_filter import SearchFilter
from cognis_memory.service import MessageBody
from cognis_memory.telemetry.recorder import StageRecorder


class ReverseRanking(RetrievalStage):
    """A stage the pipeline does not know: reverses the ranking (every search)."""

    name = "reverse_ranking"
    phase = "ranking"

    def enabled(self, s: SearchState) -> bool:
        return bool(s.ranked)

    async def apply(self, s: SearchState) -> None:
        s.ranked = s.ranked[::-1]
        s.rec.fields["reversed"] = len(s.ranked)


class BoostAfterRanking(RetrievalStage):
    name = "late_boost"
    phase = "fused"

    def enabled(self, s: SearchState) -> bool:
        return True

    async def apply(self, s: SearchState) -> None:
        return None


class NotAStage:
    name = "not_a_stage"


def _resources() -> StageResources:
    return StageResources(memories=None)  # type: ignore[arg-type]  # the stages are built, never applied, here


def test_the_registry_loads_in_order_and_each_stage_names_itself() -> None:
    stages = load_stages(RETRIEVAL_STAGES, _resources())
    assert [s.name for s in stages] == list(RETRIEVAL_STAGES)
    phases = [PHASES.index(s.phase) for s in stages]
    assert phases == sorted(phases)
    assert stage_names() == CANDIDATE_STAGES + tuple(RETRIEVAL_STAGES)
    assert len(set(stage_names())) == len(stage_names())


@pytest.mark.parametrize(
    ("registry", "message"),
    [
        ({"not_a_stage": lambda: NotAStage}, "is not a RetrievalStage"),
        ({"missing": lambda: None}, "is not a RetrievalStage"),
        ({"reversed": lambda: ReverseRanking}, "ReverseRanking calls itself 'reverse_ranking'"),
        ({"reverse_ranking": lambda: ReverseRanking, "late_boost": lambda: BoostAfterRanking}, "cannot run after"),
    ],
)
def test_a_wrong_registry_entry_is_refused_when_the_pipeline_is_built(registry, message) -> None:
    with pytest.raises(ValueError, match=message):
        load_stages(registry, _resources())


async def test_a_new_stage_runs_in_its_registered_place_timed_under_its_name(make_service) -> None:
    svc = await make_service()
    await svc.add_messages(
        "acme",
        "u-reg",
        [MessageBody(content=c) for c in ("I keep bees on the roof", "The bees made honey in July", "I like tea")],
    )
    base = svc.retrieval
    registry = dict(RETRIEVAL_STAGES)
    chain = registry.pop("version_chain")
    registry |= {"reverse_ranking": lambda: ReverseRanking, "version_chain": chain}
    extended = RetrievalPipeline(
        base.encoder, vectors=base.vectors, keywords=base.keywords, memories=base.memories, cache=base.cache,
        config=base.config, stages=registry,
    )  # fmt: skip
    q = SearchQuery(filter=SearchFilter(owner=Owner("acme", "u-reg")), text="bees honey", limit=10)

    plain_rec, rec = StageRecorder(), StageRecorder()
    plain = await base.search(q, plain_rec)
    reversed_ = await extended.search(q, rec)

    ids = [h.memory.id for h in plain.hits]
    assert len(ids) == 3
    assert [h.memory.id for h in reversed_.hits] == ids[::-1]
    assert rec.fields["reversed"] == 3
    durations = list(rec.stage_durations())
    assert "reverse_ranking_ms" not in plain_rec.stage_durations()
    assert durations.index("dedup_ms") < durations.index("reverse_ranking_ms")  # after the earlier stages
    assert stage_names(registry)[-2:] == ("reverse_ranking", "version_chain")
