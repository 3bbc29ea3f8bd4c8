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
