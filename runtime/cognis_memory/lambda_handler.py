"""AWS Lambda entry point: the same FastAPI app behind API Gateway / a function URL via Mangum.

Handler: ``cognis_memory.lambda_handler.handler``. The service is built once per execution
environment from ``COGNIS_*`` environment variables; the background worker does not run
inside Lambda (``run_worker`` is forced off: use ``mode=sync`` or a separate worker).
"""

from __future__ import annotations

from mangum import Mangum

from .api.app import create_app
from .service import MemoryService

_service = MemoryService.from_settings(run_worker=False)
handler = Mangum(create_app(_service), lifespan="auto")
