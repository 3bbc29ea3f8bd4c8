"""Request and response bodies of the HTTP API.

Requests forbid unknown fields (a typo is an error naming the field, not a silently
ignored option) and take numbers and flags strictly: ``"limit": true``, ``"limit": "5"`` and
``"explain": "yes"`` are 422s naming the field, not coerced. Times are ISO 8601 strings and
enums their values, as JSON has no other way to say them. Sizes are checked in the service so
that every entry point shares them. A message's model (``MessageBody``) is declared in
:mod:`cognis_memory.message_body`, below the service, because every entry point submits it, Python
callers of the service included.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from ..domain import SUPERSEDED_SOURCES_KEY, Category, Job, Memory, MemoryKind, Message, Scope
from ..message_body import IsoDatetime, MessageBody
from ..stores.values import UserSummary

if TYPE_CHECKING:
    from ..retrieval.search_types import SearchResponse


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AddMessagesBody(_Strict):
    messages: list[MessageBody] = Field(..., min_length=1)
    mode: Literal["sync", "async"] = Field(
        "sync", description="sync: all stages before answering; async: answer after storing, extract in a job."
    )


class RetrievalOptions(_Strict):
    """Filters and options shared by search and context."""

    scopes: list[Scope] | None = None
    session_id: StrictStr | None = Field(
        None, description="The current session: its CONTEXT-scope memories are included."
    )
    categories: list[Category] | None = None
    kinds: list[MemoryKind] | None = None
    agent_id: StrictStr | None = None
    time_from: IsoDatetime | None = Field(None, description="Only memories of events at or after this time (ISO 8601).")
    time_to: IsoDatetime | None = Field(None, description="Only memories of events at or before this time (ISO 8601).")
    include_history: StrictBool = Field(
        False, description="Attach each memory's earlier versions (automatic for questions about the past)."
    )
    now: IsoDatetime | None = Field(None, description="Reference time for relative expressions in the text.")
    recipe: StrictStr | None = Field(None, description="A named retrieval recipe (default: the service's).")


class SearchBody(RetrievalOptions):
    query: StrictStr = Field(..., examples=["Where does Alice live?"])
    limit: StrictInt = Field(10, ge=1, le=100)
    explain: StrictBool = False


class ContextBody(RetrievalOptions):
    query: StrictStr | None = Field(
        None,
        description="What to find memories for: usually the user's latest message (as `query` of /search). "
        "Required unless the deprecated `message` is given.",
        examples=["Where should I take my cat?"],
    )
    message: StrictStr | None = Field(
        None,
        json_schema_extra={"deprecated": True},  # marked in the schema only: reading it here warns nobody
        description="Deprecated name of `query`, still accepted: give one of them (both only when they are equal; "
        "different values are a 422 naming `message`).",
    )
    max_tokens: StrictInt = Field(800, ge=50, le=32000, description="Token budget of the text block (estimated).")
    limit: StrictInt = Field(20, ge=1, le=100, description="How many search hits to consider.")
    with_ids: StrictBool = Field(False, description="Put each memory's id in its line (for agents that edit memories).")


class UpdateMemoryBody(_Strict):
    content: StrictStr | None = None
    category: Category | None = None
    event_time: IsoDatetime | None = None


class MemoryOut(BaseModel):
    id: str = Field(
        description="The memory's id: the same in every version of it (the id of its first version). Every route "
        "that takes a memory id also takes a `version_id`."
    )
    version_id: str = Field(description="This version's own id (`replaces_id` names the previous version's).")
    user_id: str
    content: str = Field(
        description="As said (a message) or written (a fact); speaker and dates are fields of their own."
    )
    category: Category
    scope: Scope
    kind: MemoryKind
    speaker: str | None
    session_id: str | None
    agent_id: str | None
    event_time: datetime | None
    message_time: datetime | None
    created_at: datetime
    version: int
    is_current: bool
    deleted: bool
    replaces_id: str | None = Field(description="The `version_id` of the version this one replaced.")
    source_message_ids: list[str]
    superseded_sources: list[str] = Field(
        default_factory=list,  # a server of an earlier release sends none
        description="A fact version's messages (ids, oldest first) that stated a value it replaced: the fact "
        "no longer says what they said. Empty for a message's memory and a fact never updated.",
    )
    metadata: dict[str, Any] = Field(
        description="Deprecated key: a fact's `superseded_sources` is also here, where earlier releases showed it "
        "(for one more release); read the field of that name."
    )
    time_expressions: list[dict[str, Any]] = Field(
        default_factory=list,  # a server of an earlier release sends none
        description="The time expressions of a message's content, each with the absolute date it was resolved "
        'to against the message time: {"text": "yesterday", "date": "9 March 2025", "start", "end", "granularity"}. '
        "The content itself is kept as said.",
    )

    @classmethod
    def of(cls, m: Memory) -> MemoryOut:
        """Every declared field from the memory's attribute of the same name (a new field is one line above),
        but the two ids: ``id`` is the memory's (its chain id), ``version_id`` the version's."""
        fields = {name: getattr(m, name) for name in cls.model_fields if name not in ("id", "version_id")}
        if m.superseded_sources:  # the deprecated copy, where earlier releases kept them
            fields["metadata"] = {**m.metadata, SUPERSEDED_SOURCES_KEY: list(m.superseded_sources)}
        return cls(id=m.chain_id, version_id=m.id, **fields)


class MessageOut(BaseModel):
    id: str
    client_message_id: str | None
    created: bool = Field(description="False when the client_message_id was already stored.")
    timestamp: datetime

    @classmethod
    def of(cls, m: Message, created: bool) -> MessageOut:
        return cls(id=m.id, client_message_id=m.client_message_id, created=created, timestamp=m.timestamp)


class JobStatusFilter(StrEnum):
    """What ``GET /v1/jobs`` may list: one job status, or ``pending`` (queued, running, or failed and due again)."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    DEAD = "dead"
    PENDING = "pending"


class JobOut(BaseModel):
    id: str
    user_id: str | None = Field(None, description="The job's user (set by every server that lists jobs).")
    status: str
    attempts: int
    max_attempts: int
    last_error: str | None
    next_attempt_at: datetime
    created_at: datetime
    updated_at: datetime
    result: dict[str, Any]

    @classmethod
    def of(cls, j: Job) -> JobOut:
        return cls(
            id=j.id, user_id=j.user_id, status=j.status.value, attempts=j.attempts, max_attempts=j.max_attempts,
            last_error=j.last_error, next_attempt_at=j.next_attempt_at, created_at=j.created_at,
            updated_at=j.updated_at, result=j.result,
        )  # fmt: skip


class AddMessagesOut(BaseModel):
    messages: list[MessageOut]
    memories: list[MemoryOut] = Field(description="Raw-message memories created now (searchable at once).")
    facts: Literal["extracted", "pending", "off", "nothing_new"] = Field(
        description="The fact extraction of the new messages: extracted in this request (sync mode), pending in "
        "`job` (async mode, or sync mode when the LLM was unreachable or gave no usable answer), off (no LLM "
        "configured) or nothing_new (every message was already stored). The messages are stored in every case."
    )
    job: JobOut | None = Field(
        None, description="The extraction job, when the facts are pending (`GET /v1/users/{user}/jobs/{job}`)."
    )
    extraction: dict[str, Any] = Field(
        default_factory=dict,
        description="Sync mode: operation counts and the LLM answers' report (repairs and dropped items by "
        "kind); when the extraction was handed to the job, why (`deferred`).",
    )
    degraded: list[str] = Field(
        default_factory=list, description="Dependencies that failed during the request (the facts are then pending)."
    )


class StageMoveOut(BaseModel):
    stage: str = Field(description="The retrieval stage (as in `explain.stage_durations`: `context`, `dedup`, ...).")
    score_before: float
    score_after: float
    rank_before: int = Field(description="Place among all candidates before the stage (1 = first).")
    rank_after: int | None = Field(description="Place after it; null when the stage removed the candidate.")


class SearchHitOut(BaseModel):
    memory: MemoryOut
    score: float
    scores: dict[str, float] | None = None
    moves: list[StageMoveOut] | None = Field(
        None,
        description="With `explain`: every stage that changed this hit's score or place, in the order they ran "
        "(a stage that reorders without scoring, such as `dedup` or `current_state`, shows equal scores).",
    )
    history: list[MemoryOut] = Field(default_factory=list, description="Earlier versions, oldest first.")


class SearchOut(BaseModel):
    results: list[SearchHitOut]
    degraded: list[str] = Field(default_factory=list, description="Stages skipped because a dependency failed.")
    query_analysis: dict[str, Any]
    explain: dict[str, Any] | None = None

    @classmethod
    def of(cls, res: SearchResponse, *, explain: bool = False) -> SearchOut:
        """The search's answer, in the one shape the HTTP API and the CLI print (per-hit ``scores`` with
        ``explain`` only)."""
        return cls(
            results=[
                SearchHitOut(
                    memory=MemoryOut.of(h.memory),
                    score=h.score,
                    scores=h.scores if explain else None,
                    moves=[m.to_dict() for m in h.moves] if explain else None,
                    history=[MemoryOut.of(v) for v in h.history],
                )
                for h in res.hits
            ],
            degraded=res.degraded,
            query_analysis=res.analysis.to_dict(),
            explain=res.explain,
        )


class ContextMemoryOut(BaseModel):
    memory: MemoryOut
    history: list[MemoryOut] = Field(default_factory=list, description="Earlier versions shown with it.")


class ContextOut(BaseModel):
    text: str = Field(description="The block for a system prompt; empty when nothing relevant is stored.")
    tokens: int = Field(description="Estimated tokens of `text` (about 3.5 ASCII characters a token).")
    memories: list[ContextMemoryOut] = Field(description="The memories in `text`, in its order.")
    omitted: int = Field(description="Hits left out because the budget was spent.")
    degraded: list[str] = Field(default_factory=list, description="Stages skipped because a dependency failed.")
    query_analysis: dict[str, Any]


class HistoryOut(BaseModel):
    versions: list[MemoryOut]


class MemoryListOut(BaseModel):
    memories: list[MemoryOut] = Field(
        description="In the order the memories were said (`message_time`, else `created_at`; then `id`), oldest first."
    )
    next_cursor: str | None = Field(
        None, description="Pass as `cursor` for the next page; null on the last page. Opaque: pass it back as it is."
    )
    next_after: str | None = Field(
        description="Deprecated (use `next_cursor`): the page's last memory id, which `after` still takes."
    )


class SessionMessageOut(BaseModel):
    """A message as the client sent it (its text unchanged)."""

    id: str
    client_message_id: str | None
    session_id: str | None
    agent_id: str | None
    speaker: str | None
    role: str
    content: str
    timestamp: datetime = Field(description="When it was said (the message's `timestamp`, or when it was received).")
    scope: Scope
    metadata: dict[str, Any]
    created_at: datetime = Field(description="When the service stored it.")

    @classmethod
    def of(cls, m: Message) -> SessionMessageOut:
        return cls(**{name: getattr(m, name) for name in cls.model_fields})


class SessionMessageListOut(BaseModel):
    messages: list[SessionMessageOut] = Field(description="In `timestamp` order (then `id`), oldest first.")
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null on the last page. Opaque: pass it back as it is."
    )


class UserOut(BaseModel):
    user_id: str
    current_memories: int = Field(description="Current versions that are not deleted.")
    last_memory_at: datetime = Field(description="When the user's newest memory version was written.")

    @classmethod
    def of(cls, u: UserSummary) -> UserOut:
        return cls(user_id=u.user_id, current_memories=u.current_memories, last_memory_at=u.last_memory_at)


class UserListOut(BaseModel):
    users: list[UserOut]
    next_after: str | None = Field(description="Pass as `after` for the next page; null on the last page.")


class KeyOut(BaseModel):
    tenant_id: str = Field(description="The tenant every call with this key acts on.")
    read_only: bool = Field(description="True: the key may read and search, never change anything.")


class JobListOut(BaseModel):
    jobs: list[JobOut]
    next_after: str | None = Field(description="Pass as `after` for the next page; null on the last page.")


class ForgetOut(BaseModel):
    deleted: dict[str, int]


class ErrorDetail(BaseModel):
    code: str
    message: str
    field: str | None = None


class ErrorOut(BaseModel):
    error: ErrorDetail
