"""The embedded store's ingest jobs: queued, claimed with a lease, saved, listed."""

from __future__ import annotations

import asyncio
from datetime import datetime

from ...domain import Job, JobStatus, Owner
from ..records import (
    JOB_COLUMNS,
    SQLITE,
    insert_statement,
    job_from_row,
    job_to_row,
    row_values,
)
from .base import EmbeddedBase

#: a job is written whole, with the queue's own lease column (a claim sets it)
_UPSERT_JOB = (
    insert_statement("jobs", (*JOB_COLUMNS, "lease_until"), "?")
    + " ON CONFLICT(id) DO UPDATE SET status = excluded.status, attempts = excluded.attempts,"
    " last_error = excluded.last_error, next_attempt_at = excluded.next_attempt_at,"
    " lease_until = excluded.lease_until, updated_at = excluded.updated_at, result = excluded.result"
)


class EmbeddedJobs(EmbeddedBase):
    """The embedded store's ingest jobs: queued, claimed with a lease, saved, listed."""

    def _upsert_job(self, job: Job, lease_until: float | None = None) -> None:
        with self._tx() as conn:
            conn.execute(_UPSERT_JOB, (*row_values(job_to_row(job, SQLITE), JOB_COLUMNS), lease_until))

    async def enqueue_job(self, job: Job) -> None:
        await asyncio.to_thread(self._upsert_job, job)

    async def save_job(self, job: Job) -> None:
        await asyncio.to_thread(self._upsert_job, job)

    def _claim_job(self, now: datetime, lease_s: float) -> Job | None:
        t = now.timestamp()
        with self._tx() as conn:
            row = conn.execute(
                "SELECT id FROM jobs WHERE (status IN ('queued', 'failed') AND next_attempt_at <= ?)"
                " OR (status = 'running' AND lease_until <= ?) ORDER BY next_attempt_at LIMIT 1",
                (t, t),
            ).fetchone()
            if row is None:
                return None
            claimed = conn.execute(
                "UPDATE jobs SET status = 'running', attempts = attempts + 1, lease_until = ?, updated_at = ?"
                " WHERE id = ? RETURNING *",
                (t + lease_s, t, row["id"]),
            ).fetchone()
            return job_from_row(claimed, SQLITE)

    async def claim_job(self, now: datetime, lease_s: float) -> Job | None:
        return await asyncio.to_thread(self._claim_job, now, lease_s)

    async def get_job(self, owner: Owner, job_id: str) -> Job | None:
        rows = await asyncio.to_thread(
            self._read,
            "SELECT * FROM jobs WHERE id = ? AND tenant_id = ? AND user_id = ?",
            (job_id, owner.tenant_id, owner.user_id),
        )
        return job_from_row(rows[0], SQLITE) if rows else None

    async def list_jobs(
        self, tenant_id: str, *, status: JobStatus | None = None, limit: int = 100, after_id: str | None = None
    ) -> list[Job]:
        where, params = "tenant_id = ? AND id > ?", [tenant_id, after_id or ""]
        if status is not None:
            where += " AND status = ?"
            params.append(status.value)
        sql = f"SELECT * FROM jobs WHERE {where} ORDER BY id LIMIT ?"
        rows = await asyncio.to_thread(self._read, sql, (*params, limit))
        return [job_from_row(r, SQLITE) for r in rows]
