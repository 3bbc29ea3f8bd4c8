"""Chat models that answer with JSON matching a pydantic model: Bedrock Converse and OpenAI-compatible HTTP.

One module per provider (:mod:`.bedrock`, :mod:`.openai_compatible`) and the answer checks they
share (:mod:`.structured`); every name stays importable from ``cognis_memory.providers.llms`` (where the
provider registry imports the classes from).

Both implement :class:`cognis_memory.providers.base.LLM`. Failures are split the way the ingest
pipeline needs them:

* the model could not be reached, was throttled, failed server-side or timed out ->
  :class:`~cognis_memory.errors.DependencyUnavailableError` (``dependency="llm"``; the job is retried);
* the request was refused for a configuration reason (credentials, IAM, model access, unknown
  model, unsupported parameter) -> also ``DependencyUnavailableError``, whose message starts with
  ``"configuration problem:"`` because retrying will not help until someone fixes the settings;
* the model answered, but not with the requested structure -> :class:`LLMOutputError`.

The caller names a pydantic response model; the schema sent is derived from it
(:func:`wire_schema`, within the subset OpenAI's strict mode and Bedrock's tool input accept) and
the answer is validated with it (pydantic's strict JSON mode), a mismatch being an
``LLMOutputError`` that names each path.
"""

from __future__ import annotations

from .bedrock import BedrockConverseLLM
from .openai_compatible import OpenAICompatibleLLM
from .structured import CONFIG_PREFIX, extract_json_text, validated, wire_schema

__all__ = [
    "CONFIG_PREFIX",
    "BedrockConverseLLM",
    "OpenAICompatibleLLM",
    "extract_json_text",
    "validated",
    "wire_schema",
]
