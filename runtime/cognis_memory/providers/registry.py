"""Every provider kind per family: ``{kind: loader}``, a loader being a function that imports the provider's
module and returns its ``from_settings``.

Adding a provider is its module (its class with a ``from_settings`` classmethod that takes its family's
settings, :mod:`.factory` says with what else, and a settings field of its own in :mod:`.settings` when it
needs one), one loader function here and its line in the family's table; the accepted values of
``COGNIS_EMBEDDER``, ``COGNIS_RERANKER`` and ``COGNIS_LLM`` (checked by :class:`cognis_memory.config.Settings`)
and the CLI's ``--embedder``/``--reranker``/``--llm`` choices are read from these tables. ``none`` (no
reranker, no LLM) is not a provider and is not listed. A loader imports its module only when it is called,
that is when its kind is chosen, so a provider's libraries are needed only where it is used. The stores
(:mod:`cognis_memory.stores.registry`) and the retrieval stages (:mod:`cognis_memory.retrieval.registry`)
are registered the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from .base import LLM, Embedder, Reranker
from .settings import EmbedderSettings, LLMSettings, RerankerSettings

#: An embedder's ``from_settings``.
EmbedderBuilder = Callable[[EmbedderSettings], Embedder]


class RerankerBuilder(Protocol):
    """A reranker's ``from_settings``: ``device`` for a local model, ``aws_region`` for an AWS endpoint."""

    def __call__(self, settings: RerankerSettings, *, device: str, aws_region: str | None) -> Reranker: ...


class LLMBuilder(Protocol):
    """An LLM's ``from_settings``: ``aws_region`` for Bedrock."""

    def __call__(self, settings: LLMSettings, *, aws_region: str | None) -> LLM: ...


def _onnx() -> EmbedderBuilder:
    from .onnx_embedder import OnnxEmbedder

    return OnnxEmbedder.from_settings


def _sentence_transformers() -> EmbedderBuilder:
    from .sentence_transformers_embedder import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder.from_settings


def _local_reranker() -> RerankerBuilder:
    from .rerankers import LocalCrossEncoderReranker

    return LocalCrossEncoderReranker.from_settings


def _sagemaker_reranker() -> RerankerBuilder:
    from .rerankers import SageMakerReranker

    return SageMakerReranker.from_settings


def _bedrock() -> LLMBuilder:
    from .llms import BedrockConverseLLM

    return BedrockConverseLLM.from_settings


def _openai() -> LLMBuilder:
    from .llms import OpenAICompatibleLLM

    return OpenAICompatibleLLM.from_settings


EMBEDDERS: dict[str, Callable[[], EmbedderBuilder]] = {
    "onnx": _onnx,
    "sentence-transformers": _sentence_transformers,
}
RERANKERS: dict[str, Callable[[], RerankerBuilder]] = {
    "local": _local_reranker,
    "sagemaker": _sagemaker_reranker,
}
LLMS: dict[str, Callable[[], LLMBuilder]] = {
    "bedrock": _bedrock,
    "openai": _openai,
}
