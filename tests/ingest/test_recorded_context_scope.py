"""A message sent for its session only (CONTEXT scope) with a real model's recorded answers (Qwen2.5-Coder
1.5B on llama-server, 7 December 2026; recorded by RecordingLLM over the OpenAI-compatible provider with
:func:`send`, replayed by ReplayLLM: the pipeline is real, the answers are the model's own).

Two sessions of one user: "I live in Braga and I work as a nurse." (session s1, USER) and, in session
trip-9, "For this trip I'm only packing a carry-on bag." sent with CONTEXT scope. The model drew
"Ines' location: for this trip" from the second, under the attribute of the USER fact "Ines' location:
Braga". A fact's scope is its message's, so the new fact is CONTEXT, in trip-9; and a CONTEXT fact never
replaces what every session sees, so "Ines' location: Braga" is not even a candidate
(``overruled["context_fact_on_wider_memory"]``): it stays current, and no other session sees the trip.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from cognis_dev.llm_recording import ReplayLLM

from cognis_memory.domain import JobStatus, MemoryKind, Owner, Scope
from cognis_memory.service import FilterRequest, MemoryService, MessageBody

RECORDING = Path(__file__).parent / "recorded" / "qwen2.5-coder-1.5b-context-scope.jsonl.gz"
OWNER = Owner("demo", "ines")
MESSAGES = [
    MessageBody(content="I live in Braga and I work as a nurse.", speaker="Ines", session_id="s1",
                timestamp=datetime(2025, 5, 1, 9, tzinfo=UTC)),
    MessageBody(content="For this trip I'm only packing a carry-on bag.", speaker="Ines", session_id="trip-9",
                scope=Scope.CONTEXT, timestamp=datetime(2025, 5, 10, 9, tzinfo=UTC)),
]  # fmt: skip


async def send(svc: MemoryService) -> str:
    """The two messages as one background request, extracted by the worker; the job's id."""
    res = await svc.add_messages(OWNER.tenant_id, OWNER.user_id, MESSAGES, background=True)
    assert await svc.worker.drain() == 1
    assert res.job is not None
    return res.job.id


async def _seen_from(svc: MemoryService, session_id: str) -> list[str]:
    found = await svc.search(
        OWNER.tenant_id, OWNER.user_id, "What luggage is Ines packing?", filter=FilterRequest(session_id=session_id)
    )
    return [h.memory.content for h in found.hits]


async def test_a_fact_of_a_session_only_message_stays_in_that_session(make_service) -> None:
    svc = await make_service(llm=ReplayLLM(RECORDING))
    job = await svc.get_job(OWNER.tenant_id, OWNER.user_id, await send(svc))
    assert job.status is JobStatus.DONE, job.result
    facts = {m.content: m for m in await svc.stores.memories.list_memories(OWNER) if m.kind is MemoryKind.FACT}
    trip = facts["Ines' location: for this trip"]
    assert (trip.scope, trip.session_id) == (Scope.CONTEXT, "trip-9")
    braga = facts["Ines' location: Braga"]
    assert (braga.scope, braga.version, braga.is_current) == (Scope.USER, 1, True)
    assert facts["Ines' occupation: nurse"].scope is Scope.USER
    assert job.result["answers"]["overruled"] == {"context_fact_on_wider_memory": 1}
    assert job.result["change_checks"] == 0

    assert trip.content in await _seen_from(svc, "trip-9")
    elsewhere = await _seen_from(svc, "s1")
    assert "Ines' location: Braga" in elsewhere and not any("trip" in text for text in elsewhere)
