"""What is stored: one column list per record (:data:`MEMORY_RECORD`, :data:`MESSAGE_RECORD`,
:data:`JOB_RECORD`), each column with its kind, and the column tuples derived from them.

The field names are the same everywhere (the SQL column names), except the memory id, which the
OpenSearch documents call ``memory_id`` (:meth:`Column.key`). The SQL tables and INSERTs, the OpenSearch
mappings and documents, the JSON form, the readers (:mod:`.reader`) and the writers (:mod:`.writer`)
all follow these lists, so a new stored field is one :class:`Column` line here and its domain field.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ...domain import Category, JobStatus, MemoryKind, Scope
from ...search_filter import ColumnFilter, Match, any_of, equals

#: the column kind each match is made for (what every translation and the request check are written for)
MATCH_KINDS = {Match.ANY_OF: "enum", Match.EQUALS: "text"}


@dataclass(frozen=True, slots=True)
class Column:
    """One stored field. ``kind`` says how it is kept: ``text``, ``int``, ``flag``, ``enum`` (its value),
    ``time``, ``required_time``, ``ids`` (a list of ids), ``json_list``, ``json`` (an object) or ``vector``.

    ``attr`` is the domain attribute when it is named otherwise (a message's ``timestamp`` is kept as
    ``ts``); ``required`` columns are read with ``row[name]`` (a missing one is an error), the others
    read as None when absent; ``searched`` marks the memory fields a keyword search filters or scores
    on, the fields of the dual store's keyword index; ``filter`` makes the column a search filter of
    its own (a searched column, so that the keyword index filters on it too, of its match's kind)."""

    name: str
    kind: str = "text"
    enum: type[StrEnum] | None = None
    required: bool = False
    searched: bool = False
    attr: str = ""
    filter: ColumnFilter | None = None

    def __post_init__(self) -> None:
        if self.filter is not None and (self.kind != MATCH_KINDS[self.filter.match] or not self.searched):
            raise ValueError(
                f"{self.name}: a column filtered by {self.filter.match} is a searched column of kind "
                f"{MATCH_KINDS[self.filter.match]}"
            )

    @property
    def field(self) -> str:
        return self.attr or self.name

    def key(self, id_field: str) -> str:
        """The name of this column in a row or document whose record id is called ``id_field``."""
        return id_field if self.name == "id" else self.name


#: The memory fields in the order of the SQL backends' ``memories`` columns.
MEMORY_RECORD: tuple[Column, ...] = (
    Column("id", required=True, searched=True),
    Column("tenant_id", required=True, searched=True),
    Column("user_id", required=True, searched=True),
    Column("agent_id", searched=True, filter=equals("agent_id")),
    Column("session_id", searched=True),
    Column("scope", "enum", Scope, required=True, searched=True, filter=any_of("scopes")),
    Column("category", "enum", Category, required=True, searched=True, filter=any_of("categories")),
    Column("kind", "enum", MemoryKind, required=True, searched=True, filter=any_of("kinds")),
    Column("content", required=True, searched=True),
    Column("speaker"),
    Column("event_time", "time", searched=True),
    Column("message_time", "time", searched=True),
    Column("created_at", "required_time", searched=True),
    Column("version", "int", required=True, searched=True),
    Column("is_current", "flag", required=True, searched=True),
    Column("deleted", "flag"),
    Column("replaces_id"),
    Column("source_message_ids", "ids"),
    Column("superseded_sources", "ids"),  # kept in metadata by stores written before: the migrations move it
    Column("metadata", "json"),
    Column("chain_id"),  # the id of the chain's first version: the memory's id in the API
    Column("time_expressions", "json_list"),
    Column("embedding", "vector"),
    Column("embedding_short", "vector"),
)
MESSAGE_RECORD: tuple[Column, ...] = (
    Column("id", required=True),
    Column("tenant_id", required=True),
    Column("user_id", required=True),
    Column("session_id"),
    Column("agent_id"),
    Column("speaker"),
    Column("role", required=True),
    Column("content", required=True),
    Column("ts", "required_time", attr="timestamp"),
    Column("client_message_id"),
    Column("metadata", "json"),
    Column("created_at", "required_time"),
    Column("scope", "enum", Scope),  # absent from documents of an older release: the default, USER
    Column("raw_memory_id"),
)
JOB_RECORD: tuple[Column, ...] = (
    Column("id", required=True),
    Column("tenant_id", required=True),
    Column("user_id", required=True),
    Column("message_ids", "json_list", required=True),
    Column("status", "enum", JobStatus, required=True),
    Column("attempts", "int", required=True),
    Column("max_attempts", "int", required=True),
    Column("last_error"),
    Column("next_attempt_at", "required_time"),
    Column("created_at", "required_time"),
    Column("updated_at", "required_time"),
    Column("result", "json"),
)

MEMORY_COLUMNS = tuple(c.name for c in MEMORY_RECORD)
#: the memory columns but the vectors (reads that need no vectors skip their bytes)
MEMORY_COLUMNS_WITHOUT_VECTORS = tuple(c.name for c in MEMORY_RECORD if c.kind != "vector")
MESSAGE_COLUMNS = tuple(c.name for c in MESSAGE_RECORD)
JOB_COLUMNS = tuple(c.name for c in JOB_RECORD)
#: the memory fields of the dual store's keyword index (before the derived effective time)
SEARCHED_MEMORY_RECORD = tuple(c for c in MEMORY_RECORD if c.searched)
#: the memory columns a search filters on by themselves, each with its
#: :class:`~cognis_memory.search_filter.ColumnFilter` (the owner,
#: ``is_current``, the session's CONTEXT visibility and the effective time range are rules of their own)
MEMORY_FILTERS: tuple[tuple[Column, ColumnFilter], ...] = tuple(
    (c, c.filter) for c in MEMORY_RECORD if c.filter is not None
)
