"""``GET /v1/key``: the calling key's tenant and whether it is read-only."""

from __future__ import annotations

from fastapi import APIRouter

from ..auth import ReadKey
from ..schemas import KeyOut

router = APIRouter(tags=["keys"])


@router.get("/v1/key", response_model=KeyOut, summary="The calling key: its tenant, whether read-only")
async def key_info(key: ReadKey):
    return KeyOut(tenant_id=key.tenant_id, read_only=key.read_only)
