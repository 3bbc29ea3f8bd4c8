"""Every provider kind per family: ``{kind: Provider(class path)}``.

Adding a provider is its module (its class with a ``from_settings`` classmethod that takes its family's
settings, :mod:`.factory` says with what else, and a settings field of its own in :mod:`.settings` when it
needs one) plus one line here; the accepted values of ``COGNIS_EMBEDDER``, ``COGNIS_RERANKER`` and ``COGNIS_LLM`` and the CLI's
``--embedder``/``--reranker``/``--llm`` choices are read from these tables. ``none`` (no reranker, no LLM)
is not a provider and is not listed. Classes are imported only when chosen, so a provider's libraries are
needed only where it is used.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Provider:
    target: str  #: "module:Class" of the provider; the class builds itself with ``from_settings`` (see :mod:`.factory`)


EMBEDDERS: dict[str, Provider] = {
    "onnx": Provider("cognis_memory.providers.onnx_embedder:OnnxEmbedder"),
    "sentence-transformers": Provider(
        "cognis_memory.providers.sentence_transformers_embedder:SentenceTransformerEmbedder"
    ),
}
RERANKERS: dict[str, Provider] = {
    "local": Provider("cognis_memory.providers.rerankers:LocalCrossEncoderReranker"),
    "sagemaker": Provider("cognis_memory.providers.rerankers:SageMakerReranker"),
}
LLMS: dict[str, Provider] = {
    "bedrock": Provider("cognis_memory.providers.llms:BedrockConverseLLM"),
    "openai": Provider("cognis_memory.providers.llms:OpenAICompatibleLLM"),
}
