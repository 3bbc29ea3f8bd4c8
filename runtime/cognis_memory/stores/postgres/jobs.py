"""PostgreSQL's job-queue role: jobs claimed with ``FOR UPDATE SKIP LOCKED``, so many workers never
take the same job."""

from __future__ import annotations

from datetime import datetime, timedelta

from psycopg.rows import dict_row

from ...domain import Job, JobStatus, Owner
from ..records import JOB_COLUMNS, POSTGRES, insert_statement, job_from_row, job_to_row, row_values
from .connection import PostgresDatabase

#: a job is written whole; its lease is the queue's own column (a claim sets it, any save clears it)
_UPSERT_JOB = (
    insert_statement("jobs", (*JOB_COLUMNS, "lease_until"), "%s")
    + " ON CONFLICT (id) DO UPDATE SET status = excluded.status, attempts = excluded.attempts,"
    " last_error = excluded.last_error, next_attempt_at = excluded.next_attempt_at,"
    " lease_until = NULL, updated_at = excluded.updated_at, result = excluded.result"
    " WHERE jobs.tenant_id = excluded.tenant_id AND jobs.user_id = excluded.user_id"
)


class PostgresJobs:
    """The :class:`~cognis_memory.stores.roles.JobQueue` of a PostgreSQL database."""

    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db

    async def _upsert_job(self, job: Job) -> None:
        async with self.db.connection() as conn:
            await conn.execute(_UPSERT_JOB, (*row_values(job_to_row(job, POSTGRES), JOB_COLUMNS), None))

    async def enqueue_job(self, job: Job) -> None:
        await self._upsert_job(job)

    async def save_job(self, job: Job) -> None:
        await self._upsert_job(job)

    async def claim_job(self, now: datetime, lease_s: float) -> Job | None:
        async with self.db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                "UPDATE jobs SET status = 'running', attempts = attempts + 1, lease_until = %(lease)s,"
                " updated_at = %(now)s"
                " WHERE id = (SELECT id FROM jobs"
                "   WHERE (status IN ('queued', 'failed') AND next_attempt_at <= %(now)s)"
                "      OR (status = 'running' AND lease_until <= %(now)s)"
                "   ORDER BY next_attempt_at LIMIT 1 FOR UPDATE SKIP LOCKED)"
                " RETURNING *",
                {"now": now, "lease": now + timedelta(seconds=lease_s)},
            )
            row = await cur.fetchone()
            return job_from_row(row, POSTGRES) if row else None

    async def get_job(self, owner: Owner, job_id: str) -> Job | None:
        async with self.db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                "SELECT * FROM jobs WHERE id = %s AND tenant_id = %s AND user_id = %s",
                (job_id, owner.tenant_id, owner.user_id),
            )
            row = await cur.fetchone()
            return job_from_row(row, POSTGRES) if row else None

    async def list_jobs(
        self, tenant_id: str, *, status: JobStatus | None = None, limit: int = 100, after_id: str | None = None
    ) -> list[Job]:
        where, params = "tenant_id = %s AND id > %s", [tenant_id, after_id or ""]
        if status is not None:
            where += " AND status = %s"
            params.append(status.value)
        async with self.db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(f"SELECT * FROM jobs WHERE {where} ORDER BY id LIMIT %s", (*params, limit))
            return [job_from_row(r, POSTGRES) for r in await cur.fetchall()]
