"""The job-queue role: durable ingest jobs with leases."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, runtime_checkable

from ...domain import Job, JobStatus, Owner


@runtime_checkable
class JobQueue(Protocol):
    async def enqueue_job(self, job: Job) -> None: ...

    async def claim_job(self, now: datetime, lease_s: float) -> Job | None:
        """Take the next due job (queued, failed and due, or running with an expired lease)."""

    async def save_job(self, job: Job) -> None: ...

    async def get_job(self, owner: Owner, job_id: str) -> Job | None: ...

    async def list_jobs(
        self, tenant_id: str, *, status: JobStatus | None = None, limit: int = 100, after_id: str | None = None
    ) -> list[Job]:
        """One tenant's jobs (every user's), optionally of one status, ordered by id, after ``after_id``.
        The tenant and status are applied inside the backend query."""
