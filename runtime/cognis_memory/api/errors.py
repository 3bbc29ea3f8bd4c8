"""The HTTP API's errors: one body shape, ``{"error": {"code", "message", "field"}}``, for every refusal.

:func:`install_error_handlers` maps the framework's and the service's exceptions to it:
422 invalid input (naming the field), 400 a body that is not UTF-8, 403 a read-only key on a
write, 404 not found (also for other owners' ids), 405, 409 conflict, 503 a dependency that is
down (retryable, with ``Retry-After``). The middleware answers 401, 413 and 500 itself
(:mod:`.auth`, :mod:`.middleware`) with the same body.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import (
    CognisError,
    ConflictError,
    DependencyUnavailableError,
    InvalidInputError,
    NotFoundError,
    PermissionDeniedError,
)
from .middleware import unavailable_error
from .schemas import ErrorOut

#: The error answers every route may give, for the OpenAPI document.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorOut, "description": "Missing or unknown API key"},
    403: {"model": ErrorOut, "description": "The key may not do this (read-only)"},
    404: {"model": ErrorOut, "description": "Not found for this tenant and user"},
    422: {"model": ErrorOut, "description": "Invalid input; `field` names it"},
    503: {"model": ErrorOut, "description": "A dependency is unavailable; retry later"},
}


def error_response(status: int, code: str, message: str, field: str | None = None, **headers: str) -> JSONResponse:
    return JSONResponse(
        status_code=status, content={"error": {"code": code, "message": message, "field": field}}, headers=headers
    )


def field_path(loc: tuple | list) -> str:
    """Pydantic's location as a field path: ("body", "messages", 0, "content") -> messages[0].content."""
    out = ""
    for i, part in enumerate(loc):
        if i == 0 and part in ("body", "query", "path", "header"):
            continue  # only the first element is the location; a field may be called "query"
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


async def _validation(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    first = errors[0] if errors else {}
    field = field_path(first.get("loc", ())) or "body"
    msg = first.get("msg", "invalid input")
    if first.get("type") == "extra_forbidden":
        msg = "unknown field"
    if first.get("type") == "json_invalid":
        field, msg = "body", "not valid JSON"
    return error_response(422, "invalid_input", f"{field}: {msg}", field)


async def _http(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400:  # the body could not be parsed (invalid UTF-8)
        return error_response(400, "invalid_body", "body: not valid UTF-8 JSON", "body")
    codes = {404: "not_found", 405: "method_not_allowed"}
    return error_response(exc.status_code, codes.get(exc.status_code, "http_error"), str(exc.detail))


#: The service's errors the API answers, by class: (status, code). ``install_error_handlers`` registers each
#: class, and the framework picks the nearest one in an exception's class hierarchy; any other
#: :class:`~cognis_memory.errors.CognisError` reaches the outermost middleware, a 500.
STATUS_BY_ERROR: dict[type[CognisError], tuple[int, str]] = {
    InvalidInputError: (422, "invalid_input"),
    PermissionDeniedError: (403, "forbidden"),
    NotFoundError: (404, "not_found"),
    ConflictError: (409, "conflict"),
    DependencyUnavailableError: (503, "dependency_unavailable"),
}


async def _service_error(_: Request, exc: Exception) -> JSONResponse:
    """The error body of a :class:`CognisError` in :data:`STATUS_BY_ERROR`, found by its class."""
    if isinstance(exc, DependencyUnavailableError):  # names the dependency and says when to retry
        status, code, message, headers = unavailable_error(exc)
        return error_response(status, code, message, **{k.decode(): v.decode() for k, v in headers})
    status, code = next(STATUS_BY_ERROR[c] for c in type(exc).__mro__ if c in STATUS_BY_ERROR)
    return error_response(status, code, str(exc), exc.field if isinstance(exc, InvalidInputError) else None)


def install_error_handlers(app: FastAPI) -> None:
    """Answer every known exception with the API's error body."""
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(StarletteHTTPException, _http)
    for error in STATUS_BY_ERROR:
        app.add_exception_handler(error, _service_error)
