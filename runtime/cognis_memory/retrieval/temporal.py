"""Stage 5: temporal boosting.

temporal(d) = max(floor, 1 - distance_days(d) / window_days), where distance_days is the
distance from the memory's effective time (event time, else message time) to the query's
target interval (0 inside it). Memories with no time get the floor.
final(d) = (1 - w) * fused_norm(d) + w * temporal(d), with fused scores min-max normalised
to [0, 1] over the candidate set first (see :func:`fusion.min_max_normalise`), so that the
two terms are on the same scale. Defaults: w = 0.40, floor = 0.10.
"""

from __future__ import annotations

from datetime import datetime

from .fusion import min_max_normalise
from .stages import RetrievalStage, SearchState


def temporal_score(t: datetime | None, start: datetime, end: datetime, *, window_days: float, floor: float) -> float:
    if t is None:
        return floor
    if start <= t <= end:
        distance = 0.0
    else:
        edge = start if t < start else end
        distance = abs((t - edge).total_seconds()) / 86400.0
    return max(floor, 1.0 - distance / window_days)


def blend(fused_norm: float, temporal: float, weight: float) -> float:
    return (1.0 - weight) * fused_norm + weight * temporal


class TemporalBoost(RetrievalStage):
    """Stage 5 on a temporal query: ``final`` blends the normalised fused score with :func:`temporal_score`
    (a 'when did ...' query: with whether the memory has a resolved event time, weight ``when_weight``)."""

    name = "temporal_boost"
    phase = "final"

    def enabled(self, s: SearchState) -> bool:
        return s.cfg.temporal_boost and s.analysed.analysis.is_temporal and bool(s.final)

    async def apply(self, s: SearchState) -> None:
        cfg, analysis = s.cfg, s.analysed.analysis
        for doc, fused_norm in min_max_normalise(s.fused).items():
            mem = s.candidates[doc]
            if analysis.temporal == "when":
                t = 1.0 if mem.event_time is not None else 0.0
                s.final[doc] = blend(fused_norm, t, cfg.when_weight)
            else:
                assert analysis.target_start and analysis.target_end and analysis.window_days
                t = temporal_score(
                    mem.effective_time,
                    analysis.target_start,
                    analysis.target_end,
                    window_days=analysis.window_days,
                    floor=cfg.temporal_floor,
                )
                s.final[doc] = blend(fused_norm, t, cfg.temporal_weight)
            s.explain[doc].update(fused_norm=fused_norm, temporal=t, final=s.final[doc])
