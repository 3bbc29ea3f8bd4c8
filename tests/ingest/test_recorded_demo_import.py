"""The README's demo import with a real model's recorded answers (Qwen2.5-Coder 1.5B on llama-server,
recorded again on 7 December 2026 on the pinned test stack, scripts/test-constraints.txt; recorded by
RecordingLLM, replayed by ReplayLLM: the pipeline is real, the answers are the model's own), and the
README's two searches on what it stored.

``examples/demo_conversation.jsonl`` is two sessions two weeks apart, sent as one request, as
``cognis-memory import`` sends it. What the model did, and what the pipeline must make of it:

* the request is extracted session by session: two extract calls, and the second session's facts are
  decided against the first session's (one decide call). Before, the whole file was one batch: no
  decide call was possible and "moved to Lisbon" never met the Porto fact;
* in that decide call the model answered fact 0 ("Maya moved to Lisbon last weekend") six times,
  UPDATE of every listed memory, each with the memory's own text. Read first-decision-wins, it retired
  "Maya works as a data analyst at Ribeira Logistics" in favour of the Lisbon move. A fact decided
  several ways is now an ADD: the job fact stays current, the move is kept beside the Porto fact;
* so with this model the demo's searches do not find what is true now: "Where does Maya live now?" ranks
  the Porto fact first and "Is Maya still vegetarian?" the vegetarian one (issue 30; README, "Changing
  facts", says so). The test holds these answers so that a change to them is seen.
"""

from __future__ import annotations

from pathlib import Path

from cognis_dev.llm_recording import ReplayLLM

from cognis_memory.cli.conversation_file import message_body_of, read_conversation
from cognis_memory.domain import JobStatus, MemoryKind, Owner

REPO = Path(__file__).resolve().parents[2]
RECORDING = Path(__file__).parent / "recorded" / "qwen2.5-coder-1.5b-demo-import.jsonl.gz"


async def test_the_demo_import_with_a_real_models_answers(make_service) -> None:
    llm = ReplayLLM(RECORDING)
    svc = await make_service(llm=llm)
    pairs = list(read_conversation(REPO / "examples" / "demo_conversation.jsonl", "demo-user"))
    messages = [message_body_of(i, item) for i, (_, item) in enumerate(pairs)]
    res = await svc.add_messages("demo", "demo-user", messages, background=True)
    assert await svc.worker.drain() == 1
    job = await svc.get_job("demo", "demo-user", res.job.id)
    assert job.status is JobStatus.DONE, job.result
    got = job.result
    assert got["sessions"] == 2 and got["answers"]["asked"] == 3  # extract, extract, decide
    assert got["answers"]["overruled"]["conflicting_decisions"] == 1
    assert (got["UPDATE"], got["DELETE"]) == (0, 0)
    facts = [m for m in await svc.stores.memories.list_memories(Owner("demo", "demo-user"), include_history=True)
             if m.kind is MemoryKind.FACT]  # fmt: skip
    current = {f.content for f in facts if f.is_current}
    assert all(f.is_current and f.version == 1 for f in facts)  # nothing was retired
    assert "Maya works as a data analyst at Ribeira Logistics, mostly forecasting shipping volumes." in current
    assert "Maya moved to Lisbon last weekend" in current
    # the second session's facts cite the second session's messages only
    second = {m.id for m, (_, item) in zip(res.messages, pairs, strict=True) if item["session_id"] == "session-2"}
    lisbon = next(f for f in facts if "Lisbon" in f.content)
    assert set(lisbon.source_message_ids) <= second

    home = await svc.search("demo", "demo-user", "Where does Maya live now?", limit=3)
    assert home.hits[0].memory.content == "Maya lives in Porto with her dog Biscuit, a very loud beagle."
    veg = await svc.search("demo", "demo-user", "Is Maya still vegetarian?", limit=3)
    assert [h.memory.content for h in veg.hits][:2] == [
        "Maya has been vegetarian since 2019.",
        "Maya is not vegetarian anymore",
    ]
