"""Dependencies every route module shares: the service and the request's ids.

Authorization is not here: each route declares :data:`~.auth.ReadKey` or :data:`~.auth.WriteKey` itself.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from ..service import MemoryService
from .middleware import request_ids


def _service(request: Request) -> MemoryService:
    return request.app.state.service


def _ids(request: Request) -> dict[str, str | None]:
    """The request's ids for the service's log line (set by the RequestContext middleware)."""
    request_id, client_request_id = request_ids(request.scope)
    return {"request_id": request_id, "client_request_id": client_request_id}


#: The :class:`MemoryService` the app was created with.
Service = Annotated[MemoryService, Depends(_service)]
#: ``{"request_id", "client_request_id"}`` to pass to the service's request-logging operations.
RequestIds = Annotated[dict[str, str | None], Depends(_ids)]
