"""A message sent for its session only (CONTEXT scope) with a real model's recorded answers (Qwen2.5-Coder
1.5B on llama-server, 6 December 2026, recorded again on 7 December on the pinned test stack; recorded by RecordingLLM over the OpenAI-compatible provider with
:func:`send`, replayed by ReplayLLM: the pipeline is real, the answers are the model's own).

Two sessions of one user: "I live in Braga and I work as a nurse." (session s1, USER) and, in session
trip-9, "For this trip I'm only packing a carry-on bag." sent with CONTEXT scope. The model extracted
"Ines is packing a carry-on bag for this trip." with scope USER (the extract prompt asks for the scope and
the model may choose either), so the fact of a session-only message was visible from every other
session, though its raw memory was not. A fact drawn from CONTEXT messages alone now stays CONTEXT, in
their session (``overruled["scope_of_context_messages"]``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from cognis_dev.llm_recording import ReplayLLM

from cognis_memory.domain import JobStatus, MemoryKind, Owner, Scope
from cognis_memory.service import MemoryFilter, MemoryService, MessageBody

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
        OWNER.tenant_id, OWNER.user_id, "What luggage is Ines packing?", filter=MemoryFilter(session_id=session_id)
    )
    return [h.memory.content for h in found.hits]


async def test_a_fact_of_a_session_only_message_stays_in_that_session(make_service) -> None:
    svc = await make_service(llm=ReplayLLM(RECORDING))
    job = await svc.get_job(OWNER.tenant_id, OWNER.user_id, await send(svc))
    assert job.status is JobStatus.DONE, job.result
    facts = {m.content: m for m in await svc.stores.memories.list_memories(OWNER) if m.kind is MemoryKind.FACT}
    packing = facts["Ines is packing a carry-on bag for this trip."]
    assert (packing.scope, packing.session_id) == (Scope.CONTEXT, "trip-9")
    assert all(m.scope is Scope.USER for text, m in facts.items() if "Braga" in text or "nurse" in text)

    assert packing.content in await _seen_from(svc, "trip-9")
    elsewhere = await _seen_from(svc, "s1")
    assert "Ines lives in Braga" in elsewhere and not any("carry-on" in text for text in elsewhere)
    assert job.result["answers"]["overruled"]["scope_of_context_messages"] == 1
