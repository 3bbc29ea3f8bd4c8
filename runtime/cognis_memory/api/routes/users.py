"""``DELETE /v1/users/{user_id}`` (forget a user) and ``GET /v1/users`` (the tenant's users)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from ..auth import ReadKey, WriteKey
from ..deps import Service
from ..schemas import ForgetOut, UserListOut, UserOut

router = APIRouter(tags=["users"])


@router.delete("/v1/users/{user_id}", response_model=ForgetOut, summary="Forget a user: hard delete everything")
async def forget_user(user_id: str, key: WriteKey, service: Service):
    return ForgetOut(deleted=await service.forget_user(key.tenant_id, user_id))


@router.get("/v1/users", response_model=UserListOut, summary="The tenant's users, paged by user id")
async def list_users(
    key: ReadKey,
    service: Service,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    after: Annotated[str | None, Query()] = None,
):
    page = await service.list_users(key.tenant_id, limit=limit, after=after)
    return UserListOut(users=[UserOut.of(u) for u in page], next_after=page[-1].user_id if len(page) == limit else None)
