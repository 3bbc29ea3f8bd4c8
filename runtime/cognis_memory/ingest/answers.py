"""The structured answers the extraction stage asks the LLM for, as pydantic models.

The providers derive the JSON schema they send from these models
(:func:`cognis_memory.providers.llms.structured.wire_schema`) and validate each answer with them, so
the shape is declared once. Every field is required and no extra key is allowed (what OpenAI's
strict structured outputs demand); a value that may be absent is ``X | None``. Class docstrings and
field names are not sent (the prompts tell the model what to write); a ``Field(description=...)``
would be. ``tests/ingest/test_answers.py`` pins the sent schemas.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, field_validator

from ..domain import Category, Scope


class Action(StrEnum):
    ADD = "ADD"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    NONE = "NONE"


def _integral(value: object) -> object:
    """``3.0`` as ``3``: JSON Schema counts it as an integer, pydantic's strict mode would not."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


#: A JSON integer: an int, or a float without a fractional part; never a string or a boolean.
JsonInt = Annotated[int, BeforeValidator(_integral)]


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ExtractedFact(_Answer):
    """One candidate fact; ``event_date`` is the ISO date of the event when the conversation gives one
    (an unreadable date is ignored, not refused); ``sources`` are the numbers of the messages it was
    said in, as the prompt numbers them (1-based)."""

    content: str
    category: Category
    scope: Scope
    event_date: str | None
    sources: list[JsonInt]

    @field_validator("content")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("expected a non-empty string")
        return value.strip()


class ExtractedFacts(_Answer):
    """The answer of the extract call (schema name ``extracted_facts``)."""

    facts: list[ExtractedFact]


class Decision(_Answer):
    """What to do with candidate ``fact`` (its index): ``target`` is the alias of the memory an
    UPDATE or DELETE applies to; an UPDATE may give the merged ``content`` and its ``category``."""

    fact: JsonInt
    action: Action
    target: str | None
    content: str | None
    category: Category | None


class Decisions(_Answer):
    """The answer of the decide call (schema name ``memory_decisions``)."""

    decisions: list[Decision]
