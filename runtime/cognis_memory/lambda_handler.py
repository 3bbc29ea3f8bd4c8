"""AWS Lambda entry point: the same FastAPI app behind API Gateway / a function URL via Mangum.

Handler: ``cognis_memory.lambda_handler.handler``. The service is built once per execution
environment from ``COGNIS_*`` environment variables; the background worker does not run
inside Lambda (``run_worker`` is forced off: use ``mode=sync`` or a separate worker).

The service is started once, on the first invocation, on the event loop Mangum runs every
invocation on, and stays open for the life of the execution environment (connection pools,
per-user vector indexes). Mangum's ASGI lifespan is off: with it on, every invocation would
start and close the service again.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mangum import Mangum

from .api.app import create_app
from .service import MemoryService

_service = MemoryService.from_settings(run_worker=False)
_asgi = Mangum(create_app(_service, manage_lifecycle=False), lifespan="off")


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    asyncio.get_event_loop().run_until_complete(_service.start(run_worker=False))  # no-op once started
    return _asgi(event, context)
