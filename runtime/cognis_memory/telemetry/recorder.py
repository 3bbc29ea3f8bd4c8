"""Per-request stage timing.

A :class:`StageRecorder` belongs to one request (never shared), so concurrent requests
cannot mix their timings. ``with rec.stage("bm25"):`` adds the elapsed milliseconds to that
stage; stages measured elsewhere (for example inside a store) are added with ``add``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class StageRecorder:
    def __init__(self) -> None:
        self._start = time.perf_counter()
        self.durations_ms: dict[str, float] = {}
        self.fields: dict[str, Any] = {}
        self.degraded: list[str] = []

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, (time.perf_counter() - t0) * 1000)

    def add(self, name: str, ms: float) -> None:
        self.durations_ms[name] = self.durations_ms.get(name, 0.0) + ms

    def mark_degraded(self, reason: str) -> None:
        if reason not in self.degraded:
            self.degraded.append(reason)

    @property
    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self._start) * 1000

    def stage_durations(self) -> dict[str, float]:
        """``{"<stage>_ms": ms}`` rounded to 0.01 ms, in recording order."""
        return {f"{k}_ms": round(v, 2) for k, v in self.durations_ms.items()}
