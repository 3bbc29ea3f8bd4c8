"""The extraction path against a real model: Qwen2.5-Coder 0.5B Instruct on both local servers.

A scripted model proves plumbing; these tests show the provider and the pipeline surviving a real one
(docs/local-llm.md has the harness). Kept to a handful of short calls, temperature 0: CI time matters.
What they hold the real model to is what the system guarantees, whatever the model writes: the
structured-output mode each server accepts is found, every answer is usable (as given or after repair),
a stored message is answered as stored, and what is kept was in the answer.

The model's own quality (which facts, which decisions) is measured by the benchmark with the 1.5B model
(docs/benchmarks.md, "Changing facts with a real LLM"); its answers, recorded, are replayed by the CI
quality gate (tests/bench/test_quality_gate.py).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cognis_memory.domain import MemoryKind, Message, Owner
from cognis_memory.ingest.answer_repair import AnswerReport, ask, read_facts
from cognis_memory.ingest.answers import ExtractedFacts
from cognis_memory.ingest.extraction import EXTRACT_SYSTEM, numbered_transcript
from cognis_memory.ingest.resolution import resolve_message
from cognis_memory.providers.llms import OpenAICompatibleLLM
from cognis_memory.service import MessageBody

TS = datetime(2025, 3, 17, 9, 30, tzinfo=UTC)
LINES = [
    ("Dana", "user", "Big news: I moved to Lisbon last weekend, the flat has a balcony."),
    ("Sol", "assistant", "Congratulations! How is the new job going?"),
    ("Dana", "user", "I started as a nurse at the city hospital on Monday."),
]


def _transcript() -> tuple[str, int]:
    resolved = [
        resolve_message(Message("acme", "dana", text, TS + timedelta(minutes=i), speaker=speaker, role=role))
        for i, (speaker, role, text) in enumerate(LINES)
    ]
    text, numbered = numbered_transcript(resolved)
    return text, len(numbered)


async def _extract(llm: OpenAICompatibleLLM) -> tuple[list, AnswerReport]:
    text, n = _transcript()
    report = AnswerReport()
    facts = await ask(
        llm,
        system=EXTRACT_SYSTEM,
        prompt=text,
        response_model=ExtractedFacts,
        schema_name="extracted_facts",
        read=lambda value, notes: read_facts(value, notes, messages=n),
        report=report,
    )
    return facts, report


@pytest.mark.parametrize(
    ("server", "mode", "expected_mode"),
    [
        ("local_llm", "auto", "json_object"),  # llama-cpp-python refuses json_schema: auto steps down
        ("local_llama_server", "auto", "json_schema"),
        ("local_llama_server", "prompt", "prompt"),
    ],
    ids=["llama-cpp-python-auto", "llama-server-json_schema", "llama-server-prompt"],
)
async def test_a_real_model_answers_usably_in_each_structured_output_mode(
    request: pytest.FixtureRequest, server: str, mode: str, expected_mode: str
) -> None:
    srv = request.getfixturevalue(server)
    llm = OpenAICompatibleLLM(srv.base_url, srv.model, timeout_s=300, max_tokens=400, structured_output=mode)  # type: ignore[arg-type]
    try:
        facts, report = await _extract(llm)
    finally:
        await llm.aclose()
    assert llm.mode == expected_mode
    assert report.unusable == 0 and report.asked == report.valid + report.repaired + report.retried
    print(f"{server}/{mode}: {report.as_dict()} facts={[f.content for f in facts]}")
    for f in facts:  # whatever was kept was said: every fact cites messages that exist
        assert f.content and all(0 <= i < len(LINES) for i in f.sources)


async def test_the_pipeline_with_a_real_model_stores_and_extracts(make_service, local_llama_server) -> None:
    llm = OpenAICompatibleLLM(local_llama_server.base_url, local_llama_server.model, timeout_s=300, max_tokens=400)
    svc = await make_service(llm=llm)
    try:
        msgs = [
            MessageBody(content=text, speaker=speaker, role=role, timestamp=TS + timedelta(minutes=i))
            for i, (speaker, role, text) in enumerate(LINES)
        ]
        r = await svc.add_messages("acme", "dana", msgs)
        assert r.created == [True, True, True] and len(r.raw_memories) == 3
        # a stored message answers as stored: extracted now, or pending in a job, never an error
        assert r.facts in ("extracted", "pending"), r
        if r.facts == "extracted":
            answers = r.extraction["answers"]
            assert answers["unusable"] == 0
            facts = [
                m for m in await svc.stores.memories.list_memories(Owner("acme", "dana")) if m.kind is MemoryKind.FACT
            ]
            assert len(facts) == r.extraction["ADD"]
            ids = {m.id for m in r.messages}
            assert all(set(f.source_message_ids) <= ids for f in facts)
            print("real-model facts:", [f.content for f in facts], answers)
    finally:
        await llm.aclose()
