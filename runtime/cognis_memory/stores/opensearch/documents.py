"""What the OpenSearch memory indices hold and how they are asked: the mapping and the document
fields of a memory (from the record columns of :mod:`cognis_memory.stores.records`; the mapping of a
message too), the owner-scoped document ids, the owner filter and the BM25 ``match`` clause.

User text only ever reaches a ``match`` query (analysed as plain words; never
``query_string``/``simple_query_string``), so no query syntax can be injected.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...domain import Memory, Owner
from ...search_text import search_text
from ..records import OPENSEARCH, SEARCHED_MEMORY_RECORD, Column, epoch_us, iso, memory_to_row

_WORD = re.compile(r"\w+", re.UNICODE)
#: The most words of user text sent to a match query (each word is one clause; the cluster caps clauses).
MAX_QUERY_WORDS = 256


def match_text(text: str) -> str:
    """The plain words of user text (punctuation dropped, at most MAX_QUERY_WORDS)."""
    return " ".join(_WORD.findall(text)[:MAX_QUERY_WORDS])


def _match_text_field(name: str, words: str) -> list[dict[str, Any]]:
    return [{"match": {name: {"query": words}}}, {"match": {f"{name}.english": {"query": words}}}]


def match_clause(words: str) -> dict[str, Any]:
    """BM25 on ``search_text`` and its stemmed subfield; on ``content`` for a document written before
    ``search_text`` existed (its content is its search text); ``words`` only ever goes into ``match``."""
    written_before = {
        "bool": {
            "must_not": [{"exists": {"field": SEARCH_TEXT}}],
            "should": _match_text_field("content", words),
            "minimum_should_match": 1,
        }
    }
    return {"bool": {"should": [*_match_text_field(SEARCH_TEXT, words), written_before], "minimum_should_match": 1}}


_KEYWORD = {"type": "keyword"}
_DATE = {"type": "date"}
#: how an OpenSearch memory index keeps each column kind of :mod:`.records` (vectors: the store's own fields)
_FIELD_TYPES: dict[str, dict[str, Any]] = {
    "text": _KEYWORD, "enum": _KEYWORD, "ids": _KEYWORD, "int": {"type": "integer"}, "flag": {"type": "boolean"},
    "time": _DATE, "required_time": _DATE, "json": {"type": "object", "enabled": False},
    "json_list": {"type": "object", "enabled": False},
}  # fmt: skip
#: a memory text field BM25 scores: analysed as plain words and, in a subfield, stemmed English (``content``
#: keeps this mapping, which documents written before ``search_text`` existed are scored on)
_CONTENT = {"type": "text", "analyzer": "standard", "fields": {"english": {"type": "text", "analyzer": "english"}}}
#: the document field of :func:`~cognis_memory.search_text.search_text`: what BM25 scores
SEARCH_TEXT = "search_text"
#: derived from the effective time (event time, else message time), what time ranges filter on
_EFFECTIVE_TIME = {
    "effective_time": _DATE,
    # Exact (microsecond) effective time for range filters; `date` keeps only milliseconds.
    "effective_us": {"type": "long"},
}


def memory_mapping(
    record: Sequence[Column], vector_fields: Callable[[str], dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The mapping properties of the memory columns ``record`` and the effective time; ``vector_fields``
    maps a vector column to its fields (needed when ``record`` has vectors)."""
    properties: dict[str, Any] = {}
    for c in record:
        name = OPENSEARCH.memory_id_field if c.name == "id" else c.name
        if c.kind == "vector":
            assert vector_fields is not None, f"{c.name}: a vector column needs its fields"
            properties.update(vector_fields(name))
        else:
            properties[name] = _CONTENT if c.name == "content" else _FIELD_TYPES[c.kind]
    return properties | {SEARCH_TEXT: _CONTENT} | _EFFECTIVE_TIME


#: Fields shared by both OpenSearch memory indices (keyword index and the OpenSearch-only store).
MEMORY_FIELDS: dict[str, Any] = memory_mapping(SEARCHED_MEMORY_RECORD)

#: a message's text is kept, not searched: messages are read by id
_MESSAGE_CONTENT = {"type": "text", "index": False}


def message_mapping(record: Sequence[Column]) -> dict[str, Any]:
    """The mapping properties of the message columns ``record`` (:data:`~..records.MESSAGE_RECORD`)."""
    return {c.name: _MESSAGE_CONTENT if c.name == "content" else _FIELD_TYPES[c.kind] for c in record}


def memory_fields(m: Memory, record: tuple[Column, ...] = SEARCHED_MEMORY_RECORD) -> dict[str, Any]:
    """The document fields of one memory: the columns ``record`` (default: the searchable ones, no
    vectors), its search text and the effective time."""
    eff = m.effective_time
    return memory_to_row(m, OPENSEARCH, record) | {
        SEARCH_TEXT: search_text(m),
        "effective_time": iso(eff),
        "effective_us": epoch_us(eff) if eff is not None else None,
    }


def owner_key(tenant_id: str, user_id: str, record_id: str) -> str:
    """The document id of one owner's record: no other owner can address it."""
    return hashlib.sha256(f"{tenant_id}\x00{user_id}\x00{record_id}".encode()).hexdigest()


def owner_query(owner: Owner) -> dict[str, Any]:
    return {"bool": {"filter": [{"term": {"tenant_id": owner.tenant_id}}, {"term": {"user_id": owner.user_id}}]}}


def knn_field(dim: int) -> dict[str, Any]:
    return {
        "type": "knn_vector",
        "dimension": dim,
        "method": {
            "name": "hnsw",
            "engine": "lucene",
            "space_type": "cosinesimil",
            "parameters": {"m": 16, "ef_construction": 128},
        },
    }


def knn_score(field: str, vector: np.ndarray) -> dict[str, Any]:
    return {
        "lang": "knn",
        "source": "knn_score",
        "params": {"field": field, "query_value": vector.astype(float).tolist(), "space_type": "cosinesimil"},
    }
