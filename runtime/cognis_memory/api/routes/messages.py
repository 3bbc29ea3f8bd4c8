"""``POST /v1/users/{user_id}/messages``: store what a user said (and extract memories now or in a job)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from ..auth import WriteKey
from ..deps import RequestIds, Service
from ..schemas import AddMessagesBody, AddMessagesOut, JobOut, MemoryOut, MessageOut

router = APIRouter(tags=["messages"])


@router.post(
    "/v1/users/{user_id}/messages",
    response_model=AddMessagesOut,
    status_code=201,
    summary="Add messages (sync: all stages; async: store now, extract in a job)",
    description="201: stored, and the facts extracted (sync) or none to extract. 202: stored, the facts "
    "pending in `job` (async mode, or sync mode when the LLM was unreachable or gave no usable answer).",
)
async def add_messages(
    user_id: str, body: AddMessagesBody, key: WriteKey, service: Service, ids: RequestIds, response: Response
):
    result = await service.add_messages(
        key.tenant_id,
        user_id,
        body.messages,
        background=body.mode == "async",
        request_id=ids.request_id,
        client_request_id=ids.client_request_id,
    )
    if result.job is not None:
        response.status_code = 202
    return AddMessagesOut(
        messages=[MessageOut.of(m, c) for m, c in zip(result.messages, result.created, strict=True)],
        memories=[MemoryOut.of(m) for m in result.raw_memories],
        facts=result.facts,
        job=JobOut.of(result.job) if result.job else None,
        extraction=result.extraction,
        degraded=result.degraded,
    )
