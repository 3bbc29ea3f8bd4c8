"""``POST .../search`` (ranked memories) and ``POST .../context`` (the prompt block built from them)."""

from __future__ import annotations

from typing import TypeVar

from fastapi import APIRouter

from ...search_filter import MemoryFilter
from ..auth import ReadKey
from ..deps import RequestIds, Service
from ..schemas import (
    ContextBody,
    ContextMemoryOut,
    ContextOut,
    MemoryOut,
    RetrievalOptions,
    SearchBody,
    SearchOut,
)

router = APIRouter(tags=["search"])

T = TypeVar("T")


def _set(values: list[T] | None) -> frozenset[T] | None:
    return None if values is None else frozenset(values)


def search_filter(body: RetrievalOptions) -> MemoryFilter:
    """The body's filter fields as the search's filter (the service checks it)."""
    return MemoryFilter(
        scopes=_set(body.scopes),
        session_id=body.session_id,
        categories=_set(body.categories),
        kinds=_set(body.kinds),
        agent_id=body.agent_id,
        time_from=body.time_from,
        time_to=body.time_to,
    )


@router.post("/v1/users/{user_id}/search", response_model=SearchOut, summary="Search memories")
async def search(user_id: str, body: SearchBody, key: ReadKey, service: Service, ids: RequestIds):
    res = await service.search(
        key.tenant_id,
        user_id,
        body.query,
        limit=body.limit,
        filter=search_filter(body),
        include_history=body.include_history,
        explain=body.explain,
        now=body.now,
        recipe=body.recipe,
        request_id=ids.request_id,
        client_request_id=ids.client_request_id,
    )
    return SearchOut.of(res, explain=body.explain)


@router.post(
    "/v1/users/{user_id}/context",
    response_model=ContextOut,
    summary="Relevant memories as a compact text block for a system prompt, sized to a token budget",
)
async def context(user_id: str, body: ContextBody, key: ReadKey, service: Service, ids: RequestIds):
    block, res = await service.prompt_block(
        key.tenant_id,
        user_id,
        body.query,
        message=body.message,
        max_tokens=body.max_tokens,
        with_ids=body.with_ids,
        limit=body.limit,
        filter=search_filter(body),
        include_history=body.include_history,
        now=body.now,
        recipe=body.recipe,
        request_id=ids.request_id,
        client_request_id=ids.client_request_id,
    )
    return ContextOut(
        text=block.text,
        tokens=block.tokens,
        memories=[
            ContextMemoryOut(memory=MemoryOut.of(i.memory), history=[MemoryOut.of(v) for v in i.history])
            for i in block.items
        ],
        omitted=block.omitted,
        degraded=res.degraded,
        query_analysis=res.analysis.to_dict(),
    )
