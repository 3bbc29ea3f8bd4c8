"""Build the configured providers from :class:`~cognis_memory.config.Settings` through the registry.

The provider kinds and their classes are in :mod:`.registry`, each family's settings in
:mod:`.settings` (``settings.embedder``, ``settings.reranker``, ``settings.llm``); each provider class
builds itself with ``from_settings``. The pipelines receive the result and depend on the protocols in
:mod:`cognis_memory.providers.base` only. A setting that a choice needs but that is missing raises
``ValueError`` naming both the setting and its environment variable. Heavy imports (torch, boto3)
happen only for the provider chosen.
"""

from __future__ import annotations

import importlib
from typing import Any

from cognis_memory.component_settings import env_name
from cognis_memory.config import Settings
from cognis_memory.providers.base import LLM, Embedder, Reranker
from cognis_memory.providers.registry import EMBEDDERS, LLMS, RERANKERS, Provider
from cognis_memory.providers.settings import NONE

__all__ = ["build_embedder", "build_llm", "build_reranker"]


def _build(family: str, kind: str, providers: dict[str, Provider], settings: Settings, *, optional: bool) -> Any:
    provider = providers.get(kind)
    if provider is None:
        kinds = ", ".join([NONE, *providers] if optional else providers)
        raise ValueError(f"{family} must be one of {kinds} ({env_name(family)}), got {kind!r}")
    module, _, name = provider.target.partition(":")
    return getattr(importlib.import_module(module), name).from_settings(settings)


def build_embedder(settings: Settings) -> Embedder:
    """The embedder chosen by ``settings.embedder.kind`` (default ``onnx``: the int8 all-MiniLM-L6-v2 built from its
    pinned PyPI source on ONNX Runtime, no torch; ``sentence-transformers`` needs the ``[sentence-transformers]``
    extra)."""
    embedder: Embedder = _build("embedder", settings.embedder.kind, EMBEDDERS, settings, optional=False)
    return embedder


def build_reranker(settings: Settings) -> Reranker | None:
    """The reranker chosen by ``settings.reranker.kind``; ``None`` when it is ``"none"``."""
    if settings.reranker.kind == NONE:
        return None
    reranker: Reranker = _build("reranker", settings.reranker.kind, RERANKERS, settings, optional=True)
    return reranker


def build_llm(settings: Settings) -> LLM | None:
    """The LLM chosen by ``settings.llm.kind``; ``None`` when it is ``"none"`` (offline mode)."""
    if settings.llm.kind == NONE:
        return None
    llm: LLM = _build("llm", settings.llm.kind, LLMS, settings, optional=True)
    return llm
