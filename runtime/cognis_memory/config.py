"""Typed configuration for the whole service: the components' settings, composed.

Each component's settings class lives beside the component (``stores/settings.py``,
``caching/settings.py``, ``providers/settings.py``, ``encoding/settings.py``,
``retrieval/settings.py``, ``ingest/settings.py``, ``api_settings.py``,
``telemetry/settings.py``); code reads ``settings.<component>.<field>``. From outside, every
setting keeps its flat name (:mod:`.component_settings`): the environment variable
``COGNIS_<FLAT NAME>`` and the keyword argument ``Settings(postgres_dsn=...)`` (or, whole,
``Settings(postgres={"dsn": ...})``). Every value resolves in this order: an explicit argument
(``Settings(store="dual")`` or a CLI flag), then the environment, then the default. Two settings
belong to no single component and are fields here: ``store`` (which backend) and ``aws_region``
(every AWS client: Bedrock, SageMaker, Secrets Manager, RDS IAM, OpenSearch SigV4).
The retrieval knobs live in :class:`cognis_memory.retrieval.recipes.RetrievalConfig`; the
service settings carry the name of a recipe plus optional per-knob overrides. No component reads this
class: each is built from its own section by :mod:`.wiring` (or by the service and the entry points).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Annotated, Any

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from .api_settings import ApiSettings
from .caching.settings import CacheSettings
from .component_settings import (
    ComponentSettings,
    FlatEnvironment,
    FlatField,
    NestedArguments,
    flat_fields,
    nest,
    registered,
    registered_kind,
)
from .encoding.settings import EncoderSettings
from .ingest.settings import IngestSettings, JobSettings
from .providers.bedrock_models import default_model_id
from .providers.registry import EMBEDDERS, LLMS, RERANKERS
from .providers.settings import NONE, EmbedderSettings, LLMSettings, RerankerSettings
from .retrieval.settings import RetrievalSettings
from .stores.registry import STORES
from .stores.settings import EmbeddedStoreSettings, OpenSearchSettings, PostgresSettings
from .telemetry.settings import TelemetrySettings

#: The tenant of the CLI's commands when ``--tenant`` is not given, and of the demo's API key
#: (``scripts/demo.sh``), so what the CLI stores is what a server started with that key serves.
DEFAULT_TENANT = "default"


class Settings(BaseSettings):
    """Service configuration: the components' settings, read under their flat names (``COGNIS_<NAME>``
    variables, :class:`~.component_settings.FlatEnvironment`; keyword arguments, :func:`~.component_settings.nest`)."""

    model_config = SettingsConfigDict(extra="ignore")

    store: Annotated[str, registered("store", STORES)] = Field("embedded", description="Which store backs the service.")
    embedded: EmbeddedStoreSettings = Field(default_factory=EmbeddedStoreSettings)
    postgres: PostgresSettings = Field(default_factory=PostgresSettings)
    opensearch: OpenSearchSettings = Field(default_factory=OpenSearchSettings)
    cache: CacheSettings = Field(default_factory=CacheSettings)
    embedder: Annotated[EmbedderSettings, registered_kind("embedder", EMBEDDERS)] = Field(
        default_factory=EmbedderSettings
    )
    encoder: EncoderSettings = Field(default_factory=EncoderSettings)
    reranker: Annotated[RerankerSettings, registered_kind("reranker", [NONE, *RERANKERS])] = Field(
        default_factory=RerankerSettings
    )
    llm: Annotated[LLMSettings, registered_kind("llm", [NONE, *LLMS])] = Field(default_factory=LLMSettings)
    aws_region: str | None = Field(None, description="AWS region for Bedrock, SageMaker, Secrets Manager, OpenSearch.")
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    jobs: JobSettings = Field(default_factory=JobSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Arguments (flat names nested into their components), then ``COGNIS_*`` variables."""
        arguments = getattr(init_settings, "init_kwargs", {})
        return NestedArguments(settings_cls, arguments), FlatEnvironment(settings_cls)

    @classmethod
    def flat_fields(cls) -> Iterator[FlatField]:
        """Every setting under its flat name (``COGNIS_*`` variable, keyword argument), in order."""
        return flat_fields(cls)

    def replace(self, **values: Any) -> Settings:
        """A copy with ``values`` (flat names, or components whole) in place, like ``model_copy(update=...)``:
        not validated again."""
        update: dict[str, Any] = {}
        for key, value in nest(type(self), values).items():
            current = getattr(self, key, None)
            if isinstance(value, dict) and isinstance(current, ComponentSettings):
                names: dict[str, str] = {flat: name for name, flat in current.flat_names().items()}
                fields: dict[str, Any] = {names.get(str(k), str(k)): v for k, v in value.items()}
                update[key] = current.model_copy(update=fields)
            else:
                update[key] = value
        return self.model_copy(update=update)

    @model_validator(mode="after")
    def _default_bedrock_model(self) -> Settings:
        if self.llm.bedrock_model_id is None:  # unset; an explicit "" stays and is refused with llm=bedrock
            region = self.aws_region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
            self.llm.bedrock_model_id = default_model_id(region)
        return self

    @property
    def resolved_query_prefix(self) -> str:
        """The query instruction: ``embedding_query_prefix`` if set, else the embedding model's."""
        if self.encoder.query_prefix is not None:
            return self.encoder.query_prefix
        return self.embedder.model_spec.query_prefix

    @property
    def resolved_update_min_similarity(self) -> float:
        """``llm_update_min_similarity``, else the embedding model's."""
        if self.ingest.update_min_similarity is not None:
            return self.ingest.update_min_similarity
        return self.embedder.model_spec.update_similarity

    @property
    def resolved_recipe_overrides(self) -> dict[str, float | int | bool]:
        """The embedding model's retrieval thresholds, then ``recipe_overrides`` over them."""
        return {**self.embedder.model_spec.recipe_overrides, **self.retrieval.recipe_overrides}
