"""BedrockConverseLLM with botocore's Stubber on a real bedrock-runtime client (moto has no converse)."""

from __future__ import annotations

import json
import time
from typing import Any, Literal

import boto3
import pytest
from botocore.awsrequest import AWSPreparedRequest
from botocore.exceptions import EndpointConnectionError, ReadTimeoutError
from botocore.stub import Stubber
from pydantic import BaseModel, ConfigDict

from cognis_memory.errors import DependencyUnavailableError
from cognis_memory.providers.base import LLM, LLMOutputError
from cognis_memory.providers.llms import BedrockConverseLLM
from tests.providers.provider_test_helpers import on_send, raw_http_response

MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"


class Fact(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: str
    category: Literal["preferences", "health"]


class Facts(BaseModel):
    """Facts worth remembering (a docstring, not sent)."""

    model_config = ConfigDict(extra="forbid")

    facts: list[Fact]


# the schema sent for Facts
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "content": {"type": "string"},
                    "category": {"type": "string", "enum": ["preferences", "health"]},
                },
                "required": ["content", "category"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["facts"],
    "additionalProperties": False,
}
SYSTEM = "You extract durable facts about the user."
PROMPT = "user: I stopped eating meat last month."

pytestmark = pytest.mark.usefixtures("aws_env")


@pytest.fixture
def client(aws_env: None) -> Any:
    return boto3.client("bedrock-runtime", region_name="us-east-1")


def _expected_request(**overrides: Any) -> dict[str, Any]:
    request = {
        "modelId": MODEL,
        "system": [{"text": SYSTEM}],
        "messages": [{"role": "user", "content": [{"text": PROMPT}]}],
        "inferenceConfig": {"maxTokens": 512, "temperature": 0.0},
        "toolConfig": {
            "tools": [
                {
                    "toolSpec": {
                        "name": "record_facts",
                        "description": "Record the answer in the record_facts structure.",
                        "inputSchema": {"json": SCHEMA},
                    }
                }
            ],
            "toolChoice": {"tool": {"name": "record_facts"}},
        },
    }
    request.update(overrides)
    return request


def _response(content: list[dict[str, Any]], stop_reason: str = "tool_use") -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop_reason,
        "usage": {"inputTokens": 120, "outputTokens": 30, "totalTokens": 150},
        "metrics": {"latencyMs": 412},
    }


def _tool_use(value: Any, name: str = "record_facts") -> dict[str, Any]:
    return {"toolUse": {"toolUseId": "tooluse_1", "name": name, "input": value}}


async def _call(llm: BedrockConverseLLM, system: str = SYSTEM) -> dict[str, Any]:
    answer = await llm.generate_structured(
        system=system, prompt=PROMPT, response_model=Facts, schema_name="record_facts"
    )
    assert isinstance(answer, Facts)
    return answer.model_dump()


ANSWER = {"facts": [{"content": "is vegetarian since last month", "category": "preferences"}]}


async def test_success_sends_the_tool_config_and_returns_the_tool_input(client: Any) -> None:
    llm = BedrockConverseLLM(MODEL, client=client, max_tokens=512)
    assert isinstance(llm, LLM)
    assert llm.name == f"bedrock:{MODEL}"
    with Stubber(client) as stub:
        stub.add_response(
            "converse",
            _response([{"text": "Recording the facts."}, _tool_use(ANSWER)]),
            _expected_request(),
        )
        assert await _call(llm) == ANSWER
        stub.assert_no_pending_responses()


async def test_empty_system_prompt_is_omitted(client: Any) -> None:
    llm = BedrockConverseLLM(MODEL, client=client, max_tokens=512)
    expected = _expected_request()
    del expected["system"]
    with Stubber(client) as stub:
        stub.add_response("converse", _response([_tool_use(ANSWER)]), expected)
        assert await _call(llm, system="") == ANSWER


async def test_temperature_is_sent_and_the_model_docstring_is_not(client: Any) -> None:
    """The tool description is the fixed sentence: Facts' docstring is for programmers (see wire_schema)."""
    llm = BedrockConverseLLM(MODEL, client=client, max_tokens=512, temperature=0.3)
    expected = _expected_request(inferenceConfig={"maxTokens": 512, "temperature": 0.3})
    assert Facts.__doc__ and Facts.__doc__ not in json.dumps(expected)
    with Stubber(client) as stub:
        stub.add_response("converse", _response([_tool_use(ANSWER)]), expected)
        assert await _call(llm) == ANSWER


async def test_tool_input_given_as_a_json_string_is_accepted(client: Any) -> None:
    llm = BedrockConverseLLM(MODEL, client=client)
    with Stubber(client) as stub:
        stub.add_response("converse", _response([_tool_use('{"facts": []}')]))
        assert await _call(llm) == {"facts": []}


async def test_answer_without_the_tool_is_an_output_error(client: Any) -> None:
    llm = BedrockConverseLLM(MODEL, client=client)
    with Stubber(client) as stub:
        stub.add_response("converse", _response([{"text": "I can't help with that."}], stop_reason="end_turn"))
        with pytest.raises(LLMOutputError, match="did not call the record_facts tool") as info:
            await _call(llm)
    assert "I can't help with that." in str(info.value)


async def test_call_of_another_tool_is_an_output_error(client: Any) -> None:
    llm = BedrockConverseLLM(MODEL, client=client)
    with Stubber(client) as stub:
        stub.add_response("converse", _response([_tool_use(ANSWER, name="something_else")]))
        with pytest.raises(LLMOutputError, match="something_else"):
            await _call(llm)


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ({"facts": [{"content": "x"}]}, r"\$\.facts\[0\]\.category: Field required"),
        ({"facts": [{"content": "x", "category": "food"}]}, r"\$\.facts\[0\]\.category: Input should be 'preferences'"),
        ({"facts": [{"content": "x", "category": "health", "why": 1}]}, r"\$\.facts\[0\]\.why: Extra inputs"),
        ({"facts": "none"}, r"\$\.facts: Input should be a valid (array|list)"),
        ({}, r"\$\.facts: Field required"),
        (["facts"], "expected a JSON object"),
        ("not json at all", "not JSON"),
    ],
)
async def test_invalid_structure_is_an_output_error(client: Any, value: Any, match: str) -> None:
    llm = BedrockConverseLLM(MODEL, client=client)
    with Stubber(client) as stub:
        stub.add_response("converse", _response([_tool_use(value)]))
        with pytest.raises(LLMOutputError, match=match):
            await _call(llm)


async def test_truncated_answer_is_an_output_error(client: Any) -> None:
    llm = BedrockConverseLLM(MODEL, client=client, max_tokens=16)
    with Stubber(client) as stub:
        stub.add_response("converse", _response([_tool_use({"facts": []})], stop_reason="max_tokens"))
        with pytest.raises(LLMOutputError, match="max_tokens=16"):
            await _call(llm)


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("ThrottlingException", 429),
        ("ServiceUnavailableException", 503),
        ("InternalServerException", 500),
        ("ModelTimeoutException", 408),
        ("ModelNotReadyException", 429),
    ],
)
async def test_transient_errors_are_dependency_unavailable(client: Any, code: str, status: int) -> None:
    llm = BedrockConverseLLM(MODEL, client=client)
    with Stubber(client) as stub:
        stub.add_client_error("converse", service_error_code=code, service_message="slow down", http_status_code=status)
        with pytest.raises(DependencyUnavailableError) as info:
            await _call(llm)
    assert info.value.dependency == "llm"
    assert code in str(info.value)
    assert "configuration problem" not in str(info.value)


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("AccessDeniedException", 403),
        ("ValidationException", 400),
        ("ResourceNotFoundException", 404),
        ("UnrecognizedClientException", 403),
    ],
)
async def test_configuration_errors_say_so(client: Any, code: str, status: int) -> None:
    llm = BedrockConverseLLM(MODEL, client=client)
    with Stubber(client) as stub:
        stub.add_client_error("converse", service_error_code=code, service_message="nope", http_status_code=status)
        with pytest.raises(DependencyUnavailableError, match="configuration problem") as info:
            await _call(llm)
    assert info.value.dependency == "llm"
    assert code in str(info.value) and MODEL in str(info.value)


@pytest.mark.parametrize(
    "error",
    [
        lambda r: ReadTimeoutError(endpoint_url=r.url),
        lambda r: EndpointConnectionError(endpoint_url=r.url),
    ],
    ids=["read-timeout", "connection"],
)
async def test_network_errors_are_dependency_unavailable(aws_env: None, error: Any) -> None:
    llm = BedrockConverseLLM(MODEL, region="us-east-1", max_attempts=1)

    def fail(request: AWSPreparedRequest) -> Any:
        raise error(request)

    seen = on_send(llm._client, "Converse", fail)
    with pytest.raises(DependencyUnavailableError, match="unreachable") as info:
        await _call(llm)
    assert "configuration problem" not in str(info.value)
    assert len(seen) == 1


async def test_slow_model_times_out(client: Any) -> None:
    def slow(request: AWSPreparedRequest) -> Any:
        time.sleep(0.6)
        return raw_http_response(request, b"{}")

    on_send(client, "Converse", slow)
    llm = BedrockConverseLLM(MODEL, client=client, timeout_s=0.15)
    started = time.perf_counter()
    with pytest.raises(DependencyUnavailableError, match=r"within 0\.15 s"):
        await _call(llm)
    assert time.perf_counter() - started < 0.45


async def test_own_client_configuration_and_wire_request(aws_env: None) -> None:
    llm = BedrockConverseLLM(MODEL, region="eu-central-1", timeout_s=20, max_attempts=2, max_tokens=512)
    config = llm._client.meta.config
    assert llm._client.meta.region_name == "eu-central-1"
    assert config.read_timeout == 20 and config.connect_timeout == 10
    assert config.retries == {"mode": "standard", "total_max_attempts": 2}

    answer = json.dumps(_response([_tool_use(ANSWER)])).encode()
    seen = on_send(llm._client, "Converse", lambda r: raw_http_response(r, answer))
    assert await _call(llm) == ANSWER
    (request,) = seen
    assert (
        request.url == f"https://bedrock-runtime.eu-central-1.amazonaws.com/model/{MODEL.replace(':', '%3A')}/converse"
    )
    sent = json.loads(request.body)
    expected = _expected_request()
    del expected["modelId"]  # in the URL
    assert sent == expected


def test_invalid_construction_and_schema_name(client: Any) -> None:
    with pytest.raises(ValueError, match="bedrock_model_id"):
        BedrockConverseLLM("", client=client)
    with pytest.raises(ValueError, match="llm_timeout_s"):
        BedrockConverseLLM(MODEL, client=client, timeout_s=0)
    llm = BedrockConverseLLM(MODEL, client=client)
    with pytest.raises(ValueError, match="schema_name"):
        llm.build_request(system="", prompt="p", response_model=Facts, schema_name="record facts!")
