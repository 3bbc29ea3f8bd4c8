"""Deprecated: the retrieval recipes are in :mod:`cognis_memory.retrieval.recipes`; this module hands its
names on, and warns once on import, for one release."""

from __future__ import annotations

import warnings

from .recipes import (
    ARCHITECTURE,
    RECIPE_DESCRIPTIONS,
    RECIPES,
    RERANKER_RECIPES,
    RetrievalConfig,
    get_recipe,
    with_knobs,
)

warnings.warn(
    "cognis_memory.retrieval.config is deprecated; import from cognis_memory.retrieval.recipes",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = [
    "ARCHITECTURE",
    "RECIPES",
    "RECIPE_DESCRIPTIONS",
    "RERANKER_RECIPES",
    "RetrievalConfig",
    "get_recipe",
    "with_knobs",
]
