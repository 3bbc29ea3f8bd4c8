"""ONNX Runtime embedder for BERT-style sentence encoders (the default all-MiniLM-L6-v2), without torch.

The model file takes ``input_ids``, ``attention_mask`` (and, when it declares it,
``token_type_ids``) and returns the token states ``(batch, sequence, dim)``; the sentence
vector is pooled from them as the model was trained (its ``1_Pooling/config.json``):
``pooling="mean"``, the mean over the real tokens (all-MiniLM-L6-v2, e5, gte), or
``pooling="cls"``, the first token's state (BGE), then scaled to unit length. Texts are
tokenised by the ``tokenizers`` package from a ``tokenizer.json`` and truncated to
``max_length`` tokens (256, the model's ``max_seq_length``).

Batches are grouped by length: the texts of one call are sorted by token count and run in
sub-batches of ``batch_size``, each padded only to its own longest text, so a short query never
pays for a long message's padding. A model whose activations are quantised per run (dynamic
int8, metadata ``activation_quantisation=dynamic``, as scripts/export_onnx_embedder.py writes
it) runs each text on its own instead: such a run scales all its rows together, so batching
would make a text's vector depend on its neighbours (measured: cosine down to 0.979 between a
text embedded alone and in a batch of 32), while alone its vector depends on the text only. On
CPU this costs little: with one text per run the default int8 model embedded LoCoMo turns at
0.76x and long LongMemEval turns at 1.04-1.18x the CPU-time rate of batches of 4-16.

One ``InferenceSession`` is safe for concurrent ``run`` calls, so several worker threads may
share an embedder (see :class:`cognis_memory.encoding.batching.EmbeddingBatcher`); each call uses
``threads`` intra-op threads, without spin-waiting (on shared vCPUs spinning threads slow each
other down).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from ..errors import SettingError
from .settings import required

if TYPE_CHECKING:  # pragma: no cover
    from .settings import EmbedderSettings

#: Sentence-transformers' ``max_seq_length`` of all-MiniLM-L6-v2 (sentence_bert_config.json).
DEFAULT_MAX_TOKENS = 256

#: How token states become one sentence vector: their mean over the real tokens, or the first ([CLS]) token's.
Pooling = Literal["mean", "cls"]


def load_tokenizer(tokenizer_file: str | Path, max_tokens: int = DEFAULT_MAX_TOKENS):
    """A ``tokenizers.Tokenizer`` that truncates to ``max_tokens`` and does not pad.

    Its settings are fixed here and never changed afterwards, so threads may encode with it at once.
    """
    # The embedding queue decides the parallelism; the tokenizer's own thread pool would compete with it.
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_tokens)
    return tokenizer


def token_key(tokenizer, text: str) -> str:
    """The token ids the model sees of ``text``: texts with equal keys get equal vectors."""
    return " ".join(map(str, tokenizer.encode(text).ids))


class OnnxEmbedder:
    """Embeds with an ONNX token-state model and a ``tokenizers`` tokenizer; rows are unit length."""

    def __init__(
        self,
        model_file: str | Path,
        tokenizer_file: str | Path,
        *,
        name: str,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        batch_size: int = 32,
        threads: int = 1,
        pooling: Pooling = "mean",
    ) -> None:
        if pooling not in ("mean", "cls"):
            raise SettingError("embedding_pooling", f"'mean' or 'cls', got {pooling!r}")
        model_file, tokenizer_file = Path(model_file), Path(tokenizer_file)
        if not model_file.is_file():
            raise FileNotFoundError(f"embedder_path: no ONNX model file at {model_file}")
        if not tokenizer_file.is_file():
            raise FileNotFoundError(f"embedder_tokenizer: no tokenizer.json at {tokenizer_file}")
        import onnxruntime as ort

        self._tokenizer = load_tokenizer(tokenizer_file, max_tokens)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        self._session = ort.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])
        inputs = {i.name for i in self._session.get_inputs()}
        missing = {"input_ids", "attention_mask"} - inputs
        if missing:
            raise SettingError("embedder_path", f"{model_file} lacks the inputs {sorted(missing)}")
        self._token_types = "token_type_ids" in inputs
        metadata = self._session.get_modelmeta().custom_metadata_map
        #: one text per run (see the module docstring)
        self.per_text = metadata.get("activation_quantisation") == "dynamic"
        dim = self._session.get_outputs()[0].shape[-1]
        if not isinstance(dim, int):
            raise SettingError("embedder_path", f"{model_file} has no fixed output width")
        self.dim = dim
        self.pooling = pooling
        #: vectors of another pooling are other vectors: the name (cache keys) says which
        self.name = name if pooling == "mean" else f"{name}+{pooling}"
        self.max_tokens = max_tokens
        self.batch_size = batch_size

    @classmethod
    def from_settings(cls, settings: EmbedderSettings) -> OnnxEmbedder:
        """``embedder_path`` with ``embedder_tokenizer``, or by default the files of the named ``embedding_model``
        (:mod:`.embedding_models`), with its pooling unless ``embedding_pooling`` says otherwise."""
        s = settings
        spec = s.model_spec
        own_model = s.path is not None
        tokenizer = s.tokenizer or (None if own_model else spec.tokenizer_file())
        model = s.path if own_model else spec.onnx_file()
        return cls(
            str(model),
            required(
                None if tokenizer is None else str(tokenizer), "embedder=onnx with embedder_path", "embedder_tokenizer"
            ),
            name=Path(str(model)).stem if own_model else spec.name(),
            batch_size=s.batch_size,
            threads=s.threads,
            pooling=s.pooling or spec.pooling,
        )

    def input_key(self, text: str) -> str:
        """The token ids of ``text`` (texts with equal keys get equal vectors)."""
        return token_key(self._tokenizer, text)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=True)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        order = np.argsort(lengths, kind="stable")
        step = 1 if self.per_text else self.batch_size
        for start in range(0, len(order), step):
            rows = order[start : start + step]
            width = int(lengths[rows].max())
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for j, i in enumerate(rows):
                n = lengths[i]
                ids[j, :n] = encodings[i].ids
                mask[j, :n] = 1
            feed = {"input_ids": ids, "attention_mask": mask}
            if self._token_types:
                feed["token_type_ids"] = np.zeros_like(ids)
            states = self._session.run(None, feed)[0]
            if self.pooling == "cls":
                out[rows] = states[:, 0, :]
                continue
            weights = mask[:, :, None].astype(np.float32)
            out[rows] = (states * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms
