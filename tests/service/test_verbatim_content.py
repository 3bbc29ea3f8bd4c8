"""What was said stays as said (issue 31): a message's text is stored, returned, searched and exported
byte for byte, while its speaker and resolved dates are fields that keyword search, the embedding and the
context block still use, on the embedded and the dual store (:mod:`tests.store_kinds`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
import pytest_asyncio

from cognis_memory.config import Settings
from cognis_memory.domain import MemoryKind, Owner
from cognis_memory.search_filter import SearchFilter
from cognis_memory.search_text import search_text
from cognis_memory.service import MessageBody
from tests.reliability.helpers import make_service
from tests.store_kinds import KINDS

pytestmark = pytest.mark.integration

TENANT = "acme"
#: spaces at both ends, a line break, a tab, quotes, brackets, a colon and characters beyond ASCII: none of it
#: may be rewritten, and nothing (no speaker, no date note) may be added
SAID = '  Went hiking with Ines yesterday 🥾\n\t"best trail" [sic]: ünïcödé ok  '
SAID_AT = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


@pytest_asyncio.fixture(params=["embedded", "dual"])
async def service(request, tmp_path, embedder) -> Any:
    handle = KINDS[request.param].new(request, tmp_path, embedder.dim, Settings().encoder.dim_short)
    await handle.store.open()
    svc = make_service(handle.store, embedder)
    await svc.start()
    yield svc
    await svc.close()
    await handle.store.close()


async def _said_by_maya(svc: Any, user: str) -> str:
    """Maya's message and, as distractors, two of Tom's (one about hiking too, said on another day);
    returns the id of Maya's raw memory."""
    result = await svc.add_messages(
        TENANT,
        user,
        [
            MessageBody(content=SAID, speaker="Maya", timestamp=SAID_AT, session_id="s1"),
            MessageBody(
                content="I went hiking too, up the ridge", speaker="Tom", timestamp=datetime(2023, 4, 2, tzinfo=UTC)
            ),
            MessageBody(content="Our cat sleeps all day", speaker="Tom", timestamp=datetime(2023, 4, 3, tzinfo=UTC)),
        ],
    )
    return result.raw_memories[0].id


async def test_content_round_trips_byte_for_byte_through_add_get_search_and_export(service: Any) -> None:
    svc = service
    memory_id = await _said_by_maya(svc, "u-bytes")
    got = await svc.get_memory(TENANT, "u-bytes", memory_id)
    assert got.content == SAID and got.kind is MemoryKind.RAW
    assert got.speaker == "Maya"
    assert got.time_expressions == [
        {"text": "yesterday", "date": "7 May 2023", "start": "2023-05-07T00:00:00+00:00",
         "end": "2023-05-08T00:00:00+00:00", "granularity": "day"}
    ]  # fmt: skip
    found = await svc.search(TENANT, "u-bytes", "the best hiking trail", limit=5)
    assert [h.memory.content for h in found.hits if h.memory.id == memory_id] == [SAID]
    exported = [m async for m in svc.export(TENANT, "u-bytes")]
    assert [m.content for m in exported if m.id == memory_id] == [SAID]
    assert [m.content.encode() for m in exported if m.id == memory_id] == [SAID.encode()]
    block, _ = await svc.prompt_block(TENANT, "u-bytes", "hiking trail")
    assert '"Maya" said: "Went hiking with Ines yesterday 🥾 \\"best trail\\" [sic]: ünïcödé ok"' in block.text
    assert '(dates: "yesterday" = 7 May 2023)' in block.text


async def test_the_absolute_date_and_the_speaker_find_a_memory_whose_text_has_neither(service: Any) -> None:
    """ "yesterday" said on 8 May 2023 is found by "7 May 2023", and Maya's message by "Maya", in the keyword
    index of the store and through the whole search, although neither is in the stored text."""
    svc = service
    memory_id = await _said_by_maya(svc, "u-find")
    assert "May" not in SAID and "Maya" not in SAID
    flt = SearchFilter(Owner(TENANT, "u-find"))
    by_date = await svc.stores.keywords.keyword_search(flt, "7 May 2023", limit=5)
    assert [s.memory.id for s in by_date] == [memory_id]
    by_speaker = await svc.stores.keywords.keyword_search(flt, "Maya", limit=5)
    assert [s.memory.id for s in by_speaker] == [memory_id]
    hits = (await svc.search(TENANT, "u-find", "Where did Maya go hiking on 7 May 2023?", limit=3)).hits
    assert hits[0].memory.id == memory_id and hits[0].memory.content == SAID


async def test_an_edit_drops_the_dates_of_the_old_text_and_is_searched_by_its_own(service: Any) -> None:
    svc = service
    memory_id = await _said_by_maya(svc, "u-edit")
    new = await svc.update_memory(TENANT, "u-edit", memory_id, content="I went climbing instead")
    assert new.content == "I went climbing instead" and new.time_expressions == []
    assert search_text(new) == "Maya: I went climbing instead"  # a first-person edit keeps its speaker
    flt = SearchFilter(Owner(TENANT, "u-edit"))
    assert [s.memory.id for s in await svc.stores.keywords.keyword_search(flt, "climbing Maya", limit=5)] == [new.id]
    assert await svc.stores.keywords.keyword_search(flt, "7 May 2023", limit=5) == []
