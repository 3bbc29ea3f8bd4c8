"""Nested settings under flat names: the base of every component's settings and how the flat names reach them.

Each component (a store, the cache, a provider family, the encoder, the API, telemetry...) has its settings
class beside its code, a :class:`ComponentSettings` whose fields carry their flat name as ``alias``
(``PostgresSettings.dsn`` is ``postgres_dsn``). :class:`cognis_memory.config.Settings` composes them, and
the flat name is what the outside sees: the environment variable ``COGNIS_<FLAT NAME>`` (read by
:class:`FlatEnvironment`) and the keyword argument ``Settings(postgres_dsn=...)`` (moved into its component
by :func:`nest`). A validation error names the component and the flat name (``postgres.postgres_port``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, get_origin

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import InitErrorDetails
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

ENV_PREFIX = "COGNIS_"


def env_name(flat: str) -> str:
    """The environment variable of a flat setting name: ``postgres_dsn`` -> ``COGNIS_POSTGRES_DSN``."""
    return f"{ENV_PREFIX}{flat.upper()}"


def registered(family: str, kinds: Mapping[str, object]) -> AfterValidator:
    """A validator that takes a value only when the registry of ``family`` (stores/registry.py,
    providers/embedding_models.py) has it: ``Annotated[str, registered(...)]``."""

    def check(value: str) -> str:
        if value not in kinds:
            raise ValueError(f"unknown {family} kind {value!r}; the kinds are {', '.join(kinds)}")
        return value

    return AfterValidator(check)


def registered_kind(family: str, kinds: Collection[str]) -> AfterValidator:
    """A validator of a component's settings that takes them only when ``kinds`` has their ``kind``:
    ``Annotated[EmbedderSettings, registered_kind("embedder", [...])]``, for a registry that stands above
    the component's settings (it loads the classes that read them) and that the settings cannot import.
    The error names the component and the flat name of its ``kind``, as a check of the field would."""

    def check(value: ComponentSettings) -> ComponentSettings:
        kind = getattr(value, "kind")  # noqa: B009  # every component with a registry has one; ComponentSettings has not
        if kind not in kinds:
            alias = type(value).model_fields["kind"].alias or "kind"
            error = ValueError(f"unknown {family} kind {kind!r}; the kinds are {', '.join(kinds)}")
            detail = InitErrorDetails(type="value_error", loc=(alias,), input=kind, ctx={"error": error})
            raise ValidationError.from_exception_data(type(value).__name__, [detail])
        return value

    return AfterValidator(check)


class ComponentSettings(BaseModel):
    """Base of a component's settings: each field's ``alias`` is its flat name; fields accept either name."""

    model_config = ConfigDict(validate_by_name=True, validate_by_alias=True, extra="forbid")

    @classmethod
    def flat_names(cls) -> dict[str, str]:
        """``{field name: flat name}`` of every field."""
        return {name: info.alias or name for name, info in cls.model_fields.items()}


@dataclass(frozen=True, slots=True)
class FlatField:
    """One setting as the outside names it (``flat``) and where it lives (``component``, ``name``;
    ``component`` is ``None`` for a field of the top-level settings themselves)."""

    flat: str
    component: str | None
    name: str
    info: FieldInfo

    @property
    def env(self) -> str:
        return env_name(self.flat)

    @property
    def path(self) -> str:
        """Where code reads it: ``postgres.dsn``, or ``store`` for a top-level field."""
        return f"{self.component}.{self.name}" if self.component else self.name


def component_type(info: FieldInfo) -> type[ComponentSettings] | None:
    """The component class a top-level field holds, or None for a plain field."""
    annotation = info.annotation
    if isinstance(annotation, type) and issubclass(annotation, ComponentSettings):
        return annotation
    return None


def flat_fields(settings_cls: type[BaseModel]) -> Iterator[FlatField]:
    """Every setting of ``settings_cls`` under its flat name, in declaration order (components expanded)."""
    for top, info in settings_cls.model_fields.items():
        component = component_type(info)
        if component is None:
            yield FlatField(top, None, top, info)
            continue
        for name, sub in component.model_fields.items():
            yield FlatField(sub.alias or name, top, name, sub)


def nest(settings_cls: type[BaseModel], values: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments with flat names (``postgres_dsn=...``) moved into their components
    (``{"postgres": {"postgres_dsn": ...}}``); a component given whole (a dict or its settings object)
    stays, a dict's keys turned into flat names so it merges with what the environment gave. A name that
    is both a component and a flat field (``telemetry``, ``llm``) is the flat field unless given a dict
    or a settings object. Unknown names pass through (and are ignored)."""
    by_flat = {f.flat: f for f in flat_fields(settings_cls)}
    components = {top: c for top, info in settings_cls.model_fields.items() if (c := component_type(info))}
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key in components and isinstance(value, Mapping):
            flat = components[key].flat_names()
            merged = out.setdefault(key, {})
            if isinstance(merged, dict):
                merged.update({flat.get(k, k): v for k, v in value.items()})
            continue
        if key in components and isinstance(value, BaseModel):
            out[key] = value
            continue
        field = by_flat.get(key)
        if field is None or field.component is None:
            out[key] = value
            continue
        target = out.setdefault(field.component, {})
        if isinstance(target, dict):  # a settings object given whole wins over its flat names
            target[field.flat] = value
    return out


def _decoded(info: FieldInfo, raw: str, env: str) -> Any:
    """A dict- or list-typed setting arrives as JSON; anything else as the string (pydantic converts it)."""
    origin = get_origin(info.annotation) or info.annotation
    if origin in (dict, list):
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{env}: not valid JSON ({exc.msg})") from None
    return raw


class FlatEnvironment(PydanticBaseSettingsSource):
    """The environment as a settings source: ``COGNIS_<FLAT NAME>`` (any case) for every field of every
    component, as nested values keyed by flat name (so the keyword arguments, also nested, win when merged)."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str] | None = None) -> None:
        super().__init__(settings_cls)
        source = os.environ if environ is None else environ
        self._environ = {k.upper(): v for k, v in source.items() if k.upper().startswith(ENV_PREFIX)}

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        raw = self._environ.get(env_name(field_name))
        return raw, field_name, False

    def __call__(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for field in flat_fields(self.settings_cls):
            raw = self._environ.get(field.env)
            if raw is None:
                continue
            value = _decoded(field.info, raw, field.env)
            if field.component is None:
                out[field.flat] = value
            else:
                out.setdefault(field.component, {})[field.flat] = value
        return out


class NestedArguments(PydanticBaseSettingsSource):
    """The constructor's keyword arguments as a settings source, nested by :func:`nest`."""

    def __init__(self, settings_cls: type[BaseSettings], init_kwargs: Mapping[str, Any]) -> None:
        super().__init__(settings_cls)
        self._values = nest(settings_cls, init_kwargs)

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self._values.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return self._values
