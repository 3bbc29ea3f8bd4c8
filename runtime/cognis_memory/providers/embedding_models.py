"""The embedding models the ONNX embedder knows by name (``COGNIS_EMBEDDING_MODEL``), and how each is used.

A model is more than its files: how its token states are pooled into one vector, the instruction
it was trained to see before a search query, and the thresholds that depend on its similarity scale
(the current-state stage asks "are these two statements about the same thing?" with a cosine, and so
does the guard on an extraction model's UPDATEs; a model whose cosines run higher needs a higher bar). Those are chosen here,
per model, by measurement (docs/benchmarks.md, "Another embedding model"); explicit settings
(``embedding_pooling``, ``embedding_query_prefix``, ``recipe_overrides``) win over them.

Adding a model is a module with ``NAME``, ``onnx_file()`` and ``tokenizer_file()`` (as
:mod:`.default_model` and :mod:`.bge_small`; with ``fetch()`` too when its files are downloaded
once by ``cognis-memory fetch-model``), one loader function here that imports it and its line in
:data:`EMBEDDING_MODELS` (the way the providers, stores and retrieval stages are registered).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, Protocol


class ModelFiles(Protocol):
    """A model's files module: its name and where its files are (built or fetched on first use)."""

    NAME: str

    def onnx_file(self) -> str: ...

    def tokenizer_file(self) -> str: ...


@dataclass(frozen=True, slots=True)
class EmbeddingModel:
    files: Callable[[], ModelFiles]  #: imports the model's files module (NAME, onnx_file(), tokenizer_file())
    pooling: Literal["mean", "cls"]  #: as the model was trained (its sentence-transformers 1_Pooling config)
    query_prefix: str = ""  #: put before search queries, never before messages
    recipe_overrides: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    #: the cosine below which an extraction model's UPDATE is not taken (the new fact is added instead):
    #: a fact and the fact it replaces are about the same thing (docs/design-notes.md, "UPDATE guard")
    update_similarity: float = 0.40

    def name(self) -> str:
        return str(self.files().NAME)

    def onnx_file(self) -> str:
        return str(self.files().onnx_file())

    def tokenizer_file(self) -> str:
        return str(self.files().tokenizer_file())

    @property
    def fetchable(self) -> bool:
        """Its files are downloaded once by ``cognis-memory fetch-model`` (the module has ``fetch``)."""
        return hasattr(self.files(), "fetch")

    def fetch(self) -> str:
        """Download and build the files (see the module's ``fetch``); returns their directory."""
        return str(getattr(self.files(), "fetch")())  # noqa: B009  # a module of fetched files only


def _minilm() -> ModelFiles:
    from . import default_model

    return default_model


def _bge_small() -> ModelFiles:
    from . import bge_small

    return bge_small


DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"

EMBEDDING_MODELS: dict[str, EmbeddingModel] = {
    DEFAULT_EMBEDDING_MODEL: EmbeddingModel(_minilm, "mean"),
    "bge-small-en-v1.5": EmbeddingModel(
        _bge_small,
        "cls",
        query_prefix="Represent this sentence for searching relevant passages: ",
        recipe_overrides=MappingProxyType({"state_similarity": 0.70}),
        update_similarity=0.65,
    ),
}
