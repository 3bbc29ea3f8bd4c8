"""Ingest jobs: one job's status, and the tenant's jobs (the dead letters among them)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from ..auth import ReadKey
from ..deps import Service
from ..schemas import JobListOut, JobOut, JobStatusFilter

router = APIRouter(tags=["jobs"])


@router.get("/v1/users/{user_id}/jobs/{job_id}", response_model=JobOut, summary="Ingest job status")
async def job_status(user_id: str, job_id: str, key: ReadKey, service: Service):
    return JobOut.of(await service.get_job(key.tenant_id, user_id, job_id))


@router.get(
    "/v1/jobs",
    response_model=JobListOut,
    summary="The tenant's ingest jobs, e.g. the dead letters (status=dead) or the pending ones; paged by id",
    description="`status`: one job status, or `pending` for every job whose facts are still to come (queued, "
    "running, or failed and waiting to run again, e.g. for an LLM that is unreachable: see `last_error` and "
    "`next_attempt_at`).",
)
async def list_jobs(
    key: ReadKey,
    service: Service,
    status: JobStatusFilter | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    after: str | None = None,
):
    page = await service.list_jobs(key.tenant_id, status=status.value if status else None, limit=limit, after=after)
    return JobListOut(jobs=[JobOut.of(j) for j in page], next_after=page[-1].id if len(page) == limit else None)
