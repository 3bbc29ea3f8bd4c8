"""The background ingest worker: claims durable jobs from the store and runs them.

A claimed job holds a lease; if the process dies, the lease expires and another worker
(or the restarted process) claims it again, so a job survives restarts. A failed attempt
is retried after ``backoff_s * 2**(attempts-1)`` seconds; after ``max_attempts`` the job
goes to the dead-letter state (``dead``), visible through the API with its last error.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

from ..domain import Job, JobStatus, Owner, utcnow
from ..telemetry import names
from ..telemetry.emitter import Telemetry
from .pipeline import IngestPipeline


class JobWorker:
    def __init__(
        self,
        pipeline: IngestPipeline,
        telemetry: Telemetry,
        *,
        backoff_s: float = 2.0,
        lease_s: float = 300.0,
        poll_s: float = 0.5,
        concurrency: int = 1,
    ) -> None:
        self.pipeline, self.telemetry = pipeline, telemetry
        self.backoff_s, self.lease_s, self.poll_s, self.concurrency = backoff_s, lease_s, poll_s, concurrency
        self._tasks: list[asyncio.Task[None]] = []
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()

    def notify(self) -> None:
        """Wake the worker now (a job was just enqueued)."""
        self._wake.set()

    async def run_once(self) -> Job | None:
        """Claim and run one due job; returns it (in its final state for this attempt) or None."""
        jobs = self.pipeline.jobs
        job = await jobs.claim_job(utcnow(), self.lease_s)
        if job is None:
            return None
        rec = self.telemetry.recorder()
        try:
            with self.telemetry.operation_span(names.OPERATION_INGEST, rec, request_id=job.id, tenant_id=job.tenant_id):
                job.result = await self.pipeline.run_job(job, rec)
            job.status, job.last_error = JobStatus.DONE, None
        except Exception as exc:  # noqa: BLE001 - any failure is recorded on the job and retried
            job.last_error = f"{type(exc).__name__}: {exc}"[:2000]
            if job.attempts >= job.max_attempts:
                job.status = JobStatus.DEAD
                self.telemetry.emit_count(names.JOBS_DEAD_LETTERED)
            else:
                job.status = JobStatus.FAILED
                job.next_attempt_at = utcnow() + timedelta(seconds=self.backoff_s * 2 ** (job.attempts - 1))
            self.telemetry.log_error("ingest_job_failed", request_id=job.id, error=exc, attempts=job.attempts)
        job.updated_at = utcnow()
        if await jobs.get_job(Owner(job.tenant_id, job.user_id), job.id) is None:
            return job  # deleted while it ran (the user was forgotten): do not write it back
        await jobs.save_job(job)
        self.telemetry.log_request(
            names.EVENT_INGEST, rec, request_id=job.id, job_status=job.status.value, attempts=job.attempts
        )
        return job

    async def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                job = await self.run_once()
            except Exception as exc:  # noqa: BLE001 - store hiccup: log, wait, continue
                self.telemetry.log_error("ingest_worker_error", request_id=None, error=exc)
                job = None
            if job is None:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=self.poll_s)

    def start(self) -> None:
        self._stop.clear()
        self._tasks = [asyncio.create_task(self._loop()) for _ in range(self.concurrency)]

    async def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        for t in self._tasks:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(t, timeout=10)
        self._tasks = []

    async def drain(self, timeout_s: float = 60.0) -> int:
        """Run due jobs until none is left (tests, batch imports); returns how many ran."""
        ran = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while loop.time() < deadline:
            job = await self.run_once()
            if job is None:
                break
            ran += 1
        return ran
