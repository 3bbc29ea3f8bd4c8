"""Per-request stage timing.

A :class:`StageRecorder` belongs to one request (never shared), so concurrent requests
cannot mix their timings. ``with rec.stage("bm25"):`` adds the elapsed milliseconds to that
stage; stages measured elsewhere (for example inside a store) are added with ``add_completed``
right after they finished (or ``add``, which only counts).

With a tracer (traces turned on, see :mod:`.tracing`) every stage is also a span with the
stage's name, a child of whatever span is current (the operation's).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

from .tracing import completed_stage_spans, stage_span


class StageRecorder:
    def __init__(self, *, tracer: Any | None = None) -> None:
        self._start = time.perf_counter()
        self._tracer = tracer
        self.durations_ms: dict[str, float] = {}
        self.fields: dict[str, Any] = {}
        self.degraded: list[str] = []

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        with nullcontext() if self._tracer is None else stage_span(self._tracer, name):
            t0 = time.perf_counter()
            try:
                yield
            finally:
                self.add(name, (time.perf_counter() - t0) * 1000)

    def add(self, name: str, ms: float) -> None:
        self.durations_ms[name] = self.durations_ms.get(name, 0.0) + ms

    def add_completed(self, timings_ms: dict[str, float]) -> None:
        """Stages timed elsewhere that ran one after another, in this order, and have just ended."""
        for name, ms in timings_ms.items():
            self.add(name, ms)
        if self._tracer is not None and timings_ms:
            completed_stage_spans(self._tracer, timings_ms)

    def mark_degraded(self, reason: str) -> None:
        if reason not in self.degraded:
            self.degraded.append(reason)

    @property
    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self._start) * 1000

    def stage_durations(self) -> dict[str, float]:
        """``{"<stage>_ms": ms}`` rounded to 0.01 ms, in recording order."""
        return {f"{k}_ms": round(v, 2) for k, v in self.durations_ms.items()}
