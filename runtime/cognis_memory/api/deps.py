"""Dependencies every route module shares: the service and the request's ids.

Authorization is not here: each route declares :data:`~.auth.ReadKey` or :data:`~.auth.WriteKey` itself.

Both are ``async def`` although they only read the request: FastAPI runs a plain ``def`` dependency on its thread
pool, two thread hops per request for nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from ..service import MemoryService
from .middleware import request_ids


async def _service(request: Request) -> MemoryService:
    return request.app.state.service


@dataclass(frozen=True, slots=True)
class Ids:
    """The request's ids for the service's log line (set by the RequestEnvelope middleware)."""

    request_id: str
    client_request_id: str | None


async def _ids(request: Request) -> Ids:
    return Ids(*request_ids(request.scope))


#: The :class:`MemoryService` the app was created with.
Service = Annotated[MemoryService, Depends(_service)]
#: The request's ids, for the service's operations that log a line per request.
RequestIds = Annotated[Ids, Depends(_ids)]
