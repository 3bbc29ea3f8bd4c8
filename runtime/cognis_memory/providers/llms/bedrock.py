"""Bedrock Converse: structured output through a forced tool call (see :class:`BedrockConverseLLM`)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    NoCredentialsError,
    PartialCredentialsError,
)
from pydantic import BaseModel

from cognis_memory.errors import DependencyUnavailableError, SettingError
from cognis_memory.providers.base import AnswerT, LLMOutputError

from ..llm_usage import report_tokens
from ..settings import LLMSettings, required
from .structured import CONFIG_PREFIX, check_schema_name, extract_json_text, validated, wire_schema

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

    Each call offers exactly one tool, named ``schema_name`` with ``inputSchema={"json": schema}``
    (``schema`` derived from the response model by :func:`.structured.wire_schema`), and forces it
    with ``toolChoice={"tool": {"name": schema_name}}`` (supported by Anthropic Claude, Mistral
    Large and Amazon Nova models). The answer is the ``input`` of the ``toolUse`` block with that
    name in ``output.message.content``, validated as the response model. The system prompt goes in
    ``system=[{"text": system}]`` (omitted when empty), the prompt is the single user message.

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
            raise SettingError("bedrock_model_id", "a Bedrock model id is required")
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

    @classmethod
    def from_settings(cls, settings: LLMSettings, *, aws_region: str | None) -> BedrockConverseLLM:
        """Bedrock Converse with ``bedrock_model_id`` in ``aws_region``."""
        model_id = required(settings.bedrock_model_id, "llm=bedrock", "bedrock_model_id")
        return cls(model_id, region=aws_region, timeout_s=settings.timeout_s)

    def build_request(
        self, *, system: str, prompt: str, response_model: type[BaseModel], schema_name: str
    ) -> dict[str, Any]:
        """The keyword arguments of the ``converse`` call."""
        check_schema_name(schema_name)
        schema = wire_schema(response_model)
        request: dict[str, Any] = {
            "modelId": self.model_id,
            "messages": [{"role": "user", "content": [{"text": prompt}]}],
            "inferenceConfig": {
                "maxTokens": self.max_tokens,
                "temperature": self.temperature,
            },
            "toolConfig": {
                "tools": [
                    {
                        "toolSpec": {
                            "name": schema_name,
                            "description": f"Record the answer in the {schema_name} structure.",
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
        self, *, system: str, prompt: str, response_model: type[AnswerT], schema_name: str
    ) -> AnswerT:
        """The tool input the model produced, as ``response_model`` (see the class docstring)."""
        request = self.build_request(
            system=system, prompt=prompt, response_model=response_model, schema_name=schema_name
        )
        try:
            response = await asyncio.wait_for(asyncio.to_thread(self._converse, request), timeout=self.timeout_s)
        except TimeoutError as exc:
            raise DependencyUnavailableError(
                "llm",
                f"Bedrock model {self.model_id!r} did not answer within {self.timeout_s:g} s",
            ) from exc
        usage = response.get("usage") if isinstance(response, Mapping) else None
        if isinstance(usage, Mapping):
            report_tokens(usage.get("inputTokens"), usage.get("outputTokens"))
        return validated(self._tool_input(response, schema_name), response_model, schema_name, self.name)

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
