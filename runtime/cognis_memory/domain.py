"""Domain model: memories, messages, jobs, categories, scopes and versions.

Plain dataclasses with no framework or backend dependency. Every record carries its
``tenant_id`` and ``user_id``; every store query filters on both.

Versions are git-like: an UPDATE writes a new row whose ``replaces_id`` is the old row's
id and whose ``version`` is one higher, and flips the old row's ``is_current`` to false in
the same transaction. A DELETE writes a *tombstone* version (``deleted=True``,
``is_current=False``) on top of the chain head, so the chain keeps its full history while
no version of it is current any more.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import numpy as np


class Category(StrEnum):
    """The 15 memory categories."""

    PERSONAL_DETAILS = "personal_details"
    PROFESSIONAL = "professional"
    HEALTH = "health"
    RELATIONSHIPS = "relationships"
    PREFERENCES = "preferences"
    HOBBIES = "hobbies"
    GOALS = "goals"
    FINANCIAL = "financial"
    EDUCATIONAL = "educational"
    TRAVEL = "travel"
    EMOTIONAL = "emotional"
    TECHNICAL_SKILLS = "technical_skills"
    DIETARY = "dietary"
    BEHAVIORAL_PATTERNS = "behavioral_patterns"
    COMMUNICATION_STYLE = "communication_style"


class Scope(StrEnum):
    """USER memories hold across sessions; CONTEXT memories belong to one session."""

    USER = "USER"
    CONTEXT = "CONTEXT"


class MemoryKind(StrEnum):
    """``raw``: a message stored as-is by ingest stage 1; ``fact``: extracted by the LLM."""

    RAW = "raw"
    FACT = "fact"


class JobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"  # attempt failed, will be retried
    DEAD = "dead"  # attempts exhausted (dead-letter)


def new_id() -> str:
    """A new opaque record id (32 hex characters)."""
    return uuid.uuid4().hex


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    """Naive datetimes are taken as UTC; aware ones are converted to UTC."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


@dataclass(slots=True)
class Message:
    """A raw conversational turn as the client sent it (checked from the request's ``MessageBody`` by
    :func:`cognis_memory.validation.check_message`), and as the stores keep it."""

    tenant_id: str
    user_id: str
    content: str
    timestamp: datetime
    speaker: str | None = None
    role: str = "user"
    session_id: str | None = None
    agent_id: str | None = None
    client_message_id: str | None = None
    #: the caller's metadata, as sent (no key of the service's own: they are refused)
    metadata: dict[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=new_id)
    created_at: datetime = field(default_factory=utcnow)
    #: the scope of the message's raw memory: CONTEXT belongs to its session only
    scope: Scope = Scope.USER
    #: the id its raw memory gets (a long message's parts derive theirs from it): set by ingest before
    #: the message is saved, so a retry finds a message whose raw memory was never written; never the caller's
    raw_memory_id: str | None = None


#: Metadata keys a caller's message metadata may not use: those the service writes into a raw memory's
#: metadata (``role``, a long message's ``part``/``parts``), and ``scope`` and ``raw_memory_id``, which
#: stores written before kept in a message's metadata (they are the message's own fields now, and the
#: migrations move them there): a caller can neither forge them nor have them taken for the service's.
RESERVED_METADATA_KEYS = frozenset({"scope", "raw_memory_id", "role", "part", "parts"})


@dataclass(slots=True)
class Memory:
    """One version of one memory. ``id`` is this version's own id; ``chain_id`` is the memory's id, the same
    in every version of it (the id of its first version), which the API shows as the memory's ``id``."""

    tenant_id: str
    user_id: str
    content: str
    category: Category
    scope: Scope = Scope.USER
    kind: MemoryKind = MemoryKind.FACT
    speaker: str | None = None
    session_id: str | None = None
    agent_id: str | None = None
    event_time: datetime | None = None
    message_time: datetime | None = None
    created_at: datetime = field(default_factory=utcnow)
    version: int = 1
    is_current: bool = True
    deleted: bool = False
    replaces_id: str | None = None
    source_message_ids: list[str] = field(default_factory=list)
    #: a fact version's messages that stated what it replaced, oldest first (of ``source_message_ids`` and
    #: of the earlier versions' own): set by ingest when a later message updates the fact
    #: (:mod:`cognis_memory.ingest.supersession`), read by retrieval's current-state ordering; empty for raw
    #: memories and for facts never updated
    superseded_sources: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    #: the time expressions of a raw memory's content, each resolved against the message's time:
    #: ``{"text": "yesterday", "date": "7 May 2023", "start": ISO, "end": ISO, "granularity": "day"}``
    #: (``content`` keeps the words as said; :func:`cognis_memory.search_text.search_text` adds the dates)
    time_expressions: list[dict[str, Any]] = field(default_factory=list)
    embedding: np.ndarray | None = None  # full vector, unit length, float32
    embedding_short: np.ndarray | None = None  # prefix re-normalised to unit length
    id: str = field(default_factory=new_id)
    #: the id of the chain's first version ("" when built: a first version is its own chain)
    chain_id: str = ""

    def __post_init__(self) -> None:
        if not self.chain_id:
            self.chain_id = self.id

    @property
    def effective_time(self) -> datetime | None:
        """When the remembered thing happened: event_time, else the message time."""
        return self.event_time or self.message_time

    @property
    def said_at(self) -> datetime:
        """When the memory was said: the time of its message, else when it was stored. Listings and
        export are in this order (then by id)."""
        return self.message_time or self.created_at

    def next_version(self, **changes: Any) -> Memory:
        """A new current version on top of this one (the caller persists both atomically)."""
        return replace(
            self,
            id=new_id(),
            version=self.version + 1,
            is_current=True,
            deleted=False,
            replaces_id=self.id,
            created_at=utcnow(),
            **changes,
        )

    def tombstone(self) -> Memory:
        """The deletion marker written on top of this version."""
        return replace(
            self,
            id=new_id(),
            version=self.version + 1,
            is_current=False,
            deleted=True,
            replaces_id=self.id,
            created_at=utcnow(),
        )


#: The metadata key under which stores written before kept a fact version's ``superseded_sources`` (the
#: migrations move it into the field) and under which the API still shows them, deprecated, for a release.
SUPERSEDED_SOURCES_KEY = "superseded_sources"


@dataclass(slots=True)
class Job:
    """A durable background ingest job (stages 2-4 for a batch of stored messages)."""

    tenant_id: str
    user_id: str
    message_ids: list[str]
    status: JobStatus = JobStatus.QUEUED
    attempts: int = 0
    max_attempts: int = 5
    last_error: str | None = None
    next_attempt_at: datetime = field(default_factory=utcnow)
    created_at: datetime = field(default_factory=utcnow)
    updated_at: datetime = field(default_factory=utcnow)
    result: dict[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=new_id)


@dataclass(slots=True, frozen=True)
class Owner:
    """The (tenant, user) pair every operation is confined to."""

    tenant_id: str
    user_id: str
