"""The dual store's outbox backlog as metrics: how far OpenSearch (keyword search) is behind PostgreSQL.

The store offers its outbox state (``DualStore.outbox_state()``: the rows waiting, the age of the oldest) and
emits nothing itself; :class:`OutboxReporter`, built by :mod:`cognis_memory.wiring` for a store that offers it
and run by the service next to its job worker, reads that state every ``interval_s`` and writes it as one EMF
blob (``OutboxBacklog`` rows and ``OutboxOldestAgeSeconds``, dimension ``service``). The dashboard plots them
and an alarm fires when the oldest row waits too long: OpenSearch slow or down, or ingest outrunning the drain.

A level sampled once a minute, not a count per request: every task of the service reads the same shared
table, so CloudWatch's ``Maximum`` over the tasks is the backlog. The read is one SQL statement over the
store's async connection pool (nothing blocks the event loop); a read that fails or hangs is logged and the
next tick tries again, so reporting never raises into the service; :meth:`OutboxReporter.stop` ends it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from . import names
from .emitter import Telemetry

#: Seconds between two readings: one data point per one-minute CloudWatch period.
OUTBOX_REPORT_INTERVAL_S = 60.0
#: A reading not answered within this is given up (logged) and the next tick tries again; past the pool's own
#: wait for a connection (10 s), so it only ends a reading that hangs (a connection that stopped answering).
OUTBOX_READ_TIMEOUT_S = 30.0


class OutboxReading(Protocol):
    """What the store's ``outbox_state()`` answers (``cognis_memory.stores.dual.OutboxState``)."""

    @property
    def rows(self) -> int: ...

    @property
    def oldest_age_s(self) -> float: ...


class OutboxReporter:
    """Reads ``read()`` (the store's ``outbox_state``) every ``interval_s`` in a task of the running loop and
    emits it through ``telemetry``; a reading that takes longer than ``read_timeout_s`` is given up (logged)."""

    def __init__(
        self,
        read: Callable[[], Awaitable[OutboxReading]],
        telemetry: Telemetry,
        *,
        interval_s: float = OUTBOX_REPORT_INTERVAL_S,
        read_timeout_s: float = OUTBOX_READ_TIMEOUT_S,
    ) -> None:
        self._read, self.telemetry = read, telemetry
        self.interval_s, self.read_timeout_s = interval_s, read_timeout_s
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    async def report_once(self) -> dict[str, Any] | None:
        """Read the outbox state and emit it; the EMF blob written, or None (metrics off, or the read failed:
        the failure is logged, never raised)."""
        try:
            state = await asyncio.wait_for(self._read(), timeout=self.read_timeout_s)
            return self.telemetry.emit_gauges(
                {
                    names.OUTBOX_BACKLOG: (float(state.rows), "Count"),
                    names.OUTBOX_OLDEST_AGE: (float(state.oldest_age_s), "Seconds"),
                }
            )
        except Exception as exc:  # PostgreSQL away, a timeout: the next tick tries again
            with contextlib.suppress(Exception):
                self.telemetry.log_error("outbox_report_failed", request_id=None, error=exc)
            return None

    def start(self) -> None:
        """Report now and then every ``interval_s`` until :meth:`stop` (idempotent)."""
        if self._task is not None and not self._task.done():
            return
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._loop(), name="cognis-outbox-report")

    async def stop(self) -> None:
        """End the reporting (a reading under way is cancelled); safe to call when it never started."""
        task, self._task = self._task, None
        if task is None:
            return
        self._stop.set()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task

    async def _loop(self) -> None:
        while not self._stop.is_set():
            await self.report_once()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=self.interval_s)
