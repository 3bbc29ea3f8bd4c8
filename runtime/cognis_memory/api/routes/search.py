"""``POST .../search`` (ranked memories) and ``POST .../context`` (the prompt block built from them)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from ...validation import FilterRequest
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


def _filter(body: RetrievalOptions) -> FilterRequest:
    """The body's filter fields as the one filter the service takes."""
    return FilterRequest(**body.model_dump(include=set(FilterRequest.NAMES)))


def _options(body: RetrievalOptions, *besides: str) -> dict[str, Any]:
    """The body's other fields (its options), but ``besides``."""
    return body.model_dump(exclude={*FilterRequest.NAMES, *besides})


@router.post("/v1/users/{user_id}/search", response_model=SearchOut, summary="Search memories")
async def search(user_id: str, body: SearchBody, key: ReadKey, service: Service, ids: RequestIds):
    res = await service.search(
        key.tenant_id,
        user_id,
        body.query,
        filter=_filter(body),
        request_id=ids.request_id,
        client_request_id=ids.client_request_id,
        **_options(body, "query"),
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
        body.message,
        filter=_filter(body),
        request_id=ids.request_id,
        client_request_id=ids.client_request_id,
        **_options(body, "message"),
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
