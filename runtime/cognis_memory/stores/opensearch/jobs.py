"""The OpenSearch-only store's job-queue role.

Job claims search due jobs, re-read each candidate (realtime) and update it with
``if_seq_no``/``if_primary_term``, so two workers never claim the same job.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from opensearchpy import exceptions as os_exc

from ...domain import Job, JobStatus, Owner
from ..records import OPENSEARCH, epoch_us, iso, job_from_row, job_to_row
from .documents import owner_key
from .indices import OpenSearchIndices


class OpenSearchJobs:
    """The :class:`~cognis_memory.stores.roles.JobQueue` of an OpenSearch-only store."""

    def __init__(self, ix: OpenSearchIndices) -> None:
        self.ix = ix

    @staticmethod
    def _job_doc(job: Job, lease_until: datetime | None = None) -> dict[str, Any]:
        return job_to_row(job, OPENSEARCH) | {
            "next_attempt_us": epoch_us(job.next_attempt_at),
            "lease_until": iso(lease_until),
            "lease_until_us": epoch_us(lease_until) if lease_until is not None else None,
        }

    async def _put_job(self, job: Job) -> None:
        await self.ix.runner(
            self.ix.client.index, index=self.ix.jobs, id=owner_key(job.tenant_id, job.user_id, job.id),
            body=self._job_doc(job), refresh=self.ix.refresh, request_timeout=self.ix.write_timeout_s,
        )  # fmt: skip

    async def enqueue_job(self, job: Job) -> None:
        await self._put_job(job)

    async def save_job(self, job: Job) -> None:
        await self._put_job(job)

    @staticmethod
    def _due(src: dict[str, Any], now_us: int) -> bool:
        if src["status"] in (JobStatus.QUEUED.value, JobStatus.FAILED.value):
            return int(src["next_attempt_us"]) <= now_us
        lease = src.get("lease_until_us")
        return src["status"] == JobStatus.RUNNING.value and lease is not None and int(lease) <= now_us

    async def claim_job(self, now: datetime, lease_s: float) -> Job | None:
        now_us = epoch_us(now)
        due = {
            "bool": {
                "should": [
                    {"bool": {"filter": [{"terms": {"status": ["queued", "failed"]}}, {"range": {"next_attempt_us": {"lte": now_us}}}]}},
                    {"bool": {"filter": [{"term": {"status": "running"}}, {"range": {"lease_until_us": {"lte": now_us}}}]}},
                ],
                "minimum_should_match": 1,
            }
        }  # fmt: skip
        body = {"size": 10, "sort": [{"next_attempt_us": "asc"}], "query": due, "_source": False}
        res = await self.ix.runner(
            self.ix.client.search, index=self.ix.jobs, body=body, request_timeout=self.ix.search_timeout_s
        )
        for hit in res["hits"]["hits"]:
            fresh = await self.ix.get_source(self.ix.jobs, hit["_id"])  # the search may be up to a refresh behind
            if fresh is None or not self._due(fresh["_source"], now_us):
                continue
            job = job_from_row(fresh["_source"], OPENSEARCH)
            job.status, job.attempts, job.updated_at = JobStatus.RUNNING, job.attempts + 1, now
            lease_until = now + timedelta(seconds=lease_s)
            try:
                await self.ix.runner(
                    self.ix.client.index, index=self.ix.jobs, id=hit["_id"], body=self._job_doc(job, lease_until),
                    if_seq_no=fresh["_seq_no"], if_primary_term=fresh["_primary_term"],
                    refresh=self.ix.refresh, request_timeout=self.ix.write_timeout_s,
                )  # fmt: skip
            except os_exc.ConflictError:
                continue  # another worker took it
            return job
        return None

    async def get_job(self, owner: Owner, job_id: str) -> Job | None:
        got = await self.ix.get_source(self.ix.jobs, owner_key(owner.tenant_id, owner.user_id, job_id))
        return job_from_row(got["_source"], OPENSEARCH) if got else None

    async def list_jobs(
        self, tenant_id: str, *, status: JobStatus | None = None, limit: int = 100, after_id: str | None = None
    ) -> list[Job]:
        """A search: sees jobs written up to a refresh ago (``refresh``)."""
        filters: list[dict[str, Any]] = [{"term": {"tenant_id": tenant_id}}]
        if status is not None:
            filters.append({"term": {"status": status.value}})
        if after_id is not None:
            filters.append({"range": {"id": {"gt": after_id}}})
        query = {"bool": {"filter": filters}}
        body = {"size": limit, "sort": [{"id": "asc"}], "query": query, "track_total_hits": False}
        res = await self.ix.runner(
            self.ix.client.search, index=self.ix.jobs, body=body, request_timeout=self.ix.search_timeout_s
        )
        return [job_from_row(h["_source"], OPENSEARCH) for h in res["hits"]["hits"]]
