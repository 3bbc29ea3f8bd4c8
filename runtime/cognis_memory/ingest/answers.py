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

from pydantic import BaseModel, ConfigDict, field_validator


class Action(StrEnum):
    ADD = "ADD"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    NONE = "NONE"


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ExtractedFact(_Answer):
    """One fact a message states: who it is about (``subject``), what about them (``attribute``, in the
    model's own words) and its ``value``."""

    subject: str
    attribute: str
    value: str

    @field_validator("subject", "attribute", "value")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("expected a non-empty string")
        return value.strip()


class ExtractedFacts(_Answer):
    """The answer of the extract call (schema name ``extracted_facts``)."""

    facts: list[ExtractedFact]


class Verdict(StrEnum):
    YES = "yes"
    NO = "no"


class ChangeVerdict(_Answer):
    """The answer of the change check (schema name ``fact_change``): is the older fact no longer true?"""

    no_longer_true: Verdict
