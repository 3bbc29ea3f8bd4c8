"""Python clients for the HTTP API: :class:`MemoryClient` (sync) and :class:`AsyncMemoryClient`.

>>> from cognis_memory.client import MemoryClient
>>> with MemoryClient("http://127.0.0.1:8080", api_key="demo-key") as mem:
...     mem.add("alice", "I moved to Lisbon last month", speaker="Alice")
...     for hit in mem.search("alice", "Where does Alice live?").results:
...         print(hit.score, hit.memory.content)
...     print(mem.context("alice", "Any tips for my neighbourhood?").text)

Both clients have the same methods; the async one's are coroutines (and ``iter_memories``
is an async iterator). Results are the API's own response models (``SearchOut``,
``MemoryOut``, ...). Errors are raised as :class:`MemoryAPIError` subclasses chosen by
status (:class:`InvalidRequest`, :class:`NotFound`, ...) carrying the server's ``code``,
``message``, ``field`` and the request id.

Retries: 429, 502, 503 and 504 answers and transport errors (connection refused or reset,
timeouts) are retried with exponential backoff and full jitter, honouring ``Retry-After``
(see :class:`RetryPolicy`), but only for requests that are safe to repeat: reads, searches,
deletes, and message posts, which are made idempotent by giving every message without a
``client_message_id`` a fresh one before the first attempt (the server stores a message id
once). ``update`` writes a new version each time, so it is retried only when the connection
could not be opened (the request never left).

For agents: :mod:`cognis_memory.agent_tools` turns a client into Bedrock Converse tools.
"""

from __future__ import annotations

from ..api.schemas import (
    AddMessagesOut,
    ContextOut,
    ForgetOut,
    JobListOut,
    JobOut,
    MemoryListOut,
    MemoryOut,
    MessageBody,
    SearchOut,
)
from .asynchronous import AsyncMemoryClient
from .errors import (
    AuthenticationError,
    Conflict,
    InvalidRequest,
    MemoryAPIError,
    MemoryConnectionError,
    NotFound,
    PayloadTooLarge,
    PermissionDenied,
    RateLimited,
    ServerError,
    ServiceUnavailable,
    error_from_response,
)
from .requests import NO_RETRIES, RetryPolicy
from .sync import MemoryClient

__all__ = [
    "AddMessagesOut", "AsyncMemoryClient", "AuthenticationError", "Conflict", "ContextOut", "ForgetOut",
    "InvalidRequest", "JobListOut", "JobOut", "MemoryAPIError", "MemoryClient", "MemoryConnectionError",
    "MemoryListOut", "MemoryOut", "MessageBody", "NotFound", "PayloadTooLarge", "PermissionDenied", "RateLimited",
    "NO_RETRIES", "RetryPolicy", "SearchOut", "ServerError", "ServiceUnavailable", "error_from_response",
]  # fmt: skip
