"""``POST /v1/users/{user_id}/messages``: store what a user said (and extract memories now or in a job);
``GET /v1/users/{user_id}/sessions/{session_id}/messages``: a session's messages back, in order."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from ..auth import ReadKey, WriteKey
from ..deps import RequestIds, Service
from ..schemas import (
    AddMessagesBody,
    AddMessagesOut,
    JobOut,
    MemoryOut,
    MessageOut,
    SessionMessageListOut,
    SessionMessageOut,
)

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


@router.get(
    "/v1/users/{user_id}/sessions/{session_id}/messages",
    response_model=SessionMessageListOut,
    summary="A session's messages, in the order they were said",
    description="The messages of one session of the user as they were sent (text unchanged), in `timestamp` order "
    "(ties by `id`), oldest first. Page on with `cursor` = the previous page's `next_cursor` (null on the last "
    "page); a cursor that is not one is a 422 naming `cursor`. A session without messages is an empty list.",
)
async def list_session_messages(
    user_id: str,
    session_id: str,
    key: ReadKey,
    service: Service,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: Annotated[str | None, Query(description="The previous page's `next_cursor`.")] = None,
):
    page = await service.list_session_messages(key.tenant_id, user_id, session_id, limit=limit, cursor=cursor)
    return SessionMessageListOut(
        messages=[SessionMessageOut.of(m) for m in page],
        next_cursor=service.message_cursor(page[-1]) if len(page) == limit else None,
    )
