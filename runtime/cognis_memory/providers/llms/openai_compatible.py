"""OpenAI-compatible chat completions with a JSON-schema response format (see :class:`OpenAICompatibleLLM`)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import httpx
from pydantic import BaseModel

from cognis_memory.errors import DependencyUnavailableError
from cognis_memory.providers.base import AnswerT, LLMOutputError

from .structured import CONFIG_PREFIX, check_schema_name, extract_json_text, validated, wire_schema


class OpenAICompatibleLLM:
    """Structured output from any OpenAI-compatible ``/chat/completions`` endpoint.

    Sends ``POST {base_url}/chat/completions`` with a system message (when non-empty), the
    prompt as the user message, ``temperature`` (and ``max_tokens`` when set), and
    ``response_format={"type": "json_schema", "json_schema": {"name": schema_name,
    "schema": schema, "strict": true}}``, ``schema`` derived from the response model by
    :func:`.structured.wire_schema`. Strict mode on OpenAI requires every property to be
    listed in ``required`` and ``additionalProperties: false`` on every object (the derivation
    refuses a model that breaks this); servers such as vLLM or llama.cpp use the schema for
    guided decoding. The answer ``choices[0].message.content`` is parsed as JSON (a Markdown code
    fence around it is tolerated) and validated as the response model.

    Errors: a timeout (``timeout_s`` bounds the whole call), a connection error, HTTP 408/429
    or 5xx, or a reply that is not a chat completion -> ``DependencyUnavailableError``; other 4xx
    (bad key, unknown model, unsupported ``response_format``) -> ``DependencyUnavailableError``
    with a configuration message; a refusal, a truncated answer or content that is not the
    requested JSON -> ``LLMOutputError``.

    Without ``client`` an ``httpx.AsyncClient`` is created on first use (one per event loop)
    and closed by :meth:`aclose`; a given client is never closed here.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        client: httpx.AsyncClient | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> None:
        if not base_url:
            raise ValueError("openai_base_url: the endpoint's base URL is required")
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"openai_base_url: expected an http(s) URL, got {base_url!r}")
        if not model:
            raise ValueError("openai_model: a model name is required")
        if timeout_s <= 0:
            raise ValueError("llm_timeout_s must be positive")
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/chat/completions"
        self.model = model
        self.timeout_s = float(timeout_s)
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.name = f"openai:{model}"
        self._api_key = api_key
        self._given_client = client
        self._own_client: httpx.AsyncClient | None = None
        self._own_loop: asyncio.AbstractEventLoop | None = None

    def build_request(
        self, *, system: str, prompt: str, response_model: type[BaseModel], schema_name: str
    ) -> dict[str, Any]:
        """The JSON body of the chat completion request."""
        check_schema_name(schema_name)
        schema = wire_schema(response_model)
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "schema": schema, "strict": True},
            },
        }
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        return body

    def _client(self) -> httpx.AsyncClient:
        if self._given_client is not None:
            return self._given_client
        loop = asyncio.get_running_loop()
        if self._own_client is None or self._own_loop is not loop or self._own_client.is_closed:
            # connections belong to the loop that opened them: a new loop needs a new client
            self._own_client = httpx.AsyncClient(timeout=httpx.Timeout(self.timeout_s))
            self._own_loop = loop
        return self._own_client

    async def aclose(self) -> None:
        """Close the client this instance created (a client passed in is left open)."""
        if self._own_client is not None:
            await self._own_client.aclose()
            self._own_client = None

    async def generate_structured(
        self, *, system: str, prompt: str, response_model: type[AnswerT], schema_name: str
    ) -> AnswerT:
        """The model's JSON answer, as ``response_model`` (see the class docstring)."""
        body = self.build_request(system=system, prompt=prompt, response_model=response_model, schema_name=schema_name)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        try:
            response = await asyncio.wait_for(
                self._client().post(self.url, json=body, headers=headers, timeout=self.timeout_s),
                timeout=self.timeout_s,
            )
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise DependencyUnavailableError("llm", f"{self.url} did not answer within {self.timeout_s:g} s") from exc
        except httpx.HTTPError as exc:
            raise DependencyUnavailableError("llm", f"{self.url} unreachable: {type(exc).__name__}: {exc}") from exc

        status = response.status_code
        if status >= 300:
            detail = f"{self.url} answered HTTP {status}: {_error_message(response)}"
            if status in (408, 409, 425, 429) or status >= 500:
                raise DependencyUnavailableError("llm", detail)
            raise DependencyUnavailableError(
                "llm",
                f"{CONFIG_PREFIX} {detail}. Check openai_base_url, openai_api_key and openai_model "
                "(and that the server supports json_schema response_format); retrying will not help.",
            )
        try:
            envelope = response.json()
            choice = envelope["choices"][0]
            message = choice["message"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise DependencyUnavailableError(
                "llm",
                f"{self.url} did not answer with a chat completion: {response.text[:200]!r}",
            ) from exc
        return validated(self._content_json(choice, message), response_model, schema_name, self.name)

    def _content_json(self, choice: Mapping[str, Any], message: Any) -> Any:
        if not isinstance(message, Mapping):
            raise LLMOutputError(f"{self.name}: choices[0].message is not an object")
        if message.get("refusal"):
            raise LLMOutputError(f"{self.name}: the model refused: {str(message['refusal'])[:200]}")
        if choice.get("finish_reason") == "length":
            raise LLMOutputError(f"{self.name}: answer cut off at the token limit")
        content = message.get("content")
        if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}, ...]
            content = "".join(
                str(part.get("text", ""))
                for part in content
                if isinstance(part, Mapping) and part.get("type") == "text"
            )
        if not isinstance(content, str) or not content.strip():
            raise LLMOutputError(f"{self.name}: the answer has no text content")
        try:
            return extract_json_text(content)
        except ValueError as exc:
            raise LLMOutputError(f"{self.name}: {exc}") from exc


def _error_message(response: httpx.Response) -> str:
    """The ``error.message`` of an OpenAI-style error body, else the start of the body."""
    try:
        payload = response.json()
    except ValueError:
        return response.text[:200]
    if isinstance(payload, Mapping):
        error = payload.get("error")
        if isinstance(error, Mapping) and error.get("message"):
            return str(error["message"])[:500]
        if isinstance(error, str):
            return error[:500]
    return response.text[:200]
