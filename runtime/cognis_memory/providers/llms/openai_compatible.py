"""OpenAI-compatible chat completions with structured output (see :class:`OpenAICompatibleLLM`)."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Mapping
from typing import Any, Literal, get_args

import httpx
from pydantic import BaseModel

from cognis_memory.errors import DependencyUnavailableError, SettingError
from cognis_memory.providers.base import AnswerT, LLMOutputError

from ..llm_usage import report_tokens
from ..settings import LLMSettings, required
from .structured import (
    CONFIG_PREFIX,
    check_schema_name,
    extract_json_text,
    schema_instructions,
    validated,
    wire_schema,
)

log = logging.getLogger(__name__)

#: How the answer's shape is asked for (``structured_output``); ``auto`` starts with ``json_schema``
#: and steps down the list when the server refuses that ``response_format``.
StructuredOutput = Literal["auto", "json_schema", "json_object", "prompt"]
STRUCTURED_OUTPUT_MODES: tuple[str, ...] = get_args(StructuredOutput)
_FALLBACK = {"json_schema": "json_object", "json_object": "prompt"}
#: an error body that blames the response format (llama-cpp-python: "Input should be 'text' or
#: 'json_object'"; other servers name response_format or json_schema)
_FORMAT_REFUSED = re.compile(r"response_format|json_schema|json_object|'text'", re.IGNORECASE)


class OpenAICompatibleLLM:
    """Structured output from any OpenAI-compatible ``/chat/completions`` endpoint.

    Sends ``POST {base_url}/chat/completions`` with a system message (when non-empty), the prompt
    as the user message, ``temperature`` (and ``max_tokens`` when set), and asks for the answer's
    shape in one of three ways (``structured_output``), ``schema`` being derived from the response
    model by :func:`.structured.wire_schema`:

    * ``json_schema``: ``response_format={"type": "json_schema", "json_schema": {"name": schema_name,
      "schema": schema, "strict": true}}``, what OpenAI, Azure OpenAI, vLLM, llama.cpp's
      ``llama-server``, Ollama and LM Studio take (the local servers use it for grammar-constrained
      decoding). Strict mode on OpenAI requires every property in ``required`` and
      ``additionalProperties: false`` (the derivation refuses a model that breaks this).
    * ``json_object``: ``response_format={"type": "json_object", "schema": schema}`` and the schema
      in the system prompt: llama-cpp-python's server refuses ``json_schema`` but constrains
      decoding to the ``schema`` of a ``json_object`` request; servers that ignore ``schema`` still
      get valid JSON and the shape from the prompt.
    * ``prompt``: no ``response_format``; the schema is in the system prompt only, the answer is
      parsed from the text (for servers that accept neither).
    * ``auto`` (default): ``json_schema`` first; when the server refuses that response format
      (an HTTP 400, 422 or 5xx whose error names it), the same request is sent again one step down
      (``json_object``, then ``prompt``) and the mode that worked is kept for this instance's later
      calls (:attr:`mode`).

    The answer ``choices[0].message.content`` is parsed as JSON (a Markdown code fence around it
    is tolerated) and validated as the response model.

    Errors: a timeout (``timeout_s`` bounds the whole call), a connection error, HTTP 408/429
    or 5xx, or a reply that is not a chat completion -> ``DependencyUnavailableError``; other 4xx
    (bad key, unknown model, unsupported ``response_format`` in a fixed mode) ->
    ``DependencyUnavailableError`` with a configuration message; a refusal, a truncated answer or
    content that is not the requested JSON -> ``LLMOutputError``, carrying the answer's text or JSON
    value so that the caller can repair it (``answer``, ``text``, ``truncated``).

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
        structured_output: StructuredOutput = "auto",
    ) -> None:
        if structured_output not in STRUCTURED_OUTPUT_MODES:
            raise SettingError(
                "llm_structured_output",
                f"expected one of {', '.join(STRUCTURED_OUTPUT_MODES)}, got {structured_output!r}",
            )
        if not base_url:
            raise SettingError("openai_base_url", "the endpoint's base URL is required")
        if not base_url.startswith(("http://", "https://")):
            raise SettingError("openai_base_url", f"expected an http(s) URL, got {base_url!r}")
        if not model:
            raise SettingError("openai_model", "a model name is required")
        if timeout_s <= 0:
            raise ValueError("llm_timeout_s must be positive")
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/chat/completions"
        self.model = model
        self.timeout_s = float(timeout_s)
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.name = f"openai:{model}"
        self.structured_output = structured_output
        #: the mode the next call uses (``auto`` resolves to the first mode the server accepts)
        self.mode: str = "json_schema" if structured_output == "auto" else structured_output
        self._api_key = api_key
        self._given_client = client
        self._own_client: httpx.AsyncClient | None = None
        self._own_loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def from_settings(cls, settings: LLMSettings, *, aws_region: str | None) -> OpenAICompatibleLLM:
        """The endpoint ``openai_base_url`` with ``openai_model`` and the optional bearer ``openai_api_key``
        (no AWS region)."""
        s = settings
        base_url = required(s.openai_base_url, "llm=openai", "openai_base_url")
        model = required(s.openai_model, "llm=openai", "openai_model")
        api_key = s.openai_api_key.get_secret_value() if s.openai_api_key else None
        return cls(
            base_url,
            model,
            api_key=api_key or None,
            timeout_s=s.timeout_s,
            structured_output=s.structured_output,
            max_tokens=s.max_tokens,
        )

    def build_request(
        self,
        *,
        system: str,
        prompt: str,
        response_model: type[BaseModel],
        schema_name: str,
        mode: str | None = None,
    ) -> dict[str, Any]:
        """The JSON body of the chat completion request (in ``mode``, default :attr:`mode`)."""
        check_schema_name(schema_name)
        mode = mode or self.mode
        schema = wire_schema(response_model)
        if mode != "json_schema":  # the server is not given the schema, or may ignore it
            system = f"{system}\n\n{schema_instructions(schema)}" if system else schema_instructions(schema)
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": self.temperature}
        if mode == "json_schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "schema": schema, "strict": True},
            }
        elif mode == "json_object":
            body["response_format"] = {"type": "json_object", "schema": schema}
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
        while True:
            mode = self.mode
            body = self.build_request(
                system=system, prompt=prompt, response_model=response_model, schema_name=schema_name, mode=mode
            )
            response = await self._post(body)
            if response.status_code < 300:
                break
            fallback = _FALLBACK.get(mode) if self.structured_output == "auto" else None
            message = _error_message(response)
            if fallback is None or not _refuses_format(response.status_code, message):
                raise self._http_error(response.status_code, message)
            if self.mode == mode:  # another call may have stepped down meanwhile
                log.warning(
                    "%s refused response_format %s (HTTP %s: %s); using %s from now on",
                    self.url, mode, response.status_code, message[:200], fallback,
                )  # fmt: skip
                self.mode = fallback
        try:
            envelope = response.json()
            usage = envelope.get("usage") if isinstance(envelope, Mapping) else None
            if isinstance(usage, Mapping):
                report_tokens(usage.get("prompt_tokens"), usage.get("completion_tokens"))
            choice = envelope["choices"][0]
            message = choice["message"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise DependencyUnavailableError(
                "llm",
                f"{self.url} did not answer with a chat completion: {response.text[:200]!r}",
            ) from exc
        return validated(self._content_json(choice, message), response_model, schema_name, self.name)

    async def _post(self, body: dict[str, Any]) -> httpx.Response:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        try:
            return await asyncio.wait_for(
                self._client().post(self.url, json=body, headers=headers, timeout=self.timeout_s),
                timeout=self.timeout_s,
            )
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise DependencyUnavailableError("llm", f"{self.url} did not answer within {self.timeout_s:g} s") from exc
        except httpx.HTTPError as exc:
            raise DependencyUnavailableError("llm", f"{self.url} unreachable: {type(exc).__name__}: {exc}") from exc

    def _http_error(self, status: int, message: str) -> DependencyUnavailableError:
        detail = f"{self.url} answered HTTP {status}: {message}"
        if status in (408, 409, 425, 429) or status >= 500:
            return DependencyUnavailableError("llm", detail)
        return DependencyUnavailableError(
            "llm",
            f"{CONFIG_PREFIX} {detail}. Check openai_base_url, openai_api_key and openai_model "
            f"(and llm_structured_output: the server refused {self.mode!r}); retrying will not help.",
        )

    def _content_json(self, choice: Mapping[str, Any], message: Any) -> Any:
        if not isinstance(message, Mapping):
            raise LLMOutputError(f"{self.name}: choices[0].message is not an object")
        if message.get("refusal"):
            raise LLMOutputError(f"{self.name}: the model refused: {str(message['refusal'])[:200]}")
        content = message.get("content")
        if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}, ...]
            content = "".join(
                str(part.get("text", ""))
                for part in content
                if isinstance(part, Mapping) and part.get("type") == "text"
            )
        if not isinstance(content, str) or not content.strip():
            raise LLMOutputError(f"{self.name}: the answer has no text content")
        if choice.get("finish_reason") == "length":
            raise LLMOutputError(f"{self.name}: answer cut off at the token limit", text=content, truncated=True)
        try:
            return extract_json_text(content)
        except ValueError as exc:
            raise LLMOutputError(f"{self.name}: {exc}", text=content) from exc


def _refuses_format(status: int, message: str) -> bool:
    """Whether an error answer says the server does not take the response format it was sent."""
    return (status in (400, 422) or status >= 500) and bool(_FORMAT_REFUSED.search(message))


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
