"""Every provider kind per family: ``{kind: Provider(class path, typed settings)}``.

Adding a provider is its module plus one line here (and its settings model in :mod:`.settings`
when it needs settings of its own); the accepted values of ``COGNIS_EMBEDDER``, ``COGNIS_RERANKER``
and ``COGNIS_LLM`` and the CLI's ``--embedder``/``--reranker``/``--llm`` choices are read from
these tables. ``none`` (no reranker, no LLM) is not a provider and is not listed. Classes are
imported only when chosen, so a provider's libraries are needed only where it is used.
"""

from __future__ import annotations

from dataclasses import dataclass

from .settings import (
    BedrockLLMSettings,
    LocalRerankerSettings,
    OnnxEmbedderSettings,
    OpenAILLMSettings,
    ProviderSettings,
    SageMakerRerankerSettings,
    SentenceTransformersSettings,
)


@dataclass(frozen=True, slots=True)
class Provider:
    target: str  #: "module:Class" of the provider
    settings: type[ProviderSettings]  #: its typed settings (constructor arguments)


EMBEDDERS: dict[str, Provider] = {
    "onnx": Provider("cognis_memory.providers.onnx_embedder:OnnxEmbedder", OnnxEmbedderSettings),
    "sentence-transformers": Provider(
        "cognis_memory.providers.sentence_transformers_embedder:SentenceTransformerEmbedder",
        SentenceTransformersSettings,
    ),
}
RERANKERS: dict[str, Provider] = {
    "local": Provider("cognis_memory.providers.rerankers:LocalCrossEncoderReranker", LocalRerankerSettings),
    "sagemaker": Provider("cognis_memory.providers.rerankers:SageMakerReranker", SageMakerRerankerSettings),
}
LLMS: dict[str, Provider] = {
    "bedrock": Provider("cognis_memory.providers.llms:BedrockConverseLLM", BedrockLLMSettings),
    "openai": Provider("cognis_memory.providers.llms:OpenAICompatibleLLM", OpenAILLMSettings),
}
