"""Small protocols for the model providers the pipelines depend on.

Pipelines receive providers through their constructors and never import a concrete one.
Failures of remote providers surface as :class:`cognis_memory.errors.DependencyUnavailableError`
so that callers can degrade instead of failing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np
from pydantic import BaseModel

from ..errors import CognisError


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors of size ``dim`` (CPU-bound, synchronous)."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """An ``(len(texts), dim)`` float32 array whose rows have unit L2 norm."""


@runtime_checkable
class AsyncEmbedder(Protocol):
    """An embedder that is awaited rather than run on a thread (a remote embedding service).

    The encoder awaits ``embed_async`` directly instead of queueing the texts for its worker
    threads; the contract of the rows is :class:`Embedder`'s.
    """

    name: str
    dim: int

    async def embed_async(self, texts: Sequence[str]) -> np.ndarray:
        """An ``(len(texts), dim)`` float32 array whose rows have unit L2 norm."""


@runtime_checkable
class Reranker(Protocol):
    """Scores (query, document) pairs; higher is more relevant."""

    name: str

    async def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        """One score per document, in input order. Raises DependencyUnavailableError on failure/timeout."""


class LLMOutputError(CognisError, ValueError):
    """The LLM answered, but not with output matching the requested response model.

    What it did answer travels with the error, so a caller can repair it instead of losing it
    (:mod:`cognis_memory.ingest.answer_repair`): ``answer`` is the JSON value when the text parsed
    (and then failed validation), else ``None``; ``text`` is the answer's text when it did not parse
    as JSON (prose around it, a truncated object), else ``None``; ``truncated`` says the model was cut
    off at its token limit.
    """

    def __init__(self, message: str, *, answer: Any = None, text: str | None = None, truncated: bool = False) -> None:
        super().__init__(message)
        self.answer, self.text, self.truncated = answer, text, truncated


AnswerT = TypeVar("AnswerT", bound=BaseModel)


@runtime_checkable
class LLM(Protocol):
    """A chat model that can answer with JSON matching a pydantic model."""

    name: str

    async def generate_structured(
        self, *, system: str, prompt: str, response_model: type[AnswerT], schema_name: str
    ) -> AnswerT:
        """The model's answer, validated as ``response_model``.

        The model is asked for JSON matching the schema derived from ``response_model``
        (``providers.llms.structured.wire_schema``), sent under ``schema_name``
        (``[A-Za-z0-9_-]{1,64}``). Raises DependencyUnavailableError when the model cannot be
        reached (retryable), and LLMOutputError, naming the path of each mismatch, when it answered
        with something that does not validate.
        """
