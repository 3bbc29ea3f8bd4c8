"""A small Python client for the HTTP API, and Bedrock Converse tool definitions.

>>> from cognis_memory.client import MemoryClient
>>> mem = MemoryClient("http://127.0.0.1:8080", api_key="demo-key")
>>> mem.add("alice", "I moved to Lisbon last month", speaker="Alice")
>>> [h["memory"]["content"] for h in mem.search("alice", "Where does Alice live?")["results"]]

For a Bedrock-backed agent, :data:`BEDROCK_TOOLS` goes into ``toolConfig={"tools": ...}`` of a
``converse`` call, and :meth:`MemoryClient.handle_tool_use` answers the model's ``toolUse``
blocks with ``toolResult`` blocks for the next turn.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx


def _seg(value: str) -> str:
    """One URL path segment, percent-encoded. Ids are not trusted to be URL-safe: unquoted, a memory id
    ``..`` turned ``DELETE /v1/users/alice/memories/..`` into ``DELETE /v1/users/alice`` (forget the
    user), and a user id ``../users/bob`` addressed bob. ``.``/``..`` are encoded too: clients resolve them."""
    return "%2E" * len(value) if value in (".", "..") else quote(str(value), safe="")


class MemoryAPIError(RuntimeError):
    def __init__(self, status: int, error: dict[str, Any]) -> None:
        super().__init__(f"{status} {error.get('code')}: {error.get('message')}")
        self.status, self.error = status, error


class MemoryClient:
    """Synchronous client; every method maps to one HTTP call."""

    def __init__(self, base_url: str, api_key: str, *, timeout_s: float = 10.0, client: httpx.Client | None = None):
        self._http = client or httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout_s)
        self._headers = {"Authorization": f"Bearer {api_key}"}

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        r = self._http.request(method, path, headers=self._headers, **kwargs)
        if r.status_code >= 400:
            try:
                error = r.json().get("error", {})
            except ValueError:
                error = {"code": "http_error", "message": r.text[:200]}
            raise MemoryAPIError(r.status_code, error)
        return r.json()

    def add_messages(self, user_id: str, messages: list[dict[str, Any]], *, mode: str = "sync") -> dict[str, Any]:
        return self._call("POST", f"/v1/users/{_seg(user_id)}/messages", json={"messages": messages, "mode": mode})

    def add(self, user_id: str, content: str, **fields: Any) -> dict[str, Any]:
        return self.add_messages(user_id, [{"content": content, **fields}])

    def search(self, user_id: str, query: str, **options: Any) -> dict[str, Any]:
        return self._call("POST", f"/v1/users/{_seg(user_id)}/search", json={"query": query, **options})

    def get(self, user_id: str, memory_id: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/users/{_seg(user_id)}/memories/{_seg(memory_id)}")

    def history(self, user_id: str, memory_id: str) -> list[dict[str, Any]]:
        return self._call("GET", f"/v1/users/{_seg(user_id)}/memories/{_seg(memory_id)}/history")["versions"]

    def update(self, user_id: str, memory_id: str, **changes: Any) -> dict[str, Any]:
        return self._call("PATCH", f"/v1/users/{_seg(user_id)}/memories/{_seg(memory_id)}", json=changes)

    def delete(self, user_id: str, memory_id: str) -> dict[str, Any]:
        return self._call("DELETE", f"/v1/users/{_seg(user_id)}/memories/{_seg(memory_id)}")

    def forget_user(self, user_id: str) -> dict[str, Any]:
        return self._call("DELETE", f"/v1/users/{_seg(user_id)}")

    def job(self, user_id: str, job_id: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/users/{_seg(user_id)}/jobs/{_seg(job_id)}")

    # -- Bedrock Converse tool use --------------------------------------------------------
    def handle_tool_use(self, user_id: str, tool_use: dict[str, Any]) -> dict[str, Any]:
        """Answer one ``toolUse`` content block with a ``toolResult`` content block."""
        name, args = tool_use.get("name"), tool_use.get("input") or {}
        try:
            if name == "search_memory":
                found = self.search(user_id, str(args.get("query", "")), limit=int(args.get("limit", 5)))
                content = [
                    {"json": {"memories": [
                        {"content": h["memory"]["content"], "when": h["memory"]["event_time"] or h["memory"]["message_time"]}
                        for h in found["results"]
                    ]}}
                ]  # fmt: skip
            elif name == "save_memory":
                self.add(user_id, str(args.get("content", "")), role="user")
                content = [{"text": "saved"}]
            else:
                return {"toolResult": {"toolUseId": tool_use.get("toolUseId"), "status": "error",
                                       "content": [{"text": f"unknown tool {name}"}]}}  # fmt: skip
        except MemoryAPIError as exc:
            return {"toolResult": {"toolUseId": tool_use.get("toolUseId"), "status": "error",
                                   "content": [{"text": str(exc)}]}}  # fmt: skip
        return {"toolResult": {"toolUseId": tool_use.get("toolUseId"), "content": content}}


#: Tool specifications for Bedrock Converse (``toolConfig={"tools": BEDROCK_TOOLS}``).
BEDROCK_TOOLS: list[dict[str, Any]] = [
    {
        "toolSpec": {
            "name": "search_memory",
            "description": "Search what the user said in earlier conversations. Use before answering questions "
            "about the user's life, preferences, plans or past events.",
            "inputSchema": {
                "json": {
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": "What to look for, in plain words."},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 20},
                    },
                    "required": ["query"],
                }
            },
        }
    },
    {
        "toolSpec": {
            "name": "save_memory",
            "description": "Remember something the user said that will matter in later conversations.",
            "inputSchema": {
                "json": {
                    "type": "object",
                    "properties": {"content": {"type": "string", "description": "The statement, in the user's words."}},
                    "required": ["content"],
                }
            },
        }
    },
]
