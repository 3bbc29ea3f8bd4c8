"""The HTTP API's routes, one module per resource; :func:`cognis_memory.api.app.create_app` includes them."""

from . import health, jobs, keys, memories, messages, search, users

#: In the order their paths appear in the OpenAPI document.
ROUTERS = (health.router, messages.router, search.router, memories.router, users.router, jobs.router, keys.router)
