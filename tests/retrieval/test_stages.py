"""Stage formulas on worked examples: RRF (4), temporal boost (5), dedup (6)."""

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from cognis_memory.retrieval.dedup import dedup_indices
from cognis_memory.retrieval.fusion import min_max_normalise, rrf_scores, weighted_rrf
from cognis_memory.retrieval.temporal import blend, temporal_score


def test_rrf_ranks_start_at_one() -> None:
    assert rrf_scores(["a", "b", "c"], k=10) == {"a": 1 / 11, "b": 1 / 12, "c": 1 / 13}


def test_weighted_rrf_worked_example() -> None:
    # vector: a, b, c   bm25: c, d, a     k = 10, weights 0.7 / 0.3
    fused = weighted_rrf([(["a", "b", "c"], 0.7), (["c", "d", "a"], 0.3)], k=10)
    expected = {
        "a": 0.7 / 11 + 0.3 / 13,
        "b": 0.7 / 12,
        "c": 0.7 / 13 + 0.3 / 11,
        "d": 0.3 / 12,
    }
    assert fused == pytest.approx(expected)
    assert list(fused) == ["a", "c", "b", "d"]  # 0.0867, 0.0811, 0.0583, 0.0250


def test_weighted_rrf_weights_flip_the_order() -> None:
    lists = [(["x", "y"], 0.7), (["y", "x"], 0.3)]
    assert list(weighted_rrf(lists, k=10)) == ["x", "y"]
    lists = [(["x", "y"], 0.3), (["y", "x"], 0.7)]
    assert list(weighted_rrf(lists, k=10)) == ["y", "x"]


def test_weighted_rrf_k_changes_the_spread() -> None:
    small = weighted_rrf([(["a", "b"], 1.0)], k=1)
    large = weighted_rrf([(["a", "b"], 1.0)], k=60)
    assert small["a"] / small["b"] == pytest.approx(1.5)
    assert large["a"] / large["b"] == pytest.approx(62 / 61)


def test_min_max_normalise() -> None:
    assert min_max_normalise({"a": 0.2, "b": 0.1, "c": 0.15}) == pytest.approx({"a": 1.0, "b": 0.0, "c": 0.5})
    assert min_max_normalise({"a": 0.3, "b": 0.3}) == {"a": 1.0, "b": 1.0}
    assert min_max_normalise({}) == {}


T0 = datetime(2023, 5, 1, tzinfo=UTC)
T1 = datetime(2023, 5, 2, tzinfo=UTC)


@pytest.mark.parametrize(
    ("offset_days", "expected"),
    [
        (0, 1.0),  # inside the target interval
        (-15, 0.5),  # 15 days before the start, window 30
        (1 + 40, 0.1),  # far beyond the window: floor
        (1 + 27, 0.1),  # 27 days after the end (T1): 1 - 27/30 = 0.1 exactly at the floor
        (1 + 26, 1 - 26 / 30),  # just inside the window
        (1 + 30, 0.1),  # exactly at the window edge: 1 - 30/30 = 0 -> floor
    ],
)
def test_temporal_score_window_edges(offset_days: float, expected: float) -> None:
    t = T0 + timedelta(days=offset_days)
    assert temporal_score(t, T0, T1, window_days=30, floor=0.1) == pytest.approx(expected)


def test_temporal_score_without_time_is_floor() -> None:
    assert temporal_score(None, T0, T1, window_days=30, floor=0.1) == 0.1


def test_blend_is_the_architecture_formula() -> None:
    assert blend(0.5, 1.0, 0.4) == pytest.approx(0.6 * 0.5 + 0.4 * 1.0)


def _unit(v: list[float]) -> np.ndarray:
    a = np.asarray(v, dtype=np.float32)
    return a / np.linalg.norm(a)


def test_dedup_at_threshold_099() -> None:
    base = _unit([1, 0, 0])
    near = _unit([1, 0.1, 0])  # cos = 0.995 -> dropped
    far = _unit([1, 0.2, 0])  # cos = 0.981 -> kept
    other = _unit([0, 1, 0])
    assert float(base @ near) >= 0.99 > float(base @ far)
    assert dedup_indices([base, near, far, other], 0.99) == [0, 2, 3]


def test_dedup_keeps_the_higher_ranked_copy_and_items_without_vectors() -> None:
    v = _unit([0, 0, 1])
    assert dedup_indices([None, v, v.copy(), None], 0.99) == [0, 1, 3]
