"""Every stored field of ``Memory`` reaches every place that keeps or shows a memory, so a field added
to the dataclass and forgotten at one of them fails here, naming the field and the place.

The places ("sites"): the SQLite ``memories`` table (as the migrations build it: the numbered ones, then
the columns added from the record), the PostgreSQL ``memories`` table (parsed from the numbered
migrations' CREATE/ALTER statements, plus the columns added from the record; no server needed), the
shared SQL column list of the record mapping, the OpenSearch-only store's mapping and documents,
the dual store's keyword index mapping and documents, the plain-JSON form and the API's
``MemoryOut``. A field that is deliberately not kept at a site is listed in :data:`ABSENT` with the
reason; a listed field that is in fact present (or no longer a field) fails too, so the list stays true.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import pytest
from opensearchpy import OpenSearch

from cognis_memory.api.schemas import MemoryOut
from cognis_memory.domain import Category, Memory
from cognis_memory.serialization import memory_to_dict
from cognis_memory.stores.migrations.postgres import MIGRATIONS as POSTGRES_MIGRATIONS
from cognis_memory.stores.migrations.record_columns import missing_columns
from cognis_memory.stores.migrations.sqlite import add_record_columns, apply_migrations
from cognis_memory.stores.opensearch import MEMORY_FIELDS, OpenSearchStore, memory_fields
from cognis_memory.stores.opensearch.memories import OpenSearchMemories
from cognis_memory.stores.records import MEMORY_COLUMNS, MEMORY_RECORD, POSTGRES, memory_to_row

#: Every field of the dataclass is stored (derived values such as ``effective_time`` are properties).
STORED: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Memory))

#: OpenSearch documents name the memory id ``memory_id`` (``_id`` is the document id); site names -> field names.
OPENSEARCH_NAMES = {"memory_id": "id"}

_KEYWORD_INDEX_ONLY_SEARCHES = (
    "the dual store's keyword index holds only what a keyword search filters or scores on; "
    "PostgreSQL keeps the rest and the hits are read back from it"
)

#: Fields deliberately absent from a site, with the reason. Everything else of STORED must be there.
ABSENT: dict[str, dict[str, str]] = {
    "sqlite table": {},
    "postgres table": {},
    "sql record columns": {},
    "opensearch store mapping": {},
    "opensearch store document": {},
    # the keyword index holds exactly the columns the record marks ``searched`` (checked below), so a new
    # field's place there is decided once, in records/schema.py
    "keyword index mapping": {
        c.name: _KEYWORD_INDEX_ONLY_SEARCHES
        + (" (a deleted memory is not current, so not indexed)" if c.name == "deleted" else "")
        + (" (vectors are searched in PostgreSQL, pgvector)" if c.kind == "vector" else "")
        for c in MEMORY_RECORD
        if not c.searched
    },
    "keyword index document": {},  # filled below: the same as its mapping
    "plain json": {
        "embedding": "the plain-JSON form (export/import, cache) carries no vectors: they are re-embedded",
        "embedding_short": "the plain-JSON form carries no vectors",
    },
    "api MemoryOut": {
        "tenant_id": "the caller's API key names the tenant; a response does not repeat it",
        "embedding": "vectors are internal: not part of the API",
        "embedding_short": "vectors are internal: not part of the API",
        "chain_id": "shown as `id`, the memory's id (the version's own id is `version_id`)",
    },
}
ABSENT["keyword index document"] = ABSENT["keyword index mapping"]


def _sample() -> Memory:
    full = np.ones(4, dtype=np.float32) / 2
    return Memory(tenant_id="t", user_id="u", content="c", category=Category.HOBBIES,
                  embedding=full, embedding_short=full[:2] * np.float32(np.sqrt(2)))  # fmt: skip


# -- reading each site --------------------------------------------------------------------------------
def _split_top_level(text: str) -> list[str]:
    """``text`` cut at the commas outside parentheses and quotes."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


_TABLE_CONSTRAINT = re.compile(r"^(CONSTRAINT|PRIMARY|UNIQUE|CHECK|FOREIGN|EXCLUDE|LIKE)\b", re.IGNORECASE)


def _ident(word: str) -> str:
    return word.strip('"') if word.startswith('"') else word.lower()


def sql_table_columns(scripts: Iterable[str], table: str) -> list[str]:
    """The columns of ``table`` after running ``scripts`` in order, read from their CREATE TABLE and
    ALTER TABLE ... ADD/DROP/RENAME COLUMN statements (comments stripped; no server)."""
    columns: list[str] = []
    name = re.escape(table)
    for script in scripts:
        for statement in re.sub(r"--[^\n]*", "", script).split(";"):
            s = " ".join(statement.split())
            if m := re.match(rf"CREATE TABLE (?:IF NOT EXISTS )?{name} \((.*)\)$", s, re.IGNORECASE):
                columns = [_ident(p.split()[0]) for p in _split_top_level(m.group(1)) if not _TABLE_CONSTRAINT.match(p)]
            elif m := re.match(rf"ALTER TABLE (?:IF EXISTS )?(?:ONLY )?{name} (.*)$", s, re.IGNORECASE):
                for action in _split_top_level(m.group(1)):
                    words = action.split()
                    verb = words[0].upper()
                    rest = [w for w in words[1:] if w.upper() not in ("COLUMN", "IF", "NOT", "EXISTS")]
                    if verb == "ADD" and not _TABLE_CONSTRAINT.match(" ".join(words[1:])):
                        columns.append(_ident(rest[0]))
                    elif verb == "DROP" and words[1].upper() != "CONSTRAINT":
                        columns.remove(_ident(rest[0]))
                    elif verb == "RENAME" and len(rest) == 3 and rest[1].upper() == "TO":
                        columns[columns.index(_ident(rest[0]))] = _ident(rest[2])
    return columns


def sqlite_table(tmp_path: Path) -> set[str]:
    conn = sqlite3.connect(tmp_path / "fields.db", isolation_level=None)
    try:
        apply_migrations(conn)
        add_record_columns(conn)
        return {row[1] for row in conn.execute("PRAGMA table_info(memories)")}
    finally:
        conn.close()


def postgres_table(tmp_path: Path) -> set[str]:
    """The numbered migrations' columns and those the migration then adds from the record (what
    ``apply_migrations`` leaves; the server-side check is tests/stores/test_record_columns.py)."""
    numbered = set(sql_table_columns((m.render(dim=4, dim_short=2) for m in POSTGRES_MIGRATIONS), "memories"))
    return numbered | {a.column.name for a in missing_columns({"memories": numbered})}


def opensearch_names(names: Iterable[str]) -> set[str]:
    return {OPENSEARCH_NAMES.get(n, n) for n in names}


def _opensearch_store() -> OpenSearchStore:
    # a client is only built, never connected: the mapping is plain data of the store
    return OpenSearchStore(OpenSearch(hosts=["http://127.0.0.1:9"]), index_prefix="fields", dim=4, dim_short=2)


def opensearch_store_mapping(tmp_path: Path) -> set[str]:
    store = _opensearch_store()
    try:
        return opensearch_names(store._bodies()[store.memories]["mappings"]["properties"])
    finally:
        asyncio.run(store.close())


SITES: dict[str, Callable[[Path], Iterable[str]]] = {
    "sqlite table": sqlite_table,
    "postgres table": postgres_table,
    "sql record columns": lambda _: MEMORY_COLUMNS,
    "opensearch store mapping": opensearch_store_mapping,
    "opensearch store document": lambda _: opensearch_names(OpenSearchMemories._memory_doc(_sample())),
    "keyword index mapping": lambda _: opensearch_names(MEMORY_FIELDS),
    "keyword index document": lambda _: opensearch_names(memory_fields(_sample())),
    "plain json": lambda _: memory_to_dict(_sample()),
    "api MemoryOut": lambda _: MemoryOut.model_fields,
}


def test_every_site_has_its_absent_list() -> None:
    assert set(SITES) == set(ABSENT)


@pytest.mark.parametrize("site", list(SITES))
def test_every_stored_field_reaches_the_site(site: str, tmp_path: Path) -> None:
    present = set(SITES[site](tmp_path))
    absent = ABSENT[site]
    missing = [f for f in STORED if f not in present and f not in absent]
    assert not missing, f"Memory fields missing from the {site}: {missing} (add them there, or to ABSENT with a reason)"
    stale = [f for f in absent if f not in STORED or f in present]
    assert not stale, f"ABSENT[{site!r}] lists {stale}, which are not Memory fields or are present after all"


def test_the_postgres_row_has_one_value_per_column() -> None:
    # the INSERT is built from the column list and takes the row's values in that order
    assert tuple(memory_to_row(_sample(), POSTGRES)) == MEMORY_COLUMNS


def test_the_postgres_reader_follows_alter_table() -> None:
    # the parser above must see what a later migration does to the table, or the site check would be blind
    scripts = [
        "CREATE TABLE memories (id text PRIMARY KEY, old_name text, gone int, metadata jsonb DEFAULT '{}',"
        " CONSTRAINT c UNIQUE (id, gone));",
        '-- a comment; with a semicolon\nALTER TABLE memories ADD COLUMN mood text, ADD COLUMN IF NOT EXISTS "Tag" text;',
        "ALTER TABLE memories DROP COLUMN gone; ALTER TABLE memories RENAME COLUMN old_name TO new_name;"
        " ALTER TABLE memories ADD CONSTRAINT k CHECK (mood <> '');",
        "CREATE TABLE other (x int); ALTER TABLE other ADD COLUMN y int;",
    ]
    assert sql_table_columns(scripts, "memories") == ["id", "new_name", "metadata", "mood", "Tag"]
