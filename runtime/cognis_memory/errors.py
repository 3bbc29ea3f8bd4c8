"""Exceptions shared by the pipelines, the stores and the API layer."""

from __future__ import annotations


class CognisError(Exception):
    """Base class of the service's own errors."""


class InvalidInputError(CognisError, ValueError):
    """The caller sent something unacceptable; ``field`` names the offending input."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class NotFoundError(CognisError, LookupError):
    """No such record *for this tenant and user* (other owners' ids look the same)."""


class ConflictError(CognisError):
    """The record changed under us (for example, the version is no longer current)."""


class DependencyUnavailableError(CognisError):
    """A backing service (OpenSearch, Redis, a model endpoint, the LLM) failed or timed out."""

    def __init__(self, dependency: str, message: str = "") -> None:
        super().__init__(f"{dependency} unavailable: {message}" if message else f"{dependency} unavailable")
        self.dependency = dependency


class PermissionDeniedError(CognisError):
    """The API key is valid but may not perform this operation (for example read-only)."""
