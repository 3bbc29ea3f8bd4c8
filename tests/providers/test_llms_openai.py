"""OpenAICompatibleLLM against a real HTTP server on 127.0.0.1 that records requests and replays answers."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import httpx
import pytest
from pydantic import BaseModel, ConfigDict

from cognis_memory.errors import DependencyUnavailableError
from cognis_memory.providers.base import LLM, LLMOutputError
from cognis_memory.providers.llms import OpenAICompatibleLLM


class Decision(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decision: Literal["ADD", "UPDATE", "DELETE", "NONE"]
    target: str | None


# the schema sent for Decision
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {"type": "string", "enum": ["ADD", "UPDATE", "DELETE", "NONE"]},
        "target": {"type": ["string", "null"]},
    },
    "required": ["decision", "target"],
    "additionalProperties": False,
}
ANSWER = {"decision": "UPDATE", "target": "m3"}


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict/list -> JSON, bytes/str -> as is
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeChatServer:
    """A threaded HTTP server on a free local port; answers POSTs from a queue of replies."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[Recorded] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                outer.requests.append(
                    Recorded("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw))
                )
                reply = outer.replies.pop(0) if outer.replies else Reply(500, {"error": {"message": "no reply queued"}})
                time.sleep(reply.delay_s)
                body = reply.body
                data = (
                    body
                    if isinstance(body, bytes)
                    else body.encode()
                    if isinstance(body, str)
                    else json.dumps(body).encode()
                )
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", reply.headers.get("Content-Type", "application/json"))
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

            def log_message(self, *_: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def chat_server() -> Iterator[FakeChatServer]:
    server = FakeChatServer()
    yield server
    server.close()


@pytest.fixture
def server(chat_server: FakeChatServer) -> FakeChatServer:
    chat_server.replies.clear()
    chat_server.requests.clear()
    return chat_server


def completion(content: Any, *, finish_reason: str = "stop", **message: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "local-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, **message},
                "finish_reason": finish_reason,
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


async def ask(llm: OpenAICompatibleLLM, system: str = "Decide.") -> dict[str, Any]:
    answer = await llm.generate_structured(
        system=system, prompt="new fact: lives in Berlin", response_model=Decision, schema_name="decision"
    )
    assert isinstance(answer, Decision)
    return answer.model_dump()


async def test_success_sends_a_json_schema_chat_completion(server: FakeChatServer) -> None:
    server.replies.append(Reply(body=completion(json.dumps(ANSWER))))
    llm = OpenAICompatibleLLM(server.base_url + "/", "qwen2.5-7b-instruct", api_key="sk-test", max_tokens=256)
    assert isinstance(llm, LLM)
    assert llm.name == "openai:qwen2.5-7b-instruct"
    try:
        assert await ask(llm) == ANSWER
    finally:
        await llm.aclose()
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.headers["content-type"] == "application/json"
    assert request.body == {
        "model": "qwen2.5-7b-instruct",
        "messages": [
            {"role": "system", "content": "Decide."},
            {"role": "user", "content": "new fact: lives in Berlin"},
        ],
        "temperature": 0.0,
        "max_tokens": 256,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "decision", "schema": SCHEMA, "strict": True},
        },
    }


async def test_no_key_no_authorization_header_and_no_empty_system(server: FakeChatServer) -> None:
    server.replies.append(Reply(body=completion(json.dumps(ANSWER))))
    llm = OpenAICompatibleLLM(server.base_url, "m")
    try:
        assert await ask(llm, system="") == ANSWER
    finally:
        await llm.aclose()
    (request,) = server.requests
    assert "authorization" not in request.headers
    assert request.body["messages"] == [{"role": "user", "content": "new fact: lives in Berlin"}]
    assert "max_tokens" not in request.body


@pytest.mark.parametrize(
    "content",
    [
        '```json\n{"decision": "UPDATE", "target": "m3"}\n```',
        'Sure:\n```\n{"decision": "UPDATE", "target": "m3"}\n```',
        [{"type": "text", "text": '{"decision": "UPDATE", '}, {"type": "text", "text": '"target": "m3"}'}],
    ],
    ids=["json-fence", "bare-fence-with-prose", "content-parts"],
)
async def test_fenced_and_part_content_is_accepted(server: FakeChatServer, content: Any) -> None:
    server.replies.append(Reply(body=completion(content)))
    async with httpx.AsyncClient() as client:
        llm = OpenAICompatibleLLM(server.base_url, "m", client=client)
        assert await ask(llm) == ANSWER
        await llm.aclose()
        assert not client.is_closed  # a client passed in is not ours to close


@pytest.mark.parametrize("status", [500, 502, 503, 429, 408])
async def test_retryable_http_errors_are_dependency_unavailable(server: FakeChatServer, status: int) -> None:
    server.replies.append(Reply(status, {"error": {"message": "overloaded, try later"}}))
    llm = OpenAICompatibleLLM(server.base_url, "m")
    with pytest.raises(DependencyUnavailableError) as info:
        await ask(llm)
    await llm.aclose()
    assert info.value.dependency == "llm"
    assert f"HTTP {status}" in str(info.value) and "overloaded, try later" in str(info.value)
    assert "configuration problem" not in str(info.value)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_other_4xx_are_configuration_problems(server: FakeChatServer, status: int) -> None:
    server.replies.append(Reply(status, {"error": {"message": "The model `m` does not exist"}}))
    llm = OpenAICompatibleLLM(server.base_url, "m")
    with pytest.raises(DependencyUnavailableError, match="configuration problem") as info:
        await ask(llm)
    await llm.aclose()
    assert f"HTTP {status}" in str(info.value) and "does not exist" in str(info.value)


async def test_slow_server_times_out(server: FakeChatServer) -> None:
    server.replies.append(Reply(body=completion(json.dumps(ANSWER)), delay_s=1.0))
    llm = OpenAICompatibleLLM(server.base_url, "m", timeout_s=0.2)
    started = time.perf_counter()
    with pytest.raises(DependencyUnavailableError, match=r"within 0\.2 s"):
        await ask(llm)
    assert time.perf_counter() - started < 0.7
    await llm.aclose()


async def test_unreachable_server_is_dependency_unavailable() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    llm = OpenAICompatibleLLM(f"http://127.0.0.1:{port}/v1", "m", timeout_s=2)
    with pytest.raises(DependencyUnavailableError, match="unreachable"):
        await ask(llm)
    await llm.aclose()


@pytest.mark.parametrize(
    ("reply", "match"),
    [
        (completion('{"decision": "UPDATE", "target": '), "not valid JSON"),
        (completion("I think you should update m3."), "not valid JSON"),
        (completion('```json\n{"decision": UPDATE}\n```'), "fenced block is not valid JSON"),
        (completion(json.dumps({"decision": "MERGE", "target": None})), r"\$\.decision: Input should be 'ADD'"),
        (completion(json.dumps({"decision": "ADD"})), r"\$\.target: Field required"),
        (completion(json.dumps({**ANSWER, "why": "because"})), r"\$\.why: Extra inputs are not permitted"),
        (completion(json.dumps({**ANSWER, "target": 3})), r"\$\.target: Input should be a valid string, got 3"),
        (completion(json.dumps([ANSWER])), "expected a JSON object"),
        (completion(None), "no text content"),
        (completion(None, refusal="I can't help with that."), "refused"),
        (completion('{"decision": "UPD', finish_reason="length"), "cut off"),
    ],
)
async def test_bad_content_is_an_output_error(server: FakeChatServer, reply: dict[str, Any], match: str) -> None:
    server.replies.append(Reply(body=reply))
    llm = OpenAICompatibleLLM(server.base_url, "m")
    with pytest.raises(LLMOutputError, match=match):
        await ask(llm)
    await llm.aclose()


@pytest.mark.parametrize(
    "reply",
    [
        Reply(body=b"<html>gateway</html>", headers={"Content-Type": "text/html"}),
        Reply(body={"object": "error"}),
        Reply(body={"choices": []}),
    ],
    ids=["html", "no-choices", "empty-choices"],
)
async def test_reply_that_is_not_a_completion_is_dependency_unavailable(server: FakeChatServer, reply: Reply) -> None:
    server.replies.append(reply)
    llm = OpenAICompatibleLLM(server.base_url, "m")
    with pytest.raises(DependencyUnavailableError, match="did not answer with a chat completion"):
        await ask(llm)
    await llm.aclose()


async def test_own_client_is_reused_and_closed(server: FakeChatServer) -> None:
    server.replies.extend([Reply(body=completion(json.dumps(ANSWER))), Reply(body=completion(json.dumps(ANSWER)))])
    llm = OpenAICompatibleLLM(server.base_url, "m")
    await ask(llm)
    first = llm._own_client
    await ask(llm)
    assert llm._own_client is first and first is not None
    await llm.aclose()
    assert first.is_closed and llm._own_client is None


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"base_url": ""}, "openai_base_url"),
        ({"base_url": "localhost:8000"}, "openai_base_url"),
        ({"model": ""}, "openai_model"),
        ({"timeout_s": 0}, "llm_timeout_s"),
    ],
)
def test_invalid_construction(kwargs: dict[str, Any], match: str) -> None:
    args: dict[str, Any] = {"base_url": "http://127.0.0.1:9/v1", "model": "m", **kwargs}
    with pytest.raises(ValueError, match=match):
        OpenAICompatibleLLM(**args)


# -- structured-output modes -------------------------------------------------------------------------
#: what llama-cpp-python 0.3's server answers to a json_schema response_format (seen against the real one)
LLAMA_CPP_PYTHON_REFUSAL = Reply(
    500,
    {"error": {"message": "[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
               "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}]", "type": "internal_server_error"}},
)  # fmt: skip


def _system(request: Recorded) -> str:
    return next(m["content"] for m in request.body["messages"] if m["role"] == "system")


def _schema_in(system: str) -> Any:
    """The JSON Schema the system prompt states (after "JSON Schema: ")."""
    return json.loads(system.split("JSON Schema: ", 1)[1])


async def test_json_object_mode_sends_the_schema_in_the_format_and_the_prompt(server: FakeChatServer) -> None:
    server.replies.append(Reply(body=completion(json.dumps(ANSWER))))
    llm = OpenAICompatibleLLM(server.base_url, "m", structured_output="json_object")
    assert await ask(llm) == ANSWER
    await llm.aclose()
    (request,) = server.requests
    assert request.body["response_format"] == {"type": "json_object", "schema": SCHEMA}
    system = _system(request)
    assert system.startswith("Decide.\n\n") and _schema_in(system) == SCHEMA


async def test_prompt_mode_sends_no_response_format(server: FakeChatServer) -> None:
    server.replies.append(Reply(body=completion("Here you go:\n" + json.dumps(ANSWER))))
    llm = OpenAICompatibleLLM(server.base_url, "m", structured_output="prompt")
    with pytest.raises(LLMOutputError) as info:  # prose around the JSON: the caller may repair it
        await ask(llm, system="")
    await llm.aclose()
    assert info.value.text is not None and json.dumps(ANSWER) in info.value.text
    (request,) = server.requests
    assert "response_format" not in request.body
    assert _schema_in(_system(request)) == SCHEMA


async def test_auto_steps_down_when_the_server_refuses_json_schema_and_remembers(server: FakeChatServer) -> None:
    server.replies.extend(
        [
            LLAMA_CPP_PYTHON_REFUSAL,
            Reply(body=completion(json.dumps(ANSWER))),
            Reply(body=completion(json.dumps(ANSWER))),
        ]
    )
    llm = OpenAICompatibleLLM(server.base_url, "m")
    assert llm.mode == "json_schema"
    assert await ask(llm) == ANSWER
    assert llm.mode == "json_object"
    assert await ask(llm) == ANSWER  # the next call goes straight to the mode that worked
    await llm.aclose()
    assert [r.body["response_format"]["type"] for r in server.requests] == ["json_schema", "json_object", "json_object"]


async def test_auto_steps_down_to_prompt_when_json_object_is_refused_too(server: FakeChatServer) -> None:
    refused = Reply(400, {"error": {"message": "response_format is not supported by this server"}})
    server.replies.extend([refused, refused, Reply(body=completion(json.dumps(ANSWER)))])
    llm = OpenAICompatibleLLM(server.base_url, "m")
    assert await ask(llm) == ANSWER
    await llm.aclose()
    assert llm.mode == "prompt"
    assert [r.body.get("response_format", {}).get("type") for r in server.requests] == [
        "json_schema", "json_object", None
    ]  # fmt: skip


async def test_a_fixed_mode_the_server_refuses_is_a_configuration_problem(server: FakeChatServer) -> None:
    server.replies.append(LLAMA_CPP_PYTHON_REFUSAL)
    llm = OpenAICompatibleLLM(server.base_url, "m", structured_output="json_schema")
    with pytest.raises(DependencyUnavailableError) as info:
        await ask(llm)
    await llm.aclose()
    assert len(server.requests) == 1 and "HTTP 500" in str(info.value)


async def test_an_outage_is_not_taken_for_a_refused_format(server: FakeChatServer) -> None:
    server.replies.append(Reply(503, {"error": {"message": "model is loading"}}))
    llm = OpenAICompatibleLLM(server.base_url, "m")
    with pytest.raises(DependencyUnavailableError, match="model is loading"):
        await ask(llm)
    await llm.aclose()
    assert llm.mode == "json_schema" and len(server.requests) == 1


async def test_output_errors_carry_what_the_model_said(server: FakeChatServer) -> None:
    server.replies.extend(
        [
            Reply(body=completion(json.dumps({"decision": "MERGE", "target": None}))),
            Reply(body=completion('{"decision": "UPD', finish_reason="length")),
            Reply(body=completion("I think you should update m3.")),
        ]
    )
    llm = OpenAICompatibleLLM(server.base_url, "m")
    errors = []
    for _ in range(3):
        with pytest.raises(LLMOutputError) as info:
            await ask(llm)
        errors.append(info.value)
    await llm.aclose()
    invalid, cut, prose = errors
    assert invalid.answer == {"decision": "MERGE", "target": None} and invalid.text is None
    assert cut.truncated and cut.text == '{"decision": "UPD' and cut.answer is None
    assert prose.text == "I think you should update m3." and not prose.truncated


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="llm_structured_output"):
        OpenAICompatibleLLM("http://127.0.0.1:9/v1", "m", structured_output="grammar")  # type: ignore[arg-type]
