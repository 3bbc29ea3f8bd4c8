"""A minimal Amazon Bedrock chat loop that remembers the user across sessions, through cognis-memory.

Each turn the agent

1. asks the memory server for what it knows that is relevant to the user's message
   (``POST /context``) and puts that block into the system prompt;
2. calls Bedrock ``converse`` with the memory tools (``remember``, ``recall``, ``forget`` from
   :class:`cognis_memory.agent_tools.MemoryToolbox`), answering tool calls against the server
   until the model gives its answer (at most ``max_tool_rounds`` rounds of tools);
3. posts the exchange (the user's message and the answer) to the server, so what the user said
   is remembered even when the model did not call ``remember``.

Each run is a new session (``--session``, default a fresh id); memory carries across runs.

Run it against a local server. ``bash scripts/demo.sh`` serves the embedded store on
http://127.0.0.1:8080 with the API key ``demo-key`` (tenant ``default``; COGNIS_PORT, COGNIS_API_KEYS
change them). Then, from another terminal::

    .venv/bin/python examples/bedrock_chat.py --user maya
    you> I just adopted a grey cat called Pixel.
    ...                                   (Ctrl-D or /exit ends the session)
    .venv/bin/python examples/bedrock_chat.py --user maya
    you> What is my cat called?

or pipe lines in: ``echo "What is my cat called?" | .venv/bin/python examples/bedrock_chat.py --user maya``.

Configuration (flags win over the environment):

* ``COGNIS_URL`` (default http://127.0.0.1:8080), ``COGNIS_API_KEY`` (default demo-key);
* ``--model-id`` / ``BEDROCK_MODEL_ID``: a Claude model or inference profile id; the default,
  ``us.anthropic.claude-haiku-4-5-20251001-v1:0``, is the US cross-region profile of Claude
  Haiku 4.5, a choice of configuration, not a requirement: use any Converse model with tool use
  that your account has access to (outside the US, an ``eu.``/``apac.``/``global.`` profile);
* ``--region`` / ``AWS_REGION`` (default: the AWS configuration's region, else us-east-1).

AWS access: the usual credential chain of boto3 (environment, ``AWS_PROFILE``, SSO, instance
role). The identity needs ``bedrock:InvokeModel`` on the model (Converse is authorised by it),
which, for an inference profile, means on the profile and on the foundation model in each
region the profile routes to; and the model must be enabled in the account's Bedrock model access.

Errors: an unreachable memory server, a refused API key, missing AWS credentials and Bedrock
configuration errors (access denied, unknown model, ...) end the program with exit status 1 and
a one-line message. A transient Bedrock error (throttling, timeouts) fails only that turn: the
message is printed, the turn is dropped from the conversation and nothing of it is stored, so the
user can simply say it again. Memory failures during a session are printed as warnings: the agent
answers without memory rather than not at all.
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from cognis_memory.agent_tools import MemoryToolbox
from cognis_memory.client import AuthenticationError, MemoryAPIError, MemoryClient, PermissionDenied

DEFAULT_URL = "http://127.0.0.1:8080"
DEFAULT_API_KEY = "demo-key"
DEFAULT_MODEL_ID = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
DEFAULT_REGION = "us-east-1"

INSTRUCTIONS = (
    "You are a helpful assistant with a long-term memory of this user that lasts across conversations. "
    "When the user tells you something that will matter later (a fact, preference, plan, event or change), "
    "store it with the remember tool. Before answering a question about the user's life, preferences, plans "
    "or past, look at what you remember below and, if it is not there, use the recall tool. When the user asks "
    "you to forget something, find it with recall and delete it with forget. Today is {today}."
)

# Bedrock error codes that a retry will not fix: the program stops on them.
CONFIGURATION_ERRORS = frozenset(
    {
        "AccessDeniedException",
        "UnrecognizedClientException",
        "ExpiredTokenException",
        "InvalidSignatureException",
        "ValidationException",
        "ResourceNotFoundException",
        "ServiceQuotaExceededException",
    }
)


class BedrockError(RuntimeError):
    """A ``converse`` call failed. ``code`` is the Bedrock error code (or the botocore error's class
    name); ``fatal`` is True for configuration problems that a retry will not fix."""

    def __init__(self, code: str, message: str, *, fatal: bool) -> None:
        super().__init__(f"Bedrock {code}: {message}")
        self.code, self.fatal = code, fatal


class ToolLoopError(RuntimeError):
    """The model was still calling tools after ``max_tool_rounds`` rounds."""


def _now() -> datetime:
    return datetime.now(UTC)


def _text_of(message: dict[str, Any]) -> str:
    return "\n".join(b["text"] for b in message.get("content", []) if isinstance(b, dict) and "text" in b).strip()


class ChatAgent:
    """One chat session of one user: Bedrock for the answers, a cognis-memory server for the memory.

    ``bedrock`` is a boto3 ``bedrock-runtime`` client, ``memory`` a :class:`MemoryClient`. The
    session's conversation, in Converse message format, is ``self.messages``; a failed turn leaves
    it unchanged.
    """

    def __init__(
        self,
        bedrock: Any,
        memory: MemoryClient,
        user_id: str,
        session_id: str,
        model_id: str,
        *,
        speaker: str | None = None,
        agent_id: str = "bedrock-chat",
        context_tokens: int = 800,
        max_answer_tokens: int = 1024,
        max_tool_rounds: int = 5,
        warn: Callable[[str], None] | None = None,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.bedrock, self.memory = bedrock, memory
        self.user_id, self.session_id, self.model_id = user_id, session_id, model_id
        self.speaker = speaker or user_id
        self.agent_id = agent_id
        self.context_tokens = context_tokens  # budget of the memory block in the system prompt
        self.max_answer_tokens = max_answer_tokens
        self.max_tool_rounds = max_tool_rounds
        self.warn = warn or (lambda text: print(f"warning: {text}", file=sys.stderr))
        self.clock = clock
        self.toolbox = MemoryToolbox(memory, user_id, session_id=session_id, agent_id=agent_id)
        self.messages: list[dict[str, Any]] = []

    def system_prompt(self, user_text: str) -> list[dict[str, Any]]:
        """The instructions, then what the server remembers that is relevant to ``user_text``."""
        system = [{"text": INSTRUCTIONS.format(today=self.clock().date().isoformat())}]
        try:
            context = self.memory.context(
                self.user_id, user_text, session_id=self.session_id, max_tokens=self.context_tokens
            )
        except MemoryAPIError as exc:
            self.warn(f"memory unavailable, answering without it ({exc})")
            return system
        if context.text:
            system.append({"text": context.text})
        return system

    def _converse(self, system: list[dict[str, Any]], messages: list[dict[str, Any]]) -> dict[str, Any]:
        try:
            return self.bedrock.converse(
                modelId=self.model_id,
                messages=messages,
                system=system,
                toolConfig=self.toolbox.tool_config(),
                inferenceConfig={"maxTokens": self.max_answer_tokens},
            )
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = str(error.get("Code") or "ClientError")
            raise BedrockError(code, str(error.get("Message") or exc), fatal=code in CONFIGURATION_ERRORS) from exc
        except NoCredentialsError as exc:
            raise BedrockError("NoCredentialsError", str(exc), fatal=True) from exc
        except BotoCoreError as exc:  # connection errors, timeouts
            raise BedrockError(type(exc).__name__, str(exc), fatal=False) from exc

    def reply(self, user_text: str) -> str:
        """Answer one user message. Raises :class:`BedrockError` or :class:`ToolLoopError`; then the
        turn is dropped (``self.messages`` unchanged) and nothing of it is posted to memory (memories
        that a ``remember`` call of the failed turn stored stay)."""
        asked_at = self.clock()
        system = self.system_prompt(user_text)
        turn: list[dict[str, Any]] = [{"role": "user", "content": [{"text": user_text}]}]
        for round_ in range(self.max_tool_rounds + 1):
            response = self._converse(system, self.messages + turn)
            message = response["output"]["message"]
            turn.append(message)
            if response.get("stopReason") != "tool_use":
                break
            if round_ == self.max_tool_rounds:
                raise ToolLoopError(f"the model was still calling tools after {self.max_tool_rounds} rounds")
            results = self.toolbox.answer_tool_uses(message)
            if results is None:  # "tool_use" without a toolUse block: take what it said as the answer
                break
            turn.append(results)
        answer = _text_of(turn[-1])
        self.messages.extend(turn)
        self._store(user_text, asked_at, answer, self.clock())
        return answer

    def _store(self, user_text: str, asked_at: datetime, answer: str, answered_at: datetime) -> None:
        """Post the exchange. It is stored (and searchable) before the server answers; a server with an
        extraction LLM also distils memories from it in a background job."""
        common = {"session_id": self.session_id, "agent_id": self.agent_id}
        messages = [{"content": user_text, "role": "user", "speaker": self.speaker, "timestamp": asked_at, **common}]
        if answer:  # the reply matters within this session only: CONTEXT scope keeps it out of later ones
            messages.append({
                "content": answer, "role": "assistant", "speaker": "assistant", "timestamp": answered_at,
                "scope": "CONTEXT", **common,
            })  # fmt: skip
        try:
            self.memory.add_messages(self.user_id, messages, mode="async")
        except MemoryAPIError as exc:
            self.warn(f"this exchange was not stored in memory ({exc})")


# -- command line ----------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Chat with a Bedrock model that remembers you (cognis-memory).")
    p.add_argument("--user", required=True, help="the user id whose memory is used")
    p.add_argument("--name", help="the user's name as a speaker in stored messages (default: the user id)")
    p.add_argument("--session", help="session id (default: a fresh one per run)")
    p.add_argument("--model-id", default=os.environ.get("BEDROCK_MODEL_ID", DEFAULT_MODEL_ID))
    p.add_argument("--region", default=os.environ.get("AWS_REGION"))
    p.add_argument("--url", default=os.environ.get("COGNIS_URL", DEFAULT_URL), help="memory server (COGNIS_URL)")
    p.add_argument("--api-key", default=os.environ.get("COGNIS_API_KEY", DEFAULT_API_KEY), help="(COGNIS_API_KEY)")
    return p.parse_args(argv)


def _bedrock_client(region: str | None) -> Any:
    """A bedrock-runtime client; ``BedrockError`` (fatal) when no credentials are configured."""
    session = boto3.Session(region_name=region)
    if session.get_credentials() is None:
        raise BedrockError(
            "NoCredentialsError",
            "no AWS credentials found: set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or run "
            "`aws sso login`",
            fatal=True,
        )
    config = Config(read_timeout=120, connect_timeout=10, retries={"mode": "standard", "max_attempts": 3})
    return session.client("bedrock-runtime", region_name=session.region_name or DEFAULT_REGION, config=config)


def _check_memory(memory: MemoryClient, url: str, user_id: str) -> str | None:
    """None when the server answers and takes the key; else what is wrong."""
    try:
        memory.list_memories(user_id, limit=1)
    except (AuthenticationError, PermissionDenied) as exc:
        return f"the memory server at {url} refused the API key ({exc.message}); set COGNIS_API_KEY"
    except MemoryAPIError as exc:
        if exc.status == 0:
            return f"cannot reach the memory server at {url}; start one (bash scripts/demo.sh) or set COGNIS_URL"
        return f"the memory server at {url} answered {exc}"
    return None


def main(
    argv: Sequence[str] | None = None,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    *,
    stderr: TextIO | None = None,
    bedrock: Any = None,
) -> int:
    """Run the chat loop; ``bedrock`` (a bedrock-runtime client) is built from the AWS configuration
    when not given. Returns the exit status."""
    stdin, stdout, stderr = stdin or sys.stdin, stdout or sys.stdout, stderr or sys.stderr
    args = parse_args(argv)
    session_id = args.session or f"chat-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"

    def fail(text: str) -> int:
        print(f"error: {text}", file=stderr)
        return 1

    with MemoryClient(args.url, api_key=args.api_key) as memory:
        problem = _check_memory(memory, args.url, args.user)
        if problem:
            return fail(problem)
        if bedrock is None:
            try:
                bedrock = _bedrock_client(args.region)
            except BedrockError as exc:
                return fail(str(exc))
        agent = ChatAgent(
            bedrock,
            memory,
            args.user,
            session_id,
            args.model_id,
            speaker=args.name,
            warn=lambda text: print(f"warning: {text}", file=stderr),
        )
        interactive = stdin.isatty()
        if interactive:
            print(f"session {session_id}, user {args.user}, model {args.model_id}; /exit ends it", file=stdout)
        try:
            return _loop(agent, stdin, stdout, stderr, interactive, fail)
        except KeyboardInterrupt:  # Ctrl-C ends the session like Ctrl-D
            print(file=stdout)
            return 0


def _loop(
    agent: ChatAgent, stdin: TextIO, stdout: TextIO, stderr: TextIO, interactive: bool, fail: Callable[[str], int]
) -> int:
    while True:
        if interactive:
            print("you> ", end="", file=stdout, flush=True)
        line = stdin.readline()
        if not line:
            return 0
        text = line.strip()
        if text in ("/exit", "/quit"):
            return 0
        if not text:
            continue
        try:
            answer = agent.reply(text)
        except BedrockError as exc:
            if exc.fatal:
                return fail(f"{exc} (model {agent.model_id})")
            print(f"error: {exc}; this turn was dropped, say it again", file=stderr)
            continue
        except ToolLoopError as exc:
            print(f"error: {exc}; this turn was dropped", file=stderr)
            continue
        print(answer or "(no answer)", file=stdout, flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
