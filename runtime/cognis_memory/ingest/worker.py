"""The background ingest worker: claims durable jobs from the store and runs them.

A claimed job holds a lease; if the process dies, the lease expires and another worker
(or the restarted process) claims it again, so a job survives restarts.

Two kinds of failure are told apart:

* **the LLM (or another dependency) is unreachable** (:class:`DependencyUnavailableError`: a
  timeout, a 5xx, throttling, a configuration problem): nothing is wrong with the job, so the
  attempt does not count; the job waits, retried after ``backoff_s * 2**(waits-1)`` seconds, at most
  ``max_backoff_s``, until the LLM answers again (``result.waits`` counts them; the jobs listing shows
  the job ``failed`` with its ``last_error`` and ``next_attempt_at``). No message is left without
  extraction when an outage ends. A job older than ``max_wait_s`` waits no longer: from then on an
  unreachable LLM counts as a failed attempt like any other, so an outage nobody ends (a revoked model
  access, a wrong endpoint) ends in the dead letters where an operator sees it, not in a queue that
  only grows.
* **anything else** (no usable LLM answer even after repair and a second question, a bug): the
  attempt counts; it is retried after ``backoff_s * 2**(attempts-1)`` seconds, at most
  ``max_backoff_s``, and after ``max_attempts`` the job goes to the dead-letter state (``dead``),
  visible through the API with its last error.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

from ..domain import Job, JobStatus, Owner, utcnow
from ..errors import DependencyUnavailableError
from ..providers.base import LLMOutputError
from ..telemetry import names
from ..telemetry.emitter import Telemetry
from .pipeline import IngestPipeline, extraction_metrics


class JobWorker:
    def __init__(
        self,
        pipeline: IngestPipeline,
        telemetry: Telemetry,
        *,
        backoff_s: float = 2.0,
        max_backoff_s: float = 300.0,
        max_wait_s: float = 86400.0,
        lease_s: float = 300.0,
        poll_s: float = 0.5,
        concurrency: int = 1,
    ) -> None:
        self.pipeline, self.telemetry = pipeline, telemetry
        self.backoff_s, self.lease_s, self.poll_s, self.concurrency = backoff_s, lease_s, poll_s, concurrency
        self.max_backoff_s, self.max_wait_s = max_backoff_s, max_wait_s
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
        waits = int(job.result.get("waits", 0)) if isinstance(job.result, dict) else 0
        try:
            with self.telemetry.operation_span(names.OPERATION_INGEST, rec, request_id=job.id, tenant_id=job.tenant_id):
                result = await self.pipeline.run_job(job, rec)
            job.result = {**result, "waits": waits} if waits else result
            job.status, job.last_error = JobStatus.DONE, None
            for metric, count in extraction_metrics(result).items():
                self.telemetry.emit_count(metric, count)
        except DependencyUnavailableError as exc:
            if not self._may_wait(job):
                self._count_failure(job, exc)
            else:  # the LLM is away: wait for it, the attempt does not count
                self._wait(job, exc, waits)
        except Exception as exc:  # any other failure is recorded on the job and retried, then dead-lettered
            self._count_failure(job, exc)
        job.updated_at = utcnow()
        if await jobs.get_job(Owner(job.tenant_id, job.user_id), job.id) is None:
            return job  # deleted while it ran (the user was forgotten): do not write it back
        await jobs.save_job(job)
        self.telemetry.log_request(
            names.EVENT_INGEST, rec, request_id=job.id, job_status=job.status.value, attempts=job.attempts
        )
        return job

    def _may_wait(self, job: Job) -> bool:
        """Whether a job that found a dependency unavailable may still wait for it without counting."""
        return (utcnow() - job.created_at).total_seconds() < self.max_wait_s

    def _wait(self, job: Job, exc: Exception, waits: int) -> None:
        """Put the job back without using up an attempt, due again after the backoff of ``waits + 1``."""
        job.attempts = max(0, job.attempts - 1)
        job.result = {**(job.result if isinstance(job.result, dict) else {}), "waits": waits + 1}
        job.last_error = f"{type(exc).__name__}: {exc}"[:2000]
        job.status = JobStatus.FAILED
        job.next_attempt_at = utcnow() + timedelta(seconds=self._delay(waits + 1))
        self.telemetry.emit_count(names.EXTRACTIONS_DEFERRED)
        self.telemetry.log_error("ingest_job_waits", request_id=job.id, error=exc, waits=waits + 1)

    def _count_failure(self, job: Job, exc: Exception) -> None:
        """Record a failed attempt: retried after the backoff, dead-lettered after ``max_attempts``."""
        job.last_error = f"{type(exc).__name__}: {exc}"[:2000]
        if isinstance(exc, LLMOutputError):
            self.telemetry.emit_count(names.LLM_ANSWERS_UNUSABLE)
        if job.attempts >= job.max_attempts:
            job.status = JobStatus.DEAD
            self.telemetry.emit_count(names.JOBS_DEAD_LETTERED)
        else:
            job.status = JobStatus.FAILED
            job.next_attempt_at = utcnow() + timedelta(seconds=self._delay(job.attempts))
        self.telemetry.log_error("ingest_job_failed", request_id=job.id, error=exc, attempts=job.attempts)

    def _delay(self, failures: int) -> float:
        """Seconds before the next attempt after ``failures`` failures in a row (exponential, capped)."""
        return float(min(self.max_backoff_s, self.backoff_s * 2 ** max(0, failures - 1)))

    async def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                job = await self.run_once()
            except Exception as exc:  # store hiccup: log, wait, continue
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
