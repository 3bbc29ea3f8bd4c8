"""Stage 4: full and prefix (Matryoshka) embeddings.

``e_full`` is the model's vector (optionally truncated to ``dim_full`` and re-normalised);
``e_short = e_full[:dim_short] / ||e_full[:dim_short]||``. Models not trained
Matryoshka-style lose quality in the prefix; an optional orthogonal ``rotation`` (for
example one that orders dimensions by variance, fitted offline with
:func:`fit_variance_rotation`) can be applied before truncation so that the prefix keeps
more of the signal. Rotations preserve cosine similarity of the full vectors.

Model work never runs on the event loop: :meth:`MatryoshkaEncoder.encode_async` hands the
texts to the :class:`~cognis_memory.encoding.batching.EmbeddingBatcher` (worker threads that
micro-batch concurrent requests, by priority), or awaits the embedder's own ``embed_async``
when it has one (a remote embedder). :meth:`MatryoshkaEncoder.encode` (synchronous) is for
scripts and offline tools only. The encoder also holds the in-memory query cache
(:class:`~cognis_memory.encoding.query_cache.QueryVectorCache`, bounded per tenant) that retrieval
keys by :meth:`MatryoshkaEncoder.input_key`, so queries that tokenise alike are embedded once.

CPU threads: on small or shared machines a model's intra-op threads spin-wait for each other:
on the benchmark machine (2 shared vCPUs) a one-query torch forward pass took a median 240 ms
with 2 threads and 31 ms with 1, and batches of 128 ran at 34 vs 70 texts/s; numpy's BLAS
behaves alike (the 40x40 similarity matrix of the dedup stage: 2.4 ms with 2 threads, 0.04 ms
with 1; a 100k x 128 prefix scan: 19 vs 7 ms median) (docs/benchmarks.md). The encoder
therefore sets the process's torch intra-op threads (when torch is loaded) and, when
``threadpoolctl`` is importable, its BLAS threads once, to ``cpu_threads`` (default 1; ``None``
leaves the libraries' defaults). Parallelism comes from the batcher's ``workers`` instead:
one model call per worker thread, each on its own core.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import SettingError
from ..providers.base import AsyncEmbedder, Embedder
from .batching import EmbeddingBatcher, Priority
from .query_cache import QueryVectorCache

if TYPE_CHECKING:
    from .settings import EncoderSettings


def normalise_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (zero rows stay zero)."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (x / norms).astype(np.float32, copy=False)


def fit_variance_rotation(sample: np.ndarray) -> np.ndarray:
    """An orthogonal matrix whose first axes carry the most variance of ``sample`` (PCA basis)."""
    centred = sample - sample.mean(axis=0, keepdims=True)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return vt.T.astype(np.float32)  # columns = principal directions, by decreasing variance


def limit_cpu_threads(n: int | None) -> None:
    """Set torch's intra-op threads (when torch is loaded) and BLAS threads (when threadpoolctl is installed)."""
    if n is None:
        return
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != n:
        torch.set_num_threads(n)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # optional: without it BLAS keeps its own thread count
        return
    threadpool_limits(n, user_api="blas")


class MatryoshkaEncoder:
    """Wraps an :class:`Embedder` to produce (full, short) unit vectors."""

    def __init__(
        self,
        embedder: Embedder,
        *,
        dim_short: int,
        dim_full: int | None = None,
        rotation: np.ndarray | str | Path | None = None,
        cpu_threads: int | None = 1,
        batcher: EmbeddingBatcher | None = None,
        query_cache: QueryVectorCache | None = None,
        query_prefix: str = "",
    ) -> None:
        self.embedder = embedder
        #: put before a search query (never before a message) when the model was trained with a query instruction
        self.query_prefix = query_prefix
        limit_cpu_threads(cpu_threads)
        self.dim = dim_full or embedder.dim
        if self.dim > embedder.dim:
            raise SettingError("embedding_dim_full", f"{self.dim} exceeds the model's {embedder.dim} dimensions")
        if not 0 < dim_short <= self.dim:
            raise SettingError("embedding_dim_short", f"must be between 1 and {self.dim}, got {dim_short}")
        self.dim_short = dim_short
        matrix = np.load(rotation) if isinstance(rotation, (str, Path)) else rotation
        if matrix is not None and matrix.shape != (embedder.dim, embedder.dim):
            raise ValueError(f"rotation: expected a {embedder.dim}x{embedder.dim} matrix, got {matrix.shape}")
        self.rotation = None if matrix is None else matrix.astype(np.float32)
        self.batcher = batcher or EmbeddingBatcher(embedder)
        self.query_cache = query_cache or QueryVectorCache()

    @classmethod
    def from_settings(
        cls,
        settings: EncoderSettings,
        embedder: Embedder,
        *,
        cpu_threads: int,
        embedding_batch_size: int,
        query_prefix: str,
    ) -> MatryoshkaEncoder:
        """The encoder, its embedding queue and its query cache as the ``embedding_*`` and ``query_cache_*``
        settings say; ``cpu_threads`` and ``embedding_batch_size`` are the embedder's (``embedding_threads``,
        ``embedding_batch_size``), ``query_prefix`` the query instruction resolved for the embedding model."""
        return cls(
            embedder,
            dim_short=settings.dim_short,
            dim_full=settings.dim_full,
            rotation=settings.rotation_path,
            cpu_threads=cpu_threads,
            batcher=EmbeddingBatcher(
                embedder,
                workers=settings.worker_count,
                max_batch=2 * embedding_batch_size,
                max_tokens=settings.batch_tokens,
            ),
            query_cache=QueryVectorCache(
                per_tenant=settings.query_cache_per_tenant, total=settings.query_cache_entries
            ),
            query_prefix=query_prefix,
        )

    @property
    def name(self) -> str:
        return self.embedder.name

    def split(self, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(full, short) unit vectors from raw model vectors (rows)."""
        v = vectors if self.rotation is None else vectors @ self.rotation
        full = normalise_rows(v[:, : self.dim])
        short = normalise_rows(full[:, : self.dim_short])
        return full, short

    def encode(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Synchronous: for scripts and offline tools, never on a request path (use :meth:`encode_async`)."""
        return self.split(self.embedder.embed(texts))

    async def encode_async(
        self, texts: Sequence[str], priority: Priority = Priority.INGEST
    ) -> tuple[np.ndarray, np.ndarray]:
        """(full, short) vectors of ``texts``, the model run off the event loop."""
        if isinstance(self.embedder, AsyncEmbedder):
            vectors = await self.embedder.embed_async(texts)
        else:
            vectors = await self.batcher.embed(texts, priority)
        return self.split(vectors)

    def query_text(self, query: str) -> str:
        """What is embedded for a search query: the query after the model's query instruction, if any."""
        return self.query_prefix + query

    def input_key(self, text: str) -> str:
        """What the model sees of ``text``: texts with equal keys get equal vectors (the text itself
        when the embedder cannot tell)."""
        key = getattr(self.embedder, "input_key", None)
        return key(text) if key is not None else text

    def close(self) -> None:
        """Stop the batcher's worker threads (they start again on the next call)."""
        self.batcher.close()
