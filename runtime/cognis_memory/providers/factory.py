"""Build a provider of each family from that family's settings, through the registry.

The provider kinds and the loaders of their builders are in :mod:`.registry`, each family's settings in
:mod:`.settings` (:class:`~.settings.EmbedderSettings`, :class:`~.settings.RerankerSettings`,
:class:`~.settings.LLMSettings`); each provider class builds itself with ``from_settings``, from its
family's settings and, for rerankers and LLMs, the few values shared with other components (the AWS
region; a local reranker's device). The pipelines receive the result and depend on the protocols in
:mod:`cognis_memory.providers.base` only. A setting that a choice needs but that is missing raises
``ValueError`` naming both the setting and its environment variable. Heavy imports (torch, boto3)
happen only for the provider chosen.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

from cognis_memory.component_settings import env_name
from cognis_memory.providers.base import LLM, Embedder, Reranker
from cognis_memory.providers.registry import EMBEDDERS, LLMS, RERANKERS
from cognis_memory.providers.settings import NONE, EmbedderSettings, LLMSettings, RerankerSettings

__all__ = ["build_embedder", "build_llm", "build_reranker"]


B = TypeVar("B")


def _builder(family: str, kind: str, providers: Mapping[str, Callable[[], B]], *, optional: bool) -> B:
    """The builder of ``kind`` (its module imported now); ``ValueError`` naming the kinds for another."""
    load = providers.get(kind)
    if load is None:
        kinds = ", ".join([NONE, *providers] if optional else providers)
        raise ValueError(f"{family} must be one of {kinds} ({env_name(family)}), got {kind!r}")
    return load()


def build_embedder(settings: EmbedderSettings) -> Embedder:
    """The embedder chosen by ``settings.kind`` (default ``onnx``: the int8 all-MiniLM-L6-v2 built from its
    pinned PyPI source on ONNX Runtime, no torch; ``sentence-transformers`` needs the ``[sentence-transformers]``
    extra)."""
    return _builder("embedder", settings.kind, EMBEDDERS, optional=False)(settings)


def build_reranker(settings: RerankerSettings, *, device: str, aws_region: str | None) -> Reranker | None:
    """The reranker chosen by ``settings.kind``; ``None`` when it is ``"none"``. ``device``: where a local
    cross-encoder runs (the embedding device); ``aws_region``: a SageMaker endpoint's."""
    if settings.kind == NONE:
        return None
    return _builder("reranker", settings.kind, RERANKERS, optional=True)(settings, device=device, aws_region=aws_region)


def build_llm(settings: LLMSettings, *, aws_region: str | None) -> LLM | None:
    """The LLM chosen by ``settings.kind``; ``None`` when it is ``"none"`` (offline mode). ``aws_region``:
    Bedrock's."""
    if settings.kind == NONE:
        return None
    return _builder("llm", settings.kind, LLMS, optional=True)(settings, aws_region=aws_region)
