"""Settings of retrieval: the recipe the service runs and the knobs set over every recipe
(:mod:`.config`). Composed by :class:`cognis_memory.config.Settings`; each field's ``alias`` is its flat
name (``COGNIS_<ALIAS>``)."""

from __future__ import annotations

from pydantic import Field, field_validator

from ..component_settings import ComponentSettings
from .recipes import ARCHITECTURE, with_knobs


class RetrievalSettings(ComponentSettings):
    """Which recipe searches use, and the knobs over it."""

    recipe: str = Field("default", alias="recipe", description="Named retrieval recipe (see cognis-memory recipes).")
    recipe_overrides: dict[str, float | int | bool] = Field(
        default_factory=dict,
        alias="recipe_overrides",
        description="Retrieval knobs set on top of every recipe the service runs, as JSON "
        "(COGNIS_RECIPE_OVERRIDES='{\"state_similarity\": 0.75}'); they win over the embedding model's own "
        "(thresholds that depend on its similarity scale).",
    )

    @field_validator("recipe_overrides")
    @classmethod
    def _known_knobs(cls, v: dict[str, float | int | bool]) -> dict[str, float | int | bool]:
        with_knobs(ARCHITECTURE, v)  # an unknown knob or a value out of range stops here, named
        return v
