"""remember / recall / forget as Bedrock Converse tools, executed against the real app over HTTP.

The tool specifications are checked against Bedrock's own request model (botocore's service
definition for ``Converse``) and against the API's published OpenAPI schema.
"""

from __future__ import annotations

import asyncio
import re

import boto3
import jsonschema
import pytest
from botocore.validate import ParamValidator

from cognis_memory.agent_tools import TOOLS, AsyncMemoryToolbox, MemoryToolbox, bedrock_tool_specs, input_schema
from cognis_memory.api.app import create_app
from cognis_memory.client import AsyncMemoryClient, MemoryClient, NotFound, RetryPolicy

ID = re.compile(r"\(id ([^)]+)\)")


def _use(name: str, tool_input: object, n: int = 1) -> dict:
    return {"toolUse": {"toolUseId": f"tu-{n}", "name": name, "input": tool_input}}


def _text(block: dict) -> str:
    return block["toolResult"]["content"][0]["text"]


def _converse_request(tool_config: dict, messages: list[dict]) -> dict:
    return {"modelId": "anthropic.claude-test", "messages": messages, "toolConfig": tool_config}


def test_tool_specs_are_accepted_by_the_bedrock_converse_request_model() -> None:
    bedrock = boto3.client("bedrock-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    shape = bedrock.meta.service_model.operation_model("Converse").input_shape
    request = _converse_request({"tools": bedrock_tool_specs()}, [{"role": "user", "content": [{"text": "hi"}]}])
    report = ParamValidator().validate(request, shape)
    assert not report.has_errors(), report.generate_report()
    assert [t["toolSpec"]["name"] for t in bedrock_tool_specs()] == ["remember", "recall", "forget"]
    for spec in bedrock_tool_specs():
        jsonschema.Draft202012Validator.check_schema(spec["toolSpec"]["inputSchema"]["json"])


async def test_tool_inputs_match_the_published_openapi(make_service) -> None:
    doc = create_app(await make_service(start=False), manage_lifecycle=False).openapi()
    components = doc["components"]["schemas"]
    api_model = {"MessageBody": "MessageBody", "ContextBody": "ContextBody", "MemoryOut": "MemoryOut"}
    for tool in TOOLS:
        schema = input_schema(tool)
        for f in tool.fields:
            published = components[api_model[f.model.__name__]]["properties"][f.name]
            if "$ref" in published:
                published = components[published["$ref"].rsplit("/", 1)[-1]]
            if "anyOf" in published:
                (published,) = [s for s in published["anyOf"] if s != {"type": "null"}]
            mine = schema["properties"][tool.input_name(f)]
            for key in ("type", "format", "enum", "minimum"):
                assert mine.get(key) == published.get(key), (tool.name, f.name, key)
            if "maximum" in published:
                assert mine["maximum"] <= published["maximum"]
            assert mine.get("description"), (tool.name, f.name)


async def test_remember_recall_forget_round_trip(live_server) -> None:
    def run() -> None:
        with MemoryClient(live_server.url, "agent-key") as mem:
            tools = MemoryToolbox(mem, "maya", session_id="s1")
            saved = tools.handle_tool_use(_use("remember", {"content": "Maya adopted a grey cat called Pixel."}))
            assert saved["toolResult"]["toolUseId"] == "tu-1" and "status" not in saved["toolResult"]
            assert _text(saved) == "Remembered."
            recalled = tools.handle_tool_use(_use("recall", {"query": "What is the name of Maya's cat?"}, 2))
            text = _text(recalled)
            assert "Pixel" in text and re.search(r"\[\d{4}-\d{2}-\d{2}\]", text)
            (memory_id,) = ID.findall(text)[:1]
            note = mem.get("maya", memory_id)
            # the model's statement is kept as its note, not as something Maya said
            assert note.content == "Maya adopted a grey cat called Pixel." and note.speaker == "note"
            assert note.metadata == {"source": "tool:remember", "role": "assistant"} and note.session_id == "s1"
            gone = tools.handle_tool_use(_use("forget", {"memory_id": memory_id}, 3))
            assert "status" not in gone["toolResult"] and memory_id in _text(gone)
            assert "Pixel" not in _text(tools.handle_tool_use(_use("recall", {"query": "Maya's cat"}, 4)))
            with pytest.raises(NotFound):  # the memory is deleted: it keeps its id ...
                mem.get("maya", memory_id)
            assert mem.history("maya", memory_id)[-1].deleted  # ... and its history, under a tombstone
            again = tools.handle_tool_use(_use("forget", {"memory_id": memory_id}, 5))  # forgetting twice is fine
            assert "status" not in again["toolResult"] and memory_id in _text(again)

    await asyncio.to_thread(run)


async def test_history_questions_show_earlier_versions(live_server) -> None:
    def run() -> None:
        with MemoryClient(live_server.url, "agent-key") as mem:
            mid = mem.add("noor", "Noor lives in Lisbon", timestamp="2024-01-10T09:00:00Z").memories[0].id
            mem.update("noor", mid, content="Noor lives in Porto", event_time="2025-05-02T09:00:00Z")
            tools = MemoryToolbox(mem, "noor")
            text = _text(tools.handle_tool_use(_use("recall", {"query": "Where did Noor live before?"})))
            lines = text.splitlines()
            porto = next(i for i, line in enumerate(lines) if "Noor lives in Porto" in line)
            assert lines[porto].startswith("- [2025-05-02]")
            assert lines[porto + 1].startswith("  earlier [2024-01-10]:") and "Lisbon" in lines[porto + 1]

    await asyncio.to_thread(run)


@pytest.mark.parametrize(
    ("name", "tool_input", "expected"),
    [
        ("recall", {}, "query: is required"),
        ("recall", {"query": "cats", "colour": "red"}, "colour: unknown field"),
        ("recall", {"query": "cats", "limit": 500}, "limit: must be between 1 and 20"),
        ("recall", {"query": "cats", "limit": "many"}, "limit: must be an integer"),
        ("recall", {"query": "cats", "time_from": "last tuesday"}, "time_from"),
        ("remember", {"content": "   "}, "content: is required"),
        ("remember", {"content": "x", "scope": "GLOBAL"}, "scope: must be one of USER, CONTEXT"),
        ("forget", {"memory_id": "no-such-id"}, "not found"),
        ("forget", "not an object", "input: must be an object"),
        ("delete_everything", {}, "unknown tool 'delete_everything'"),
    ],
)
async def test_bad_tool_input_is_an_error_result_naming_the_field(live_server, name, tool_input, expected) -> None:
    def run() -> dict:
        with MemoryClient(live_server.url, "agent-key") as mem:
            return MemoryToolbox(mem, "maya").handle_tool_use(_use(name, tool_input))

    result = await asyncio.to_thread(run)
    assert result["toolResult"]["status"] == "error" and result["toolResult"]["toolUseId"] == "tu-1"
    assert expected in _text(result)


async def test_read_only_key_cannot_remember_but_can_recall(live_server) -> None:
    def run() -> tuple[dict, dict]:
        with MemoryClient(live_server.url, "agent-read", retry=RetryPolicy(max_attempts=1)) as ro:
            tools = MemoryToolbox(ro, "maya")
            return tools.handle_tool_use(_use("remember", {"content": "x"})), tools.handle_tool_use(
                _use("recall", {"query": "x"})
            )

    denied, allowed = await asyncio.to_thread(run)
    assert denied["toolResult"]["status"] == "error" and "read-only" in _text(denied)
    assert "status" not in allowed["toolResult"] and _text(allowed) == "No stored memory matches."


async def test_tools_are_bound_to_one_user(live_server) -> None:
    """The model cannot name a user: the toolbox's user is the only one it reads and writes."""

    def run() -> str:
        with MemoryClient(live_server.url, "agent-key") as mem:
            MemoryToolbox(mem, "alice").run("remember", {"content": "Alice's locker code is 4417."})
            bob = MemoryToolbox(mem, "bob")
            assert bob.run("recall", {"query": "alice locker code", "user_id": "alice"}).is_error
            return bob.run("recall", {"query": "Alice's locker code"}).text

    assert "4417" not in await asyncio.to_thread(run)


async def test_answer_tool_uses_answers_every_block_of_a_converse_message(live_server) -> None:
    """The reply to an assistant message with two tool uses is one user message with both results,
    in order, and it is accepted by Bedrock's request model as the next turn."""

    def run() -> tuple[dict, dict | None, dict | None]:
        with MemoryClient(live_server.url, "agent-key") as mem:
            tools = MemoryToolbox(mem, "lena")
            assistant = {
                "role": "assistant",
                "content": [
                    {"text": "Let me note that and check."},
                    _use("remember", {"content": "Lena is allergic to peanuts."}, 1),
                    _use("recall", {"query": "Lena allergies"}, 2),
                ],
            }
            none = tools.answer_tool_uses({"role": "assistant", "content": [{"text": "no tools"}]})
            return assistant, tools.answer_tool_uses(assistant), none

    assistant, reply, nothing = await asyncio.to_thread(run)
    assert nothing is None
    assert reply["role"] == "user" and [b["toolResult"]["toolUseId"] for b in reply["content"]] == ["tu-1", "tu-2"]
    assert "peanuts" in _text(reply["content"][1])
    bedrock = boto3.client("bedrock-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    shape = bedrock.meta.service_model.operation_model("Converse").input_shape
    messages = [{"role": "user", "content": [{"text": "I'm allergic to peanuts"}]}, assistant, reply]
    report = ParamValidator().validate(_converse_request({"tools": bedrock_tool_specs()}, messages), shape)
    assert not report.has_errors(), report.generate_report()


async def test_async_toolbox_does_the_same(live_server) -> None:
    async with AsyncMemoryClient(live_server.url, "agent-key") as mem:
        tools = AsyncMemoryToolbox(mem, "ravi", session_id="s9")
        assert (await tools.run("remember", {"content": "Ravi's daughter starts school in September."})).text
        outcome = await tools.run("recall", {"query": "When does Ravi's daughter start school?"})
        assert not outcome.is_error and "September" in outcome.text
        assert outcome.data["memories"][0]["id"] in outcome.text
        top = outcome.data["memories"][0]  # stored as given, by the remember tool's speaker
        assert (top["speaker"], top["content"]) == ("note", "Ravi's daughter starts school in September.")
        reply = await tools.answer_tool_uses({"role": "assistant", "content": [_use("forget", {"memory_id": "nope"})]})
        assert reply["content"][0]["toolResult"]["status"] == "error"


def test_input_errors_name_the_field_in_the_data_too() -> None:
    """Checked before any request: the client points nowhere."""
    tools = MemoryToolbox(MemoryClient("http://127.0.0.1:9", "k", retry=RetryPolicy(max_attempts=1)), "maya")
    outcome = tools.run("recall", {"query": "cats", "colour": "red"})
    assert outcome.is_error and outcome.data == {"code": "invalid_input", "field": "colour"}
