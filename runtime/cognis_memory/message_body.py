"""A message as a caller submits it: :class:`MessageBody`, the one shape of a message on the way in.

The HTTP API takes it (``POST /v1/users/{user_id}/messages``, in ``AddMessagesBody``), the HTTP clients
send it, the CLI builds it from a conversation file, and Python callers of
:meth:`~cognis_memory.service.MemoryService.add_messages` build it themselves.
:func:`cognis_memory.validation.check_message` checks it and maps it to the
:class:`~cognis_memory.domain.Message` the stores keep. Its types are checked when it is built (the
API's 422s); sizes, ids, names, times and metadata rules are the service's, so every entry point shares
them. A module of its own, below the service and the API, because both use it and it needs nothing but
pydantic and the domain's :class:`~cognis_memory.domain.Scope`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictStr

from .domain import Scope


def _iso_text(value: Any) -> Any:
    if isinstance(value, (int, float)):  # not taken as Unix seconds: the API's times are ISO 8601
        raise ValueError("must be an ISO 8601 date-time string")
    return value


#: A date-time given as an ISO 8601 string (numbers are refused, not read as Unix time).
IsoDatetime = Annotated[datetime, BeforeValidator(_iso_text)]


# Published in the OpenAPI document as declared here: no docstring, which would become the schema's description.
class MessageBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: StrictStr = Field(..., description="The message text.", examples=["I moved to Lisbon last month."])
    speaker: StrictStr | None = Field(None, description="Who said it (a name).", examples=["Alice"])
    role: Literal["user", "assistant", "system", "tool"] = "user"
    timestamp: IsoDatetime | None = Field(None, description="When it was said (ISO 8601); default: now.")
    session_id: StrictStr | None = None
    agent_id: StrictStr | None = None
    client_message_id: StrictStr | None = Field(None, description="Your id for the message; re-sending it is a no-op.")
    scope: Scope = Field(Scope.USER, description="USER: across sessions; CONTEXT: this session only.")
    metadata: dict[str, Any] = Field(default_factory=dict)
