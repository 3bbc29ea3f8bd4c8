"""examples/bedrock_chat.py against a real ``cognis-memory serve`` (embedded store), with botocore's
Stubber standing in for Bedrock: what goes to Bedrock is captured from the client's own events, and
every stubbed response is checked against the service model, as are the requests."""

from __future__ import annotations

import copy
import io
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from cognis_dev.processes import ServeProcess, free_port

from cognis_memory.client import MemoryClient
from tests.file_modules import load_file

REPO = Path(__file__).resolve().parents[2]
API_KEY = "chat-key"
MODEL = "us.anthropic.claude-haiku-4-5-20251001-v1:0"


def _load_example() -> Any:
    return load_file("bedrock_chat_example", REPO / "examples" / "bedrock_chat.py")


chat = _load_example()


@pytest.fixture(scope="module")
def chat_server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("chat-server")
    env = {
        "COGNIS_DATA_DIR": str(tmp / "data"),
        "COGNIS_API_KEYS": f"{API_KEY}=acme",
        "COGNIS_STORE": "embedded",
        "COGNIS_LLM": "none",
        "COGNIS_RERANKER": "none",
    }
    proc = ServeProcess(env, log_path=tmp / "serve.log").start()
    try:
        yield proc.url
    finally:
        proc.stop()


@pytest.fixture
def memory(chat_server: str) -> Any:
    with MemoryClient(chat_server, api_key=API_KEY) as client:
        yield client


class FakeBedrock:
    """A real bedrock-runtime client behind a Stubber; ``calls`` holds the params of every converse call."""

    def __init__(self) -> None:
        self.client = boto3.client(
            "bedrock-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
        )
        self.calls: list[dict[str, Any]] = []
        self.client.meta.events.register("before-parameter-build.bedrock-runtime.Converse", self._capture)
        self.stub = Stubber(self.client)
        self.stub.activate()

    def _capture(self, params: dict[str, Any], **_: Any) -> None:
        self.calls.append(copy.deepcopy(params))  # the agent's message list keeps changing

    def answer(self, *content: dict[str, Any], stop: str = "end_turn") -> None:
        self.stub.add_response(
            "converse",
            {
                "output": {"message": {"role": "assistant", "content": list(content)}},
                "stopReason": stop,
                "usage": {"inputTokens": 250, "outputTokens": 40, "totalTokens": 290},
                "metrics": {"latencyMs": 321},
            },
        )

    def tool_use(self, tool_use_id: str, name: str, tool_input: dict[str, Any], text: str | None = None) -> None:
        blocks = [{"text": text}] if text else []
        blocks.append({"toolUse": {"toolUseId": tool_use_id, "name": name, "input": tool_input}})
        self.answer(*blocks, stop="tool_use")

    def fail(self, code: str, status: int) -> None:
        self.stub.add_client_error(
            "converse", service_error_code=code, service_message="stubbed", http_status_code=status
        )


def _contents(memory: MemoryClient, user_id: str) -> set[str]:
    """Each stored memory as ``speaker: content`` (the speaker is a field; the content is as said)."""
    return {f"{m.speaker}: {m.content}" for m in memory.iter_memories(user_id)}


def _system_text(call: dict[str, Any]) -> str:
    return "\n".join(block["text"] for block in call["system"])


def _tool_results(call: dict[str, Any]) -> list[dict[str, Any]]:
    last = call["messages"][-1]
    assert last["role"] == "user"
    return [block["toolResult"] for block in last["content"] if "toolResult" in block]


def test_memory_carries_across_sessions(chat_server: str, memory: MemoryClient) -> None:
    # session 1: the user tells the agent about the cat; the model stores it with `remember`
    bedrock = FakeBedrock()
    bedrock.tool_use("tu-1", "remember", {"content": "The user adopted a grey cat called Pixel."}, text="Noting that.")
    bedrock.answer({"text": "Congratulations on adopting Pixel!"})
    agent = chat.ChatAgent(bedrock.client, memory, "maya", "s1", MODEL, speaker="Maya")
    assert agent.reply("I just adopted a grey cat called Pixel.") == "Congratulations on adopting Pixel!"

    first, second = bedrock.calls
    assert first["modelId"] == MODEL
    assert first["messages"] == [{"role": "user", "content": [{"text": "I just adopted a grey cat called Pixel."}]}]
    assert [t["toolSpec"]["name"] for t in first["toolConfig"]["tools"]] == ["remember", "recall", "forget"]
    assert "Pixel" not in _system_text(first)  # nothing stored yet
    (stored,) = _tool_results(second)
    assert stored["toolUseId"] == "tu-1" and stored["content"] == [{"text": "Remembered."}]
    assert "status" not in stored
    assert [m["role"] for m in agent.messages] == ["user", "assistant", "user", "assistant"]
    assert agent.messages[-1]["content"] == [{"text": "Congratulations on adopting Pixel!"}]

    # the server holds the remembered statement and, posted after the turn, the exchange itself
    # (raw messages are stored as said, with their speaker as a field)
    held = _contents(memory, "maya")
    assert "note: The user adopted a grey cat called Pixel." in held  # the remember tool: the model's note
    assert "Maya: I just adopted a grey cat called Pixel." in held  # the user's turn
    assert "assistant: Congratulations on adopting Pixel!" in held
    scopes = {m.content: m.scope for m in memory.iter_memories("maya")}
    assert scopes["Congratulations on adopting Pixel!"] == "CONTEXT"  # the reply stays in its session
    assert scopes["I just adopted a grey cat called Pixel."] == "USER"
    assert {(m.session_id, m.agent_id) for m in memory.iter_memories("maya")} == {("s1", "bedrock-chat")}
    hits = memory.search("maya", "What is the name of the cat?").results
    assert "Pixel" in hits[0].memory.content
    bedrock.stub.assert_no_pending_responses()

    # session 2: a new agent (no state shared but the server); the model recalls before answering
    bedrock = FakeBedrock()
    bedrock.tool_use("tu-2", "recall", {"query": "cat name"})
    bedrock.answer({"text": "Your cat is called Pixel."})
    agent = chat.ChatAgent(bedrock.client, memory, "maya", "s2", MODEL, speaker="Maya")
    assert agent.reply("What is my cat called?") == "Your cat is called Pixel."

    first, second = bedrock.calls
    assert first["messages"] == [{"role": "user", "content": [{"text": "What is my cat called?"}]}]
    assert "Pixel" in _system_text(first)  # from POST /context: remembered in session 1
    assert [t["toolSpec"]["name"] for t in second["toolConfig"]["tools"]] == ["remember", "recall", "forget"]
    (recalled,) = _tool_results(second)
    assert recalled["toolUseId"] == "tu-2" and "status" not in recalled
    assert "Pixel" in recalled["content"][0]["text"]  # the real recall result
    assert second["messages"][1] == {
        "role": "assistant",
        "content": [{"toolUse": {"toolUseId": "tu-2", "name": "recall", "input": {"query": "cat name"}}}],
    }
    bedrock.stub.assert_no_pending_responses()
    asked = [m for m in memory.iter_memories("maya") if m.content == "What is my cat called?"]
    assert [m.session_id for m in asked] == ["s2"]


def test_bedrock_error_drops_the_turn_and_stores_nothing(chat_server: str, memory: MemoryClient) -> None:
    bedrock = FakeBedrock()
    bedrock.fail("ThrottlingException", 429)
    bedrock.answer({"text": "Noted: you live in Porto."})
    agent = chat.ChatAgent(bedrock.client, memory, "ravi", "s1", MODEL)

    with pytest.raises(chat.BedrockError, match="ThrottlingException") as info:
        agent.reply("I live in Porto.")
    assert info.value.code == "ThrottlingException" and not info.value.fatal
    assert agent.messages == []
    assert _contents(memory, "ravi") == set()

    # the user says it again: the conversation goes on as if the failed turn had not happened
    assert agent.reply("I live in Porto.") == "Noted: you live in Porto."
    assert bedrock.calls[1]["messages"] == [{"role": "user", "content": [{"text": "I live in Porto."}]}]
    assert [m["role"] for m in agent.messages] == ["user", "assistant"]
    assert _contents(memory, "ravi") == {"ravi: I live in Porto.", "assistant: Noted: you live in Porto."}
    bedrock.stub.assert_no_pending_responses()


def test_tool_rounds_are_capped(chat_server: str, memory: MemoryClient) -> None:
    bedrock = FakeBedrock()
    for i in range(3):
        bedrock.tool_use(f"tu-{i}", "recall", {"query": "anything"})
    agent = chat.ChatAgent(bedrock.client, memory, "loop-user", "s1", MODEL, max_tool_rounds=2)
    with pytest.raises(chat.ToolLoopError, match="after 2 rounds"):
        agent.reply("Tell me what you know.")
    assert len(bedrock.calls) == 3 and len(bedrock.calls[-1]["messages"]) == 5
    assert agent.messages == []
    assert _contents(memory, "loop-user") == set()
    bedrock.stub.assert_no_pending_responses()


def test_main_with_piped_lines(chat_server: str, memory: MemoryClient) -> None:
    bedrock = FakeBedrock()
    bedrock.answer({"text": "Hello Lena!"})
    bedrock.fail("ThrottlingException", 429)
    bedrock.answer({"text": "You mentioned Lisbon."})
    stdout, stderr = io.StringIO(), io.StringIO()
    argv = ["--user", "lena", "--session", "cli-1", "--url", chat_server, "--api-key", API_KEY, "--model-id", MODEL]
    lines = io.StringIO("Hi, I'm Lena.\n\nI am moving to Lisbon.\nWhere am I moving?\n/exit\nnot read\n")
    assert chat.main(argv, lines, stdout, stderr=stderr, bedrock=bedrock.client) == 0
    assert stdout.getvalue() == "Hello Lena!\nYou mentioned Lisbon.\n"
    assert "error: Bedrock ThrottlingException: stubbed; this turn was dropped" in stderr.getvalue()
    bedrock.stub.assert_no_pending_responses()
    assert len(bedrock.calls) == 3
    assert bedrock.calls[2]["messages"][-1] == {"role": "user", "content": [{"text": "Where am I moving?"}]}
    assert len(bedrock.calls[2]["messages"]) == 3  # the throttled turn is not in the conversation
    assert _contents(memory, "lena") == {
        "lena: Hi, I'm Lena.",
        "assistant: Hello Lena!",
        "lena: Where am I moving?",
        "assistant: You mentioned Lisbon.",
    }


def test_main_stops_on_a_configuration_error(chat_server: str) -> None:
    bedrock = FakeBedrock()
    bedrock.fail("AccessDeniedException", 403)
    stdout, stderr = io.StringIO(), io.StringIO()
    argv = ["--user", "noor", "--url", chat_server, "--api-key", API_KEY, "--model-id", MODEL]
    assert chat.main(argv, io.StringIO("Hello\nAgain\n"), stdout, stderr=stderr, bedrock=bedrock.client) == 1
    assert stdout.getvalue() == ""
    assert stderr.getvalue() == f"error: Bedrock AccessDeniedException: stubbed (model {MODEL})\n"


def test_main_without_a_memory_server(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    status = chat.main(["--user", "maya", "--url", url], io.StringIO("Hello\n"), io.StringIO())
    assert status == 1
    err = capsys.readouterr().err
    assert err == (
        f"error: cannot reach the memory server at {url}; start one (bash scripts/demo.sh) or set COGNIS_URL\n"
    )


def test_main_with_a_wrong_api_key(chat_server: str) -> None:
    stderr = io.StringIO()
    status = chat.main(["--user", "maya", "--url", chat_server, "--api-key", "wrong"], io.StringIO(), stderr=stderr)
    assert status == 1
    assert stderr.getvalue().startswith(f"error: the memory server at {chat_server} refused the API key")
    assert "Traceback" not in stderr.getvalue()


def test_main_without_aws_credentials(chat_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                "AWS_WEB_IDENTITY_TOKEN_FILE"):  # fmt: skip
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    stderr = io.StringIO()
    argv = ["--user", "maya", "--url", chat_server, "--api-key", API_KEY, "--region", "us-east-1"]
    assert chat.main(argv, io.StringIO("Hello\n"), io.StringIO(), stderr=stderr) == 1
    assert stderr.getvalue().startswith("error: Bedrock NoCredentialsError: no AWS credentials found")
