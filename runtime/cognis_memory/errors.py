"""The service's exception tree: every exception class the runtime defines derives from :class:`CognisError`.

The subclasses the HTTP API answers with its error body (``api/errors.py`` maps each by class) are
:class:`InvalidInputError` (422, naming the field), :class:`PermissionDeniedError` (403),
:class:`NotFoundError` (404), :class:`ConflictError` (409) and :class:`DependencyUnavailableError`
(503); any other ``CognisError`` that reaches the API is a 500. :class:`ConfigurationError` stops the
service at start: its settings, or the store they point at, cannot be used. A class that callers also
catch as a built-in exception keeps that base too (``InvalidInputError`` is a ``ValueError``).
"""

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


class ConfigurationError(CognisError):
    """The service cannot run with its settings, or on the store they point at; the message names the setting.

    Raised while the service is built, never for a request. The store's schema errors
    (``stores/migrations/``), the vector-space check and the API key list derive from it.
    """


class SettingError(ConfigurationError, ValueError):
    """One setting has a value the service cannot use; ``setting`` names it (its field name in ``Settings``)."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(f"{setting}: {message}")
        self.setting = setting
        self.message = message
