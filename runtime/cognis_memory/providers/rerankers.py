"""Cross-encoder rerankers (retrieval stage 7): a local directory, or a SageMaker endpoint.

Both score (query, document) pairs and return one float per document in input order, higher
meaning more relevant. Both report failures as
:class:`~cognis_memory.errors.DependencyUnavailableError` with dependency ``"reranker"``, which the
retrieval pipeline turns into "stage skipped" instead of a failed search.

Scores are on the same scale for both backends when serving the same checkpoint: a one-label
cross-encoder (BGE rerankers) passed through a sigmoid, so in [0, 1]. sentence-transformers'
``CrossEncoder`` applies the sigmoid by default for one-label models, TEI's ``/rerank`` does
unless ``raw_scores`` is set, and the Transformers text-classification pipeline does for a
single label.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from cognis_memory.errors import DependencyUnavailableError, SettingError

from .settings import RerankerSettings, required

if TYPE_CHECKING:  # pragma: no cover
    from sentence_transformers import CrossEncoder

__all__ = ["LocalCrossEncoderReranker", "PayloadFormat", "SageMakerReranker", "parse_reranker_scores"]

PayloadFormat = Literal["tei", "hf_pairs"]
_PAYLOAD_FORMATS: tuple[str, ...] = ("tei", "hf_pairs")


class LocalCrossEncoderReranker:
    """A sentence-transformers ``CrossEncoder`` read from a local directory.

    ``path`` must be a directory holding a sequence-classification checkpoint with one label
    (for example a downloaded ``BAAI/bge-reranker-v2-m3``) and its tokenizer. Loading never
    contacts a model hub (``local_files_only``; ``HF_HUB_OFFLINE`` is forced on for the load).

    Prediction is CPU-bound, so :meth:`rerank` runs it in a worker thread and never blocks
    the event loop; a lock serialises forward passes because one torch module must not run
    two of them concurrently. Errors raised by the model while scoring are reported as
    ``DependencyUnavailableError("reranker", ...)`` like the remote backend's, so callers only
    handle one failure type.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        device: str = "cpu",
        batch_size: int = 32,
        max_length: int = 512,
    ) -> None:
        if not path:
            raise SettingError("reranker_path", "a local cross-encoder directory is required")
        model_path = Path(path)
        if not model_path.is_dir():
            raise FileNotFoundError(f"reranker_path: no cross-encoder directory at {model_path}")
        if batch_size <= 0:
            raise ValueError("batch_size must be positive")
        if max_length <= 0:
            raise ValueError("max_length must be positive")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            from sentence_transformers import CrossEncoder
        except ImportError as exc:
            raise RuntimeError("reranker=local needs torch: install cognis-memory[sentence-transformers]") from exc

        try:
            self._model: CrossEncoder = CrossEncoder(
                str(model_path), device=device, local_files_only=True, max_length=max_length
            )
        except (OSError, ValueError) as exc:
            raise SettingError(
                "reranker_path", f"{model_path} is not a loadable cross-encoder directory ({exc})"
            ) from exc
        num_labels = getattr(self._model, "num_labels", 1)
        if num_labels != 1:
            raise SettingError(
                "reranker_path", f"{model_path} has {num_labels} labels; a reranker checkpoint has exactly one"
            )
        self._batch_size = batch_size
        self._lock = threading.Lock()
        self.name = f"local:{model_path.name}"
        self.path = model_path

    @classmethod
    def from_settings(
        cls, settings: RerankerSettings, *, device: str, aws_region: str | None
    ) -> LocalCrossEncoderReranker:
        """The cross-encoder directory ``reranker_path`` on ``device`` (the embedding device); no AWS region."""
        return cls(required(settings.path, "reranker=local", "reranker_path"), device=device)

    def _predict(self, query: str, documents: list[str]) -> list[float]:
        pairs = [(query, doc) for doc in documents]
        with self._lock:
            scores = self._model.predict(
                pairs,
                batch_size=self._batch_size,
                show_progress_bar=False,
                convert_to_numpy=True,
            )
        return [float(s) for s in scores.reshape(len(documents))]

    async def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        """One score per document, in input order (sigmoid of the model's logit for one-label models)."""
        docs = list(documents)
        if not docs:
            return []
        try:
            return await asyncio.to_thread(self._predict, query, docs)
        except (RuntimeError, ValueError) as exc:  # torch errors are RuntimeErrors
            raise DependencyUnavailableError("reranker", f"local cross-encoder failed: {exc}") from exc


def _finite_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def parse_reranker_scores(payload: Any, expected: int) -> list[float]:
    """Turn an endpoint's JSON answer into ``expected`` scores in input order.

    The shape decides the parsing, so the same code reads every container we deploy:

    * TEI ``/rerank``: ``[{"index": i, "score": s}, ...]`` (sorted by score, so re-ordered by
      ``index``; the indices must be exactly ``0 .. expected - 1``);
    * Transformers text-classification pipeline: ``[{"label": ..., "score": s}, ...]`` in
      input order, or ``[[{"label": ..., "score": s}], ...]`` when the container returns
      every label (one label here);
    * a bare list of numbers in input order.

    Raises ``ValueError`` for anything else, including a wrong number of scores or scores
    that are not finite numbers.
    """
    if not isinstance(payload, list):
        raise ValueError(f"expected a JSON list, got {type(payload).__name__}")
    if len(payload) != expected:
        raise ValueError(f"expected {expected} scores, got {len(payload)}")
    if expected == 0:
        return []

    if all(_finite_number(item) for item in payload):
        return [float(item) for item in payload]

    if all(isinstance(item, list) and len(item) == 1 for item in payload):
        payload = [item[0] for item in payload]

    if not all(isinstance(item, dict) and _finite_number(item.get("score")) for item in payload):
        raise ValueError("unrecognised answer: expected numbers or objects with a numeric 'score'")

    if all("index" in item for item in payload):
        scores: list[float | None] = [None] * expected
        for item in payload:
            index = item["index"]
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < expected:
                raise ValueError(f"index {index!r} out of range for {expected} documents")
            if scores[index] is not None:
                raise ValueError(f"index {index} appears twice")
            scores[index] = float(item["score"])
        return [s for s in scores if s is not None]  # all filled: len == expected, no duplicates
    if any("index" in item for item in payload):
        raise ValueError("some scores carry an 'index' and some do not")
    return [float(item["score"]) for item in payload]


class SageMakerReranker:
    """A BGE reranker behind a SageMaker real-time endpoint (``sagemaker-runtime`` InvokeEndpoint).

    Every call sends ``ContentType="application/json"`` and ``Accept="application/json"``.
    The request body depends on ``payload_format``:

    * ``"tei"`` (default) for the Hugging Face Text Embeddings Inference container, which
      routes ``/invocations`` to ``/rerank`` when it serves a reranker::

          {"query": "...", "texts": ["doc 0", "doc 1", ...], "truncate": true, "raw_scores": false}

      answered with ``[{"index": 1, "score": 0.93}, {"index": 0, "score": 0.12}, ...]``.
      TEI rejects requests with more texts than its ``--max-client-batch-size`` (32 by
      default): deploy it with a value >= ``max_documents``.
    * ``"hf_pairs"`` for the Hugging Face Inference Toolkit (Transformers DLC) running the
      text-classification pipeline::

          {"inputs": [{"text": "query", "text_pair": "doc 0"}, ...], "parameters": {"truncation": true}}

      answered with ``[{"label": "LABEL_0", "score": 0.12}, ...]`` in input order.

    Answers are parsed by shape (:func:`parse_reranker_scores`), not by the configured
    format, so either container's answer is understood.

    More than ``max_documents`` documents are split into several requests sent concurrently.
    The whole call is time-boxed by ``timeout_ms``: botocore's connect and read timeouts are
    set to it (with at most ``max_attempts`` attempts in total), and an ``asyncio.wait_for``
    bounds the total, retries included. A botocore error, a timeout, a non-JSON answer or an
    answer with the wrong number of scores raises ``DependencyUnavailableError("reranker", ...)``.

    When ``client`` is given it is used as is (its own timeouts apply); only the
    ``asyncio.wait_for`` bound is added. A timed-out call cannot interrupt the worker thread:
    it finishes in the background, bounded by the client's read timeout.
    """

    def __init__(
        self,
        endpoint_name: str,
        *,
        client: Any | None = None,
        region: str | None = None,
        timeout_ms: int = 1500,
        max_documents: int = 100,
        payload_format: PayloadFormat = "tei",
        max_attempts: int = 2,
    ) -> None:
        if not endpoint_name:
            raise SettingError("sagemaker_endpoint", "an endpoint name is required")
        if timeout_ms <= 0:
            raise ValueError("reranker_timeout_ms must be positive")
        if max_documents <= 0:
            raise ValueError("max_documents must be positive")
        if payload_format not in _PAYLOAD_FORMATS:
            raise ValueError(f"payload_format must be one of {_PAYLOAD_FORMATS}, got {payload_format!r}")
        if max_attempts <= 0:
            raise ValueError("max_attempts must be positive")
        self.endpoint_name = endpoint_name
        self.payload_format: PayloadFormat = payload_format
        self.max_documents = max_documents
        self.timeout_ms = timeout_ms
        self.name = f"sagemaker:{endpoint_name}"
        if client is None:
            import boto3

            seconds = timeout_ms / 1000.0
            client = boto3.client(
                "sagemaker-runtime",
                region_name=region,
                config=Config(
                    connect_timeout=seconds,
                    read_timeout=seconds,
                    retries={"mode": "standard", "total_max_attempts": max_attempts},
                ),
            )
        self._client = client

    @classmethod
    def from_settings(cls, settings: RerankerSettings, *, device: str, aws_region: str | None) -> SageMakerReranker:
        """The endpoint ``sagemaker_endpoint`` in ``aws_region``, time-boxed by ``reranker_timeout_ms``; no device."""
        endpoint = required(settings.sagemaker_endpoint, "reranker=sagemaker", "sagemaker_endpoint")
        return cls(endpoint, region=aws_region, timeout_ms=settings.timeout_ms)

    def encode_request(self, query: str, documents: Sequence[str]) -> bytes:
        """The JSON request body for one InvokeEndpoint call (see the class docstring)."""
        body: dict[str, Any]
        if self.payload_format == "tei":
            body = {"query": query, "texts": list(documents), "truncate": True, "raw_scores": False}
        else:
            body = {
                "inputs": [{"text": query, "text_pair": doc} for doc in documents],
                "parameters": {"truncation": True},
            }
        return json.dumps(body, ensure_ascii=False).encode("utf-8")

    def _invoke(self, body: bytes) -> bytes:
        """Blocking InvokeEndpoint; runs in a worker thread."""
        try:
            response = self._client.invoke_endpoint(
                EndpointName=self.endpoint_name,
                ContentType="application/json",
                Accept="application/json",
                Body=body,
            )
            return response["Body"].read()
        except ClientError as exc:
            error = exc.response.get("Error", {})
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            raise DependencyUnavailableError(
                "reranker",
                f"SageMaker endpoint {self.endpoint_name!r} answered {error.get('Code', 'error')}"
                f" (HTTP {status}): {error.get('Message', '')}",
            ) from exc
        except BotoCoreError as exc:  # timeouts, connection errors, missing credentials
            raise DependencyUnavailableError(
                "reranker", f"SageMaker endpoint {self.endpoint_name!r} unreachable: {exc}"
            ) from exc

    async def _score_chunk(self, query: str, documents: list[str]) -> list[float]:
        raw = await asyncio.to_thread(self._invoke, self.encode_request(query, documents))
        try:
            payload = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DependencyUnavailableError(
                "reranker", f"SageMaker endpoint {self.endpoint_name!r} answered non-JSON: {raw[:200]!r}"
            ) from exc
        try:
            return parse_reranker_scores(payload, len(documents))
        except ValueError as exc:
            raise DependencyUnavailableError(
                "reranker", f"SageMaker endpoint {self.endpoint_name!r} gave an unusable answer: {exc}"
            ) from exc

    async def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        """One score per document, in input order; raises DependencyUnavailableError on any failure."""
        docs = list(documents)
        if not docs:
            return []
        chunks = [docs[i : i + self.max_documents] for i in range(0, len(docs), self.max_documents)]
        try:
            results = await asyncio.wait_for(
                asyncio.gather(*(self._score_chunk(query, chunk) for chunk in chunks), return_exceptions=True),
                timeout=self.timeout_ms / 1000.0,
            )
        except TimeoutError as exc:
            raise DependencyUnavailableError(
                "reranker", f"SageMaker endpoint {self.endpoint_name!r} did not answer within {self.timeout_ms} ms"
            ) from exc
        scores: list[float] = []
        for result in results:
            if isinstance(result, BaseException):
                raise result
            scores.extend(result)
        return scores
