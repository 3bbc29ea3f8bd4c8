"""Speaker names that are ordinary words (issue 11, item 11).

Will, May and Mark are people's names and English words; ``user`` and ``assistant`` are the
speakers ingest records for messages that name none. A query word is a speaker name only
where the query uses it as a name; elsewhere it stays in the query and boosts nobody.
"""

from __future__ import annotations

from datetime import UTC, datetime

from cognis_memory.domain import Memory, Owner
from cognis_memory.retrieval.query_analysis import analyze_query, find_names, name_candidates, strip_names
from cognis_memory.retrieval.recipes import RECIPES
from cognis_memory.retrieval.speakers import SpeakerDirectory, speaker_name
from cognis_memory.service import MessageBody

T = "acme"
NOW = datetime(2023, 6, 15, 12, tzinfo=UTC)
KNOWN = ["Will", "May", "Mark"]


def spans(q: str):
    return analyze_query(q, NOW, default_window_days=30).spans


def test_ordinary_words_are_not_names() -> None:
    for q in ("What will I cook next week?", "What may I bring to the party?", "Did I mark the exam papers?",
              "Will I need a visa for Peru?", "May I ask what my sister's address is?"):  # fmt: skip
        assert find_names(q, KNOWN, spans(q)) == [], q
        assert strip_names(q, KNOWN, spans(q)) == q, q


def test_a_month_is_not_a_name() -> None:
    q = "What did I plant in May?"
    assert find_names(q, KNOWN, spans(q)) == []
    assert "May" not in name_candidates(q, spans(q))


def test_names_used_as_names_are_found_and_stripped() -> None:
    q = "What did Will say about May's garden?"
    assert find_names(q, KNOWN, spans(q)) == ["Will", "May"]
    assert strip_names(q, KNOWN, spans(q)) == "What did say about garden?"
    q = "Will Mark come to dinner?"  # the opening modal stays, the name goes
    assert find_names(q, KNOWN, spans(q)) == ["Mark"]
    assert strip_names(q, KNOWN, spans(q)) == "Will come to dinner?"
    assert name_candidates("What did Will say?") == ["Will"]


def test_role_speakers_are_not_names() -> None:
    def mem(speaker: str, role: str) -> Memory:
        return Memory(tenant_id=T, user_id="u", content="x", category="emotional",  # type: ignore[arg-type]
                      speaker=speaker, metadata={"role": role})  # fmt: skip

    assert speaker_name(mem("user", "user")) is None
    assert speaker_name(mem("assistant", "assistant")) is None
    assert speaker_name(mem("note", "assistant")) is None  # a label, not written as a name
    assert speaker_name(mem("Will", "user")) == "Will"
    directory = SpeakerDirectory()
    owner = Owner(T, "u")
    directory.observe(owner, [mem("user", "user"), mem("assistant", "assistant"), mem("May", "user")])
    assert directory.known(owner) == ["May"]


async def _history(svc) -> None:
    t = datetime(2023, 5, 2, 18, tzinfo=UTC)
    await svc.add_messages(T, "u", [
        MessageBody(content="Next week I will cook a mushroom risotto for the book club", timestamp=t),
        MessageBody(content="Sounds lovely, risotto needs patience", role="assistant", timestamp=t),
        MessageBody(content="I finally fixed the garden fence", speaker="Will", timestamp=t),
        MessageBody(content="The tomatoes are growing well this year", speaker="May", timestamp=t),
        MessageBody(content="I passed my driving test", speaker="Mark", timestamp=t),
    ])  # fmt: skip


async def test_search_keeps_ordinary_words_and_boosts_nobody(make_service) -> None:
    svc = await make_service()
    await _history(svc)
    # any search lets the directory see the speakers of its candidates (Will, May, Mark, user, assistant)
    await svc.search(T, "u", "fence tomatoes risotto driving test", config=RECIPES["default"], now=NOW)
    for q in ("What will I cook next week?", "what may the user cook?", "What did the assistant say about risotto?"):
        resp = await svc.search(T, "u", q, config=RECIPES["default"], explain=True, now=NOW)
        assert resp.explain is not None
        assert resp.explain["analysis"]["speaker_names"] == [], q
        assert resp.explain["analysis"]["search_text"] == q, q
    resp = await svc.search(T, "u", "What will I cook next week?", config=RECIPES["default"], now=NOW)
    assert "risotto" in resp.hits[0].memory.content


async def test_a_name_that_is_a_word_still_works_as_a_name(make_service) -> None:
    svc = await make_service()
    await _history(svc)
    named = await svc.search(T, "u", "What did Will fix?", config=RECIPES["default"], explain=True, now=NOW)
    assert named.explain is not None and named.explain["analysis"]["speaker_names"] == ["Will"]
    assert named.explain["analysis"]["search_text"] == "What did fix?"
    top = named.hits[0].memory
    assert (top.speaker, top.content) == ("Will", "I finally fixed the garden fence")
