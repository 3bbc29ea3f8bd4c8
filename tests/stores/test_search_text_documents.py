"""The OpenSearch keyword documents score a memory's search text (speaker and absolute dates put back into
the words, :mod:`cognis_memory.search_text`), while an index written before that field existed keeps
working: opening it adds the field to its mapping, and its old documents (whose content held that text)
are still found, by their content."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cognis_memory.domain import Category, Memory, MemoryKind, Owner
from cognis_memory.search_filter import SearchFilter
from cognis_memory.stores.opensearch import OpenSearchKeywordIndex
from cognis_memory.stores.opensearch.documents import MEMORY_FIELDS, SEARCH_TEXT
from cognis_memory.stores.opensearch.keyword_index import IndexOp, doc_version_current
from tests.store_kinds import os_client, unique_prefix

pytestmark = pytest.mark.integration

OWNER = Owner("acme", "maya")
AT = datetime(2023, 5, 8, 12, tzinfo=UTC)
YESTERDAY = {"text": "yesterday", "date": "7 May 2023", "start": "2023-05-07T00:00:00+00:00",
             "end": "2023-05-08T00:00:00+00:00", "granularity": "day"}  # fmt: skip


def _raw(content: str, **fields) -> Memory:
    return Memory(tenant_id=OWNER.tenant_id, user_id=OWNER.user_id, content=content, kind=MemoryKind.RAW,
                  category=Category.HOBBIES, speaker="Maya", message_time=AT, **fields)  # fmt: skip


def _index(url: str, prefix: str) -> OpenSearchKeywordIndex:
    return OpenSearchKeywordIndex(
        os_client(url), index_prefix=prefix, replicas=0, refresh=True, search_timeout_s=10.0, write_timeout_s=10.0
    )


async def test_an_index_written_before_search_text_keeps_finding_its_documents(opensearch_server) -> None:
    prefix = unique_prefix("st")
    before = _index(opensearch_server.url, prefix)
    # the index as the release before created it: no search_text in the mapping, content holding the text
    before_mapping = {k: v for k, v in MEMORY_FIELDS.items() if k != SEARCH_TEXT}
    before.index_body = lambda: {  # type: ignore[method-assign]
        "settings": {"number_of_replicas": 0},
        "mappings": {"dynamic": "strict", "properties": before_mapping},
    }
    old = _raw("Maya: I went hiking yesterday [7 May 2023]")
    old_doc = {k: v for k, v in before.document(old).items() if k != SEARCH_TEXT}
    await before.ensure_index()
    assert (await before.apply([IndexOp("index", old.id, doc_version_current(1), old_doc)]))[0].ok
    await before.close()

    index = _index(opensearch_server.url, prefix)  # this release opens it: the field is added
    await index.ensure_index()
    new = _raw("I went climbing yesterday", time_expressions=[YESTERDAY])
    assert index.document(new)[SEARCH_TEXT] == "Maya: I went climbing yesterday [7 May 2023]"
    assert (await index.apply([IndexOp("index", new.id, doc_version_current(1), index.document(new))]))[0].ok
    flt = SearchFilter(OWNER)

    async def found(text: str) -> list[str]:
        return [i for i, _ in await index.search(flt, text, limit=5)]

    assert await found("hiking") == [old.id]  # by the content of the document written before
    assert await found("climbing") == [new.id]
    assert set(await found("7 May 2023")) == {old.id, new.id}  # the date: in old content, in new search text
    assert set(await found("Maya")) == {old.id, new.id}
    await index.close()
