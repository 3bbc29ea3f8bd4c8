"""``/v1/users/{user_id}/memories...``: list, read, version history, update (a new version), delete."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from ..auth import ReadKey, WriteKey
from ..deps import Service
from ..schemas import HistoryOut, MemoryListOut, MemoryOut, UpdateMemoryBody

router = APIRouter(tags=["memories"])


@router.get(
    "/v1/users/{user_id}/memories",
    response_model=MemoryListOut,
    summary="List memories, oldest first",
    description="A page of the user's memories in the order they were said (`message_time`, else `created_at`; "
    "ties by `id`). Page on with `cursor` = the previous page's `next_cursor` (null on the last page); a cursor that "
    "is not one is a 422 naming `cursor`. `after` (a memory id, the previous page's `next_after`) is deprecated and "
    "works as before, in the same order.",
)
async def list_memories(
    user_id: str,
    key: ReadKey,
    service: Service,
    include_history: bool = False,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: Annotated[str | None, Query(description="The previous page's `next_cursor`.")] = None,
    after: Annotated[str | None, Query(description="Deprecated: use `cursor`.", deprecated=True)] = None,
):
    page = await service.list_memories(
        key.tenant_id, user_id, include_history=include_history, limit=limit, cursor=cursor, after=after
    )
    more = len(page) == limit
    return MemoryListOut(
        memories=[MemoryOut.of(m) for m in page],
        next_cursor=service.memory_cursor(page[-1]) if more else None,
        next_after=page[-1].id if more else None,
    )


@router.get("/v1/users/{user_id}/memories/{memory_id}", response_model=MemoryOut)
async def get_memory(user_id: str, memory_id: str, key: ReadKey, service: Service):
    return MemoryOut.of(await service.get_memory(key.tenant_id, user_id, memory_id))


@router.get(
    "/v1/users/{user_id}/memories/{memory_id}/history",
    response_model=HistoryOut,
    summary="Every version of the memory's chain, oldest first",
)
async def memory_history(user_id: str, memory_id: str, key: ReadKey, service: Service):
    return HistoryOut(versions=[MemoryOut.of(m) for m in await service.history(key.tenant_id, user_id, memory_id)])


@router.patch(
    "/v1/users/{user_id}/memories/{memory_id}", response_model=MemoryOut, summary="Write a new version of a memory"
)
async def update_memory(user_id: str, memory_id: str, body: UpdateMemoryBody, key: WriteKey, service: Service):
    return MemoryOut.of(
        await service.update_memory(
            key.tenant_id,
            user_id,
            memory_id,
            content=body.content,
            category=body.category,
            event_time=body.event_time,
        )
    )


@router.delete(
    "/v1/users/{user_id}/memories/{memory_id}",
    response_model=MemoryOut,
    summary="Delete a memory (tombstone version; history kept)",
)
async def delete_memory(user_id: str, memory_id: str, key: WriteKey, service: Service):
    return MemoryOut.of(await service.delete_memory(key.tenant_id, user_id, memory_id))
