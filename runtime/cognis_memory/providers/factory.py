"""Build the configured providers from :class:`~cognis_memory.config.Settings` through the registry.

The provider kinds and their classes are in :mod:`.registry`, each provider's typed settings in
:mod:`.settings`; the pipelines receive the result and depend on the protocols in
:mod:`cognis_memory.providers.base` only. A setting that a choice needs but that is missing raises
``ValueError`` naming both the setting and its environment variable. Heavy imports (torch, boto3)
happen only for the provider chosen.
"""

from __future__ import annotations

import importlib
from typing import Any

from cognis_memory.config import Settings
from cognis_memory.providers.base import LLM, Embedder, Reranker
from cognis_memory.providers.registry import EMBEDDERS, LLMS, RERANKERS, Provider
from cognis_memory.providers.settings import env_name

__all__ = ["build_embedder", "build_llm", "build_reranker"]

#: the kind that means "no provider" in the families where one is optional
NONE = "none"


def _build(family: str, kind: str, providers: dict[str, Provider], settings: Settings, *, optional: bool) -> Any:
    provider = providers.get(kind)
    if provider is None:
        kinds = ", ".join([NONE, *providers] if optional else providers)
        raise ValueError(f"{family} must be one of {kinds} ({env_name(family)}), got {kind!r}")
    arguments = provider.settings.from_settings(settings, choice=f"{family}={kind}").arguments()
    module, _, name = provider.target.partition(":")
    return getattr(importlib.import_module(module), name)(**arguments)


def build_embedder(settings: Settings) -> Embedder:
    """The embedder chosen by ``settings.embedder`` (default ``onnx``: the int8 all-MiniLM-L6-v2 built from its pinned PyPI source on
    ONNX Runtime, no torch; ``sentence-transformers`` needs the ``[sentence-transformers]`` extra)."""
    embedder: Embedder = _build("embedder", settings.embedder, EMBEDDERS, settings, optional=False)
    return embedder


def build_reranker(settings: Settings) -> Reranker | None:
    """The reranker chosen by ``settings.reranker``; ``None`` when it is ``"none"``."""
    if settings.reranker == NONE:
        return None
    reranker: Reranker = _build("reranker", settings.reranker, RERANKERS, settings, optional=True)
    return reranker


def build_llm(settings: Settings) -> LLM | None:
    """The LLM chosen by ``settings.llm``; ``None`` when it is ``"none"`` (offline mode)."""
    if settings.llm == NONE:
        return None
    llm: LLM = _build("llm", settings.llm, LLMS, settings, optional=True)
    return llm
