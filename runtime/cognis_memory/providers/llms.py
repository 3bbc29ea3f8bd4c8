"""Chat models that answer with JSON matching a schema: Bedrock Converse and OpenAI-compatible HTTP.

Both implement :class:`cognis_memory.providers.base.LLM`. Failures are split the way the ingest
pipeline needs them:

* the model could not be reached, was throttled, failed server-side or timed out ->
  :class:`~cognis_memory.errors.DependencyUnavailableError` (``dependency="llm"``; the job is retried);
* the request was refused for a configuration reason (credentials, IAM, model access, unknown
  model, unsupported parameter) -> also ``DependencyUnavailableError``, whose message starts with
  ``"configuration problem:"`` because retrying will not help until someone fixes the settings;
* the model answered, but not with the requested structure -> :class:`LLMOutputError`.

Answers are checked with :func:`validate_json_schema`, a small validator for the subset of JSON
Schema the pipelines' schemas use, so the runtime does not depend on ``jsonschema``.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Mapping
from typing import Any

import httpx
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, PartialCredentialsError

from cognis_memory.errors import DependencyUnavailableError
from cognis_memory.providers.base import LLMOutputError

__all__ = [
    "BedrockConverseLLM",
    "OpenAICompatibleLLM",
    "extract_json_text",
    "validate_json_schema",
]

_SCHEMA_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
CONFIG_PREFIX = "configuration problem:"


# --------------------------------------------------------------------------------------------
# A small JSON Schema validator
# --------------------------------------------------------------------------------------------

_TYPE_CHECKS: dict[str, Any] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
    "integer": lambda v: (
        (isinstance(v, int) and not isinstance(v, bool))
        or (isinstance(v, float) and math.isfinite(v) and v.is_integer())
    ),
}


def _json_equal(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but true != 1 and "1" != 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _resolve_ref(ref: str, root: Mapping[str, Any]) -> Mapping[str, Any]:
    if not ref.startswith("#"):
        raise ValueError(f"only local $ref are supported, got {ref!r}")
    node: Any = root
    for part in [p for p in ref[1:].split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            raise ValueError(f"unresolvable $ref {ref!r}")
        node = node[part]
    if not isinstance(node, Mapping):
        raise ValueError(f"$ref {ref!r} does not point to a schema")
    return node


def _validate(value: Any, schema: Mapping[str, Any] | bool, path: str, root: Mapping[str, Any], out: list[str]) -> None:
    if schema is True:
        return
    if schema is False:
        out.append(f"{path}: no value is allowed here")
        return
    if "$ref" in schema:
        _validate(value, _resolve_ref(schema["$ref"], root), path, root, out)

    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else list(types)
        unknown = [t for t in names if t not in _TYPE_CHECKS]
        if unknown:
            raise ValueError(f"unsupported type {unknown[0]!r} in schema at {path}")
        if not any(_TYPE_CHECKS[t](value) for t in names):
            out.append(f"{path}: expected {' or '.join(names)}, got {_json_type(value)}")
            return  # the other keywords would only repeat the type error

    if "enum" in schema and not any(_json_equal(value, option) for option in schema["enum"]):
        out.append(f"{path}: {value!r} is not one of {list(schema['enum'])!r}")
    if "const" in schema and not _json_equal(value, schema["const"]):
        out.append(f"{path}: expected {schema['const']!r}, got {value!r}")

    for keyword in ("anyOf", "oneOf"):
        if keyword in schema:
            matches = 0
            for option in schema[keyword]:
                errors: list[str] = []
                _validate(value, option, path, root, errors)
                matches += not errors
            if matches == 0 or (keyword == "oneOf" and matches > 1):
                want = "any" if keyword == "anyOf" else "exactly one"
                out.append(f"{path}: matches {matches} of the {keyword} alternatives, expected {want}")
    for option in schema.get("allOf", ()):
        _validate(value, option, path, root, out)

    if isinstance(value, dict):
        properties: Mapping[str, Any] = schema.get("properties", {})
        for key in schema.get("required", ()):
            if key not in value:
                out.append(f"{path}: missing required property {key!r}")
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in properties:
                _validate(item, properties[key], f"{path}.{key}", root, out)
            elif extra is False:
                out.append(f"{path}: unexpected property {key!r}")
            elif isinstance(extra, Mapping):
                _validate(item, extra, f"{path}.{key}", root, out)
    elif isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            out.append(f"{path}: expected at least {schema['minItems']} items, got {len(value)}")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            out.append(f"{path}: expected at most {schema['maxItems']} items, got {len(value)}")
        items = schema.get("items")
        if isinstance(items, (Mapping, bool)):
            for i, item in enumerate(value):
                _validate(item, items, f"{path}[{i}]", root, out)
    elif isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            out.append(f"{path}: shorter than {schema['minLength']} characters")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            out.append(f"{path}: longer than {schema['maxLength']} characters")
        if "pattern" in schema and re.search(schema["pattern"], value) is None:
            out.append(f"{path}: does not match pattern {schema['pattern']!r}")
    elif _TYPE_CHECKS["number"](value):
        if "minimum" in schema and value < schema["minimum"]:
            out.append(f"{path}: {value} is below the minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            out.append(f"{path}: {value} is above the maximum {schema['maximum']}")


def _json_type(value: Any) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _TYPE_CHECKS[name](value):
            return name
    return type(value).__name__


def validate_json_schema(instance: Any, schema: Mapping[str, Any]) -> list[str]:
    """Errors of ``instance`` against ``schema`` (empty when valid), each prefixed by a ``$.path``.

    Supported keywords: ``type`` (one name or a list, e.g. ``["string", "null"]``; JSON types
    object/array/string/number/integer/boolean/null), ``enum``, ``const``, ``properties``,
    ``required``, ``additionalProperties`` (boolean or schema), ``items`` (one schema),
    ``minItems``/``maxItems``, ``minLength``/``maxLength``, ``pattern``, ``minimum``/``maximum``,
    ``anyOf``/``oneOf``/``allOf`` and local ``$ref`` (``#/$defs/...``). Annotations such as
    ``description``, ``title``, ``default`` or ``format`` are ignored. A schema using an unknown
    ``type`` or a non-local ``$ref`` raises ``ValueError`` (a programming error, not a bad answer).
    """
    errors: list[str] = []
    _validate(instance, schema, "$", schema, errors)
    return errors


def _check_schema_name(schema_name: str) -> None:
    if not _SCHEMA_NAME.match(schema_name):
        raise ValueError(f"schema_name must match {_SCHEMA_NAME.pattern}, got {schema_name!r}")


def _validated(result: Any, schema: Mapping[str, Any], schema_name: str, source: str) -> dict[str, Any]:
    if not isinstance(result, dict):
        raise LLMOutputError(f"{source}: expected a JSON object for {schema_name}, got {_json_type(result)}")
    errors = validate_json_schema(result, schema)
    if errors:
        shown = "; ".join(errors[:5]) + (f"; and {len(errors) - 5} more" if len(errors) > 5 else "")
        raise LLMOutputError(f"{source}: answer does not match schema {schema_name}: {shown}")
    return result


_FENCED = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\r?\n?(.*?)```", re.DOTALL)


def extract_json_text(content: str) -> Any:
    """Parse a model's text answer as JSON, tolerating a Markdown code fence around it.

    Tries the whole text first, then the first fenced block (```json ... ``` or ``` ... ```).
    Raises ``ValueError`` when neither parses.
    """
    text = content.strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    match = _FENCED.search(text)
    if match:
        try:
            return json.loads(match.group(1).strip())
        except json.JSONDecodeError as exc:
            raise ValueError(f"fenced block is not valid JSON: {exc}") from exc
    raise ValueError(f"not valid JSON: {text[:200]!r}")


# --------------------------------------------------------------------------------------------
# Bedrock Converse
# --------------------------------------------------------------------------------------------

_BEDROCK_TRANSIENT = frozenset(
    {
        "ThrottlingException",
        "TooManyRequestsException",
        "ServiceUnavailableException",
        "InternalServerException",
        "ModelTimeoutException",
        "ModelNotReadyException",
        "ModelErrorException",
        "ServiceQuotaExceededException",
    }
)


class BedrockConverseLLM:
    """Structured output from a Bedrock model through the Converse API and a forced tool call.

    Each call offers exactly one tool, named ``schema_name`` with ``inputSchema={"json": schema}``,
    and forces it with ``toolChoice={"tool": {"name": schema_name}}`` (supported by Anthropic
    Claude, Mistral Large and Amazon Nova models). The answer is the ``input`` of the
    ``toolUse`` block with that name in ``output.message.content``, validated against
    ``schema``. The system prompt goes in ``system=[{"text": system}]`` (omitted when empty),
    the prompt is the single user message.

    boto3 is synchronous, so the call runs in a worker thread. ``timeout_s`` bounds the whole
    call (retries included) with ``asyncio.wait_for``; botocore's read timeout is the same
    value and its standard retry mode makes at most ``max_attempts`` attempts (throttling and
    5xx are retried by botocore before surfacing). When ``client`` is given it is used as is.
    """

    def __init__(
        self,
        model_id: str,
        *,
        client: Any | None = None,
        region: str | None = None,
        timeout_s: float = 30.0,
        max_tokens: int = 2048,
        temperature: float = 0.0,
        max_attempts: int = 3,
    ) -> None:
        if not model_id:
            raise ValueError("bedrock_model_id: a Bedrock model id is required")
        if timeout_s <= 0:
            raise ValueError("llm_timeout_s must be positive")
        if max_tokens <= 0:
            raise ValueError("max_tokens must be positive")
        if max_attempts <= 0:
            raise ValueError("max_attempts must be positive")
        self.model_id = model_id
        self.timeout_s = float(timeout_s)
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.name = f"bedrock:{model_id}"
        if client is None:
            import boto3

            client = boto3.client(
                "bedrock-runtime",
                region_name=region,
                config=Config(
                    connect_timeout=min(self.timeout_s, 10.0),
                    read_timeout=self.timeout_s,
                    retries={"mode": "standard", "total_max_attempts": max_attempts},
                ),
            )
        self._client = client

    def build_request(self, *, system: str, prompt: str, schema: dict[str, Any], schema_name: str) -> dict[str, Any]:
        """The keyword arguments of the ``converse`` call."""
        _check_schema_name(schema_name)
        description = schema.get("description") or f"Record the answer in the {schema_name} structure."
        request: dict[str, Any] = {
            "modelId": self.model_id,
            "messages": [{"role": "user", "content": [{"text": prompt}]}],
            "inferenceConfig": {"maxTokens": self.max_tokens, "temperature": self.temperature},
            "toolConfig": {
                "tools": [
                    {
                        "toolSpec": {
                            "name": schema_name,
                            "description": description,
                            "inputSchema": {"json": schema},
                        }
                    }
                ],
                "toolChoice": {"tool": {"name": schema_name}},
            },
        }
        if system:
            request["system"] = [{"text": system}]
        return request

    def _converse(self, request: dict[str, Any]) -> dict[str, Any]:
        """Blocking Converse call; runs in a worker thread."""
        try:
            return self._client.converse(**request)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = str(error.get("Code", "error"))
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            detail = f"Bedrock model {self.model_id!r} answered {code} (HTTP {status}): {error.get('Message', '')}"
            transient = code in _BEDROCK_TRANSIENT or status is None or status == 429 or status >= 500
            if transient:
                raise DependencyUnavailableError("llm", detail) from exc
            raise DependencyUnavailableError(
                "llm",
                f"{CONFIG_PREFIX} {detail}. Check model access, IAM permissions, the model id and "
                "the region; retrying will not help.",
            ) from exc
        except (NoCredentialsError, PartialCredentialsError) as exc:
            raise DependencyUnavailableError("llm", f"{CONFIG_PREFIX} no AWS credentials for Bedrock: {exc}") from exc
        except BotoCoreError as exc:  # read/connect timeouts, connection errors
            raise DependencyUnavailableError("llm", f"Bedrock model {self.model_id!r} unreachable: {exc}") from exc

    async def generate_structured(
        self, *, system: str, prompt: str, schema: dict[str, Any], schema_name: str
    ) -> dict[str, Any]:
        """The tool input the model produced, valid against ``schema`` (see the class docstring)."""
        request = self.build_request(system=system, prompt=prompt, schema=schema, schema_name=schema_name)
        try:
            response = await asyncio.wait_for(asyncio.to_thread(self._converse, request), timeout=self.timeout_s)
        except TimeoutError as exc:
            raise DependencyUnavailableError(
                "llm", f"Bedrock model {self.model_id!r} did not answer within {self.timeout_s:g} s"
            ) from exc
        return _validated(self._tool_input(response, schema_name), schema, schema_name, self.name)

    def _tool_input(self, response: Mapping[str, Any], schema_name: str) -> Any:
        stop_reason = response.get("stopReason")
        content = ((response.get("output") or {}).get("message") or {}).get("content") or []
        calls = [block["toolUse"] for block in content if isinstance(block, dict) and "toolUse" in block]
        chosen = next((call for call in calls if call.get("name") == schema_name), None)
        if stop_reason == "max_tokens":
            raise LLMOutputError(f"{self.name}: answer cut off at max_tokens={self.max_tokens}")
        if chosen is None:
            text = " ".join(str(block.get("text", "")) for block in content if isinstance(block, dict)).strip()
            called = [call.get("name") for call in calls]
            raise LLMOutputError(
                f"{self.name}: the model did not call the {schema_name} tool "
                f"(stopReason={stop_reason!r}, tools called={called}, text={text[:200]!r})"
            )
        value = chosen.get("input")
        if isinstance(value, str):  # some models hand back the arguments as a JSON string
            try:
                value = extract_json_text(value)
            except ValueError as exc:
                raise LLMOutputError(f"{self.name}: tool input is not JSON: {exc}") from exc
        return value


# --------------------------------------------------------------------------------------------
# OpenAI-compatible chat completions
# --------------------------------------------------------------------------------------------


class OpenAICompatibleLLM:
    """Structured output from any OpenAI-compatible ``/chat/completions`` endpoint.

    Sends ``POST {base_url}/chat/completions`` with a system message (when non-empty), the
    prompt as the user message, ``temperature`` (and ``max_tokens`` when set), and
    ``response_format={"type": "json_schema", "json_schema": {"name": schema_name,
    "schema": schema, "strict": true}}``. Strict mode on OpenAI requires every property to be
    listed in ``required`` and ``additionalProperties: false`` on every object; servers such
    as vLLM or llama.cpp use the schema for guided decoding. The answer
    ``choices[0].message.content`` is parsed as JSON (a Markdown code fence around it is
    tolerated) and validated against ``schema``.

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

    def build_request(self, *, system: str, prompt: str, schema: dict[str, Any], schema_name: str) -> dict[str, Any]:
        """The JSON body of the chat completion request."""
        _check_schema_name(schema_name)
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
        self, *, system: str, prompt: str, schema: dict[str, Any], schema_name: str
    ) -> dict[str, Any]:
        """The model's JSON answer, valid against ``schema`` (see the class docstring)."""
        body = self.build_request(system=system, prompt=prompt, schema=schema, schema_name=schema_name)
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
                "llm", f"{self.url} did not answer with a chat completion: {response.text[:200]!r}"
            ) from exc
        return _validated(self._content_json(choice, message), schema, schema_name, self.name)

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
