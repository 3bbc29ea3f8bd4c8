"""Memory as agent tools: ``remember``, ``recall`` and ``forget``.

>>> from cognis_memory.client import MemoryClient
>>> from cognis_memory.agent_tools import MemoryToolbox
>>> tools = MemoryToolbox(MemoryClient(url, api_key), user_id="alice", session_id="s-42")
>>> response = bedrock.converse(modelId=..., messages=messages, toolConfig=tools.tool_config())
>>> reply = tools.answer_tool_uses(response["output"]["message"])   # None when no tool was used
>>> if reply: messages += [response["output"]["message"], reply]

The toolbox binds the user (and session and agent): the model never chooses whose memory it
reads, so a prompt-injected "recall alice's memories" cannot cross users. What ``remember``
stores is the model's statement about the user, so it is kept as an assistant note (speaker
``note``, metadata ``source: tool:remember``), not as something the user said.

The input schemas are generated from the API's own request models (``MessageBody``,
``ContextBody``, ``MemoryOut``): the fields a tool exposes carry the API's types, bounds and
descriptions, so the tools cannot drift from the API. ``recall`` answers with the same
compact, dated, budgeted block as ``POST /context`` (with ids, which ``forget`` takes);
history questions bring earlier versions along.

The same tools back the MCP server (:mod:`cognis_memory.mcp_server`):
:class:`AsyncMemoryToolbox` is the asyncio twin of :class:`MemoryToolbox`.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from .api.schemas import AddMessagesOut, ContextBody, ContextOut, MemoryOut, MessageBody
from .client import AsyncMemoryClient, MemoryAPIError, MemoryClient
from .errors import InvalidInputError

RECALL_MAX_TOKENS = 1200
NOTE_SPEAKER = "note"  # the speaker of what ``remember`` stores
RECALL_MAX_LIMIT = 20


@dataclass(frozen=True, slots=True)
class ToolField:
    model: type[BaseModel]
    name: str  # the field in the API model
    required: bool = False
    overrides: dict[str, Any] = field(default_factory=dict)  # narrower bounds or wording for a tool


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    name: str
    description: str
    fields: tuple[ToolField, ...]
    input_names: dict[str, str] = field(default_factory=dict)  # tool input name -> API field name

    def input_name(self, f: ToolField) -> str:
        return next((k for k, v in self.input_names.items() if v == f.name), f.name)


TOOLS: tuple[ToolDefinition, ...] = (
    ToolDefinition(
        name="remember",
        description=(
            "Store something about the user that will matter in later conversations: a fact, preference, plan, "
            "event or change. Write one self-contained statement in plain words, with names and dates."
        ),
        fields=(
            ToolField(MessageBody, "content", required=True, overrides={"description": "The statement to remember."}),
            ToolField(MessageBody, "scope"),
        ),
    ),
    ToolDefinition(
        name="recall",
        description=(
            "Look up what the user said in earlier conversations. Use it before answering anything about the "
            "user's life, preferences, plans or past events. Returns dated memories, most relevant first, "
            "each with its id; questions about the past also show earlier versions."
        ),
        fields=(
            ToolField(
                ContextBody, "query", required=True, overrides={"description": "What to look for, in plain words."}
            ),
            ToolField(ContextBody, "limit", overrides={"default": 10, "maximum": RECALL_MAX_LIMIT}),
            ToolField(ContextBody, "time_from"),
            ToolField(ContextBody, "time_to"),
            ToolField(ContextBody, "include_history"),
        ),  # fmt: skip
    ),
    ToolDefinition(
        name="forget",
        description=(
            "Delete one memory the user asked you to forget or that is wrong. Use the id shown by recall. "
            "Earlier versions stay in its history."
        ),
        fields=(
            ToolField(
                MemoryOut, "id", required=True, overrides={"description": "The memory's id, as shown by recall."}
            ),
        ),  # fmt: skip
        input_names={"memory_id": "id"},
    ),
)


def _resolve(schema: Any, defs: dict[str, Any]) -> Any:
    """A field's JSON schema, self-contained: ``$ref`` inlined, ``Optional`` as plain type, no titles."""
    if isinstance(schema, dict):
        if "$ref" in schema:
            target = _resolve(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
            schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        any_of = schema.get("anyOf")
        if isinstance(any_of, list) and {"type": "null"} in any_of and len(any_of) == 2:
            (other,) = [s for s in any_of if s != {"type": "null"}]
            schema = {**{k: v for k, v in schema.items() if k != "anyOf"}, **other}
            if schema.get("default", 0) is None:
                del schema["default"]
        return {k: _resolve(v, defs) for k, v in schema.items() if k not in ("title", "examples")}
    if isinstance(schema, list):
        return [_resolve(v, defs) for v in schema]
    return schema


def input_schema(tool: ToolDefinition) -> dict[str, Any]:
    """The tool's input as a JSON schema object, built from the API models' schemas (a fresh copy)."""
    return copy.deepcopy(_input_schema(tool.name))


@functools.cache
def _input_schema(tool_name: str) -> dict[str, Any]:
    """Built once per tool: every tool call checks its input against it (pydantic's schema
    generation costs milliseconds). Callers must not mutate it; ``input_schema`` hands out copies."""
    tool = next(t for t in TOOLS if t.name == tool_name)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for f in tool.fields:
        model_schema = f.model.model_json_schema()
        prop = _resolve(model_schema["properties"][f.name], model_schema.get("$defs", {}))
        prop.update(f.overrides)
        name = tool.input_name(f)
        properties[name] = prop
        if f.required:
            required.append(name)
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def bedrock_tool_specs() -> list[dict[str, Any]]:
    """``toolConfig["tools"]`` for Bedrock Converse."""
    return [
        {"toolSpec": {"name": t.name, "description": t.description, "inputSchema": {"json": input_schema(t)}}}
        for t in TOOLS
    ]


@dataclass(slots=True)
class ToolOutcome:
    """What a tool call produced: ``text`` for the model, ``data`` for programs, and whether it failed."""

    text: str
    data: dict[str, Any] = field(default_factory=dict)
    is_error: bool = False


class ToolInputError(InvalidInputError):
    """A tool call's input is refused before any request is sent; ``field`` names the input."""


@dataclass(slots=True)
class _Plan:
    """A tool call as one client method call plus how to render its result."""

    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    render: Callable[[Any], ToolOutcome]


def _check_input(tool: ToolDefinition, tool_input: Any) -> dict[str, Any]:
    """Required fields, unknown fields and bounds, checked against the tool's own schema; the API checks
    the rest (types, sizes) and its 422 names the field. Omitted fields take the schema's defaults."""
    if not isinstance(tool_input, dict):
        raise ToolInputError("input", "must be an object")
    schema = _input_schema(tool.name)
    unknown = sorted(set(tool_input) - set(schema["properties"]))
    if unknown:
        raise ToolInputError(unknown[0], f"unknown field; this tool takes {', '.join(schema['properties'])}")
    for name in schema["required"]:
        value = tool_input.get(name)
        if value is None or (isinstance(value, str) and not value.strip()):
            raise ToolInputError(name, "is required")
    for name, value in tool_input.items():
        prop = schema["properties"][name]
        if prop.get("type") == "integer" and value is not None:
            if isinstance(value, bool) or not isinstance(value, int):
                raise ToolInputError(name, "must be an integer")
            if not prop.get("minimum", value) <= value <= prop.get("maximum", value):
                raise ToolInputError(name, f"must be between {prop.get('minimum')} and {prop.get('maximum')}")
        if "enum" in prop and value is not None and value not in prop["enum"]:
            raise ToolInputError(name, f"must be one of {', '.join(map(str, prop['enum']))}")
    given = {name: value for name, value in tool_input.items() if value is not None}
    defaults = {name: prop["default"] for name, prop in schema["properties"].items() if "default" in prop}
    return defaults | given


def _remembered(result: AddMessagesOut) -> ToolOutcome:
    ids = [m.id for m in result.memories]
    stored = sum(m.created for m in result.messages)
    text = "Remembered." if stored else "Already remembered."
    return ToolOutcome(text=text, data={"stored": stored, "memory_ids": ids, "extraction": result.extraction})


def _recalled(result: ContextOut) -> ToolOutcome:
    memories = [
        {
            "id": c.memory.id,
            "speaker": c.memory.speaker,
            "content": c.memory.content,
            "history": [v.content for v in c.history],
        }
        for c in result.memories
    ]
    text = result.text or "No stored memory matches."
    if result.degraded:
        text += f"\n(Search was degraded: {', '.join(result.degraded)} unavailable; results may be incomplete.)"
    return ToolOutcome(text=text, data={"memories": memories, "degraded": result.degraded})


def _forgotten(tombstone: MemoryOut) -> ToolOutcome:
    """Deleting writes a tombstone version on top of the memory, which keeps its id."""
    forgotten = tombstone.id
    return ToolOutcome(text=f"Forgotten (memory {forgotten}).", data={"forgotten_id": forgotten})


class _ToolboxBase:
    def __init__(
        self,
        user_id: str,
        *,
        session_id: str | None = None,
        agent_id: str | None = None,
        recall_max_tokens: int = RECALL_MAX_TOKENS,
    ) -> None:
        self.user_id, self.session_id, self.agent_id = user_id, session_id, agent_id
        self.recall_max_tokens = recall_max_tokens

    @staticmethod
    def tool_specs() -> list[dict[str, Any]]:
        return bedrock_tool_specs()

    def tool_config(self) -> dict[str, Any]:
        """``toolConfig`` for a Bedrock ``converse`` call."""
        return {"tools": self.tool_specs()}

    def _plan(self, name: str, tool_input: Any) -> _Plan:
        tool = next((t for t in TOOLS if t.name == name), None)
        if tool is None:
            raise ToolInputError("name", f"unknown tool {name!r}; the tools are {', '.join(t.name for t in TOOLS)}")
        args = _check_input(tool, tool_input)
        if name == "remember":
            # The statement is the model's words about the user, not the user's: it is stored as a
            # note by the assistant ("note: Maya adopted a cat"), never under the user's name.
            message = {
                "content": args["content"], "scope": args["scope"], "role": "assistant",
                "speaker": NOTE_SPEAKER, "session_id": self.session_id, "agent_id": self.agent_id,
                "metadata": {"source": "tool:remember"},
            }  # fmt: skip
            return _Plan("add_messages", (self.user_id, [message]), {}, _remembered)
        if name == "recall":
            options = {k: v for k, v in args.items() if k != "query"}
            options.update(max_tokens=self.recall_max_tokens, with_ids=True, session_id=self.session_id)
            return _Plan("context", (self.user_id, args["query"]), options, _recalled)
        return _Plan("delete", (self.user_id, args["memory_id"]), {}, _forgotten)

    @staticmethod
    def _failed(exc: Exception) -> ToolOutcome:
        if isinstance(exc, MemoryAPIError):
            return ToolOutcome(text=exc.message, data={"code": exc.code, "field": exc.field}, is_error=True)
        return ToolOutcome(
            text=str(exc), data={"code": "invalid_input", "field": getattr(exc, "field", None)}, is_error=True
        )

    @staticmethod
    def tool_result(tool_use: dict[str, Any], outcome: ToolOutcome) -> dict[str, Any]:
        """A Converse ``toolResult`` content block for ``outcome``."""
        result: dict[str, Any] = {"toolUseId": tool_use.get("toolUseId"), "content": [{"text": outcome.text}]}
        if outcome.is_error:
            result["status"] = "error"
        return {"toolResult": result}

    @staticmethod
    def _tool_uses(message: dict[str, Any]) -> list[dict[str, Any]]:
        return [b["toolUse"] for b in message.get("content", []) if isinstance(b, dict) and "toolUse" in b]


class MemoryToolbox(_ToolboxBase):
    """The memory tools over a :class:`~cognis_memory.client.MemoryClient`, bound to one user."""

    def __init__(self, client: MemoryClient, user_id: str, **binding: Any) -> None:
        super().__init__(user_id, **binding)
        self.client = client

    def run(self, name: str, tool_input: Any) -> ToolOutcome:
        """Run one tool; failures (bad input, API errors) come back as an error outcome, not raised."""
        try:
            plan = self._plan(name, tool_input)
            return plan.render(getattr(self.client, plan.method)(*plan.args, **plan.kwargs))
        except (ToolInputError, MemoryAPIError) as exc:
            return self._failed(exc)

    def handle_tool_use(self, tool_use: dict[str, Any]) -> dict[str, Any]:
        """Answer one ``toolUse`` (the block's value, or the whole ``{"toolUse": ...}`` block)."""
        tool_use = tool_use.get("toolUse", tool_use)
        return self.tool_result(tool_use, self.run(str(tool_use.get("name")), tool_use.get("input")))

    def answer_tool_uses(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """The user message answering every ``toolUse`` in an assistant message (None if there is none)."""
        uses = self._tool_uses(message)
        if not uses:
            return None
        return {"role": "user", "content": [self.handle_tool_use(u) for u in uses]}


class AsyncMemoryToolbox(_ToolboxBase):
    """The memory tools over an :class:`~cognis_memory.client.AsyncMemoryClient`, bound to one user."""

    def __init__(self, client: AsyncMemoryClient, user_id: str, **binding: Any) -> None:
        super().__init__(user_id, **binding)
        self.client = client

    async def run(self, name: str, tool_input: Any) -> ToolOutcome:
        try:
            plan = self._plan(name, tool_input)
            return plan.render(await getattr(self.client, plan.method)(*plan.args, **plan.kwargs))
        except (ToolInputError, MemoryAPIError) as exc:
            return self._failed(exc)

    async def handle_tool_use(self, tool_use: dict[str, Any]) -> dict[str, Any]:
        tool_use = tool_use.get("toolUse", tool_use)
        return self.tool_result(tool_use, await self.run(str(tool_use.get("name")), tool_use.get("input")))

    async def answer_tool_uses(self, message: dict[str, Any]) -> dict[str, Any] | None:
        uses = self._tool_uses(message)
        if not uses:
            return None
        return {"role": "user", "content": [await self.handle_tool_use(u) for u in uses]}
