"""Role prior (issue 12): a first-person question ranks the user's turns up, a question about the
assistant's own words ranks the assistant's turns up, and turns that carry a speaker name are left alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cognis_memory.domain import Memory
from cognis_memory.retrieval.query_analysis import query_role
from cognis_memory.retrieval.role_prior import role_boosted, role_of
from cognis_memory.service import MessageBody

T = "acme"
DAY = datetime(2024, 3, 4, 19, tzinfo=UTC)


def test_the_question_s_grammatical_person_names_the_role() -> None:
    for q in ("Where do I live now?", "What's my favourite food?", "Can you remind me what I said about dogs?",
              "Do you remember my sister's name?", "Could you tell me which car I drive?"):  # fmt: skip
        assert query_role(q) == "user", q
    for q in ("What did you recommend for my trip?", "Which hotel did you suggest?",
              "I'm checking our last chat: can you remind me of the book you mentioned?"):  # fmt: skip
        assert query_role(q) == "assistant", q
    for q in ("Where does Maya live?", "What did Priya research?", "Which city hosts the festival?"):
        assert query_role(q) is None, q


def _mem(mid: str, role: str | None, speaker: str | None) -> Memory:
    return Memory(tenant_id=T, user_id="u", content=mid, category="personal_details",  # type: ignore[arg-type]
                  speaker=speaker, metadata={"role": role} if role else {}, id=mid)  # fmt: skip


def test_only_turns_whose_speaker_is_their_role_take_part() -> None:
    mems = {m.id: m for m in (_mem("u", "user", "user"), _mem("a", "assistant", "assistant"),
                              _mem("named", "user", "Maya"), _mem("none", "user", None),
                              _mem("fact", None, "user"), _mem("named-fact", None, "Maya"))}  # fmt: skip
    expected = {"u": "user", "a": "assistant", "named": None, "none": "user", "fact": "user", "named-fact": None}
    assert {d: role_of(m) for d, m in mems.items()} == expected
    boosted = role_boosted({d: 1.0 for d in mems}, mems, "user", 0.5)
    assert boosted == {"u": 1.5, "a": 1.0, "named": 1.0, "none": 1.5, "fact": 1.5, "named-fact": 1.0}


async def test_first_person_questions_find_the_user_s_turn_before_the_assistant_s_echo(make_service) -> None:
    svc = await make_service()
    turns = [("user", "We adopted a rescue greyhound last spring and named him Pixel."),
             ("assistant", "Greyhounds make lovely pets! What is your dog's name, and how is he settling in?"),
             ("user", "My sister keeps asking for photos of him."),
             ("assistant", "You could start a little photo album of your dog's first year.")]  # fmt: skip
    msgs = [
        MessageBody(content=text, role=role, timestamp=DAY + timedelta(minutes=i))
        for i, (role, text) in enumerate(turns)
    ]
    await svc.add_messages(T, "u", msgs)
    now = DAY + timedelta(days=3)
    res = await svc.search(T, "u", "What is my dog's name?", now=now)
    assert "Pixel" in res.hits[0].memory.content
    plain = await svc.search(T, "u", "What is my dog's name?", now=now, recipe="default-role_prior")
    assert "Pixel" not in plain.hits[0].memory.content  # without the prior the assistant's question comes first
