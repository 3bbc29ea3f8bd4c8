"""``/health`` (liveness) and ``/ready`` (readiness): open, and they reveal no data."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from ..deps import Service

router = APIRouter(tags=["health"])


@router.get("/health", summary="Liveness")
async def health() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/ready", summary="Readiness: every store component reachable")
async def ready(service: Service) -> JSONResponse:
    ok, checks = await service.readiness()
    content = {"ready": ok, "checks": checks, **service.readiness_details()}
    return JSONResponse(status_code=200 if ok else 503, content=content)
