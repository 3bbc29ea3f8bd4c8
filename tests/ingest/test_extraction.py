"""Stage 3 (context-aware extraction) and durable jobs, through a real HTTP LLM endpoint.

The LLM is the real OpenAICompatibleLLM talking to a scripted chat-completions server on
127.0.0.1 (tests/llm_server.py): the scripted "model" extracts facts from known sentences
and decides ADD / UPDATE / DELETE / NONE by looking at the aliases the pipeline showed it.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from cognis_memory.domain import JobStatus, MemoryKind, Owner
from cognis_memory.providers.llms import OpenAICompatibleLLM
from cognis_memory.service import MessageIn
from tests.llm_server import Reply, ScriptedLLMServer

TS = datetime(2024, 3, 10, 10, tzinfo=UTC)

FACTS = {
    "moved to Berlin": ("Dana lives in Berlin", "personal_details"),
    "moved to Lisbon": ("Dana lives in Lisbon", "personal_details"),
    "got a dog": ("Dana has a dog named Pixel", "relationships"),
    "gave the dog away": ("Dana no longer has a dog", "relationships"),
    "love green tea": ("Dana loves green tea", "preferences"),
    "trip to Japan": ("Dana is planning a trip to Japan", "travel"),
}


def parse_decide_prompt(prompt: str) -> list[tuple[str, dict[str, str]]]:
    """[(fact text, {alias: memory text})] from the pipeline's decide prompt."""
    out: list[tuple[str, dict[str, str]]] = []
    for line in prompt.splitlines():
        if m := re.match(r"fact (\d+): (.*)", line):
            out.append((m.group(2), {}))
        elif m := re.match(r"\s+- (m\d+): (.*)", line):
            out[-1][1][m.group(1)] = m.group(2)
    return out


def model(policy: dict[str, object] | None = None):
    """A scripted model: extraction by key phrase; decisions by content rules or ``policy``."""
    policy = {} if policy is None else policy

    def respond(schema: str, body: dict) -> dict:
        prompt = body["messages"][-1]["content"]
        if schema == "extracted_facts":
            if "fail" in policy:
                raise Reply(500, '{"error": "boom"}')
            facts = [
                {"content": fact, "category": cat, "scope": "USER", "event_date": None}
                for key, (fact, cat) in FACTS.items()
                if key in prompt
            ]
            return {"facts": facts}
        assert schema == "memory_decisions"
        if "malformed" in policy:
            raise Reply(200, '{"choices": [{"message": {"content": "not json at all"}}]}')
        decisions = []
        for i, (fact, context) in enumerate(parse_decide_prompt(prompt)):
            d = {"fact": i, "action": "ADD", "target": None, "content": None, "category": None}
            if "alias" in policy:
                d.update(action="UPDATE", target=policy["alias"], content=fact)
            elif fact in context.values():
                d["action"] = "NONE"
            elif "lives in" in fact:
                old = [a for a, text in context.items() if "lives in" in text]
                if old:
                    d.update(action="UPDATE", target=old[0], content=fact)
            elif "no longer has a dog" in fact:
                old = [a for a, text in context.items() if "has a dog" in text]
                if old:
                    d.update(action="DELETE", target=old[0])
            d.update(policy.get("patch", {}))
            decisions.append(d)
        return {"decisions": decisions}

    return respond


@pytest.fixture
def llm_server():
    policy: dict[str, object] = {}
    with ScriptedLLMServer(model(policy)) as server:
        server.policy = policy
        yield server


async def _facts(svc, owner: Owner) -> list:
    return [
        m for m in await svc.stores.memories.list_memories(owner, include_history=True) if m.kind is MemoryKind.FACT
    ]


async def test_add_then_update_writes_a_version_chain(make_service, llm_server) -> None:
    svc = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"))
    owner = Owner("acme", "dana")
    r1 = await svc.add_messages(
        "acme", "dana", [MessageIn("I moved to Berlin last month", speaker="Dana", timestamp=TS)]
    )
    assert r1.extraction["ADD"] == 1
    r2 = await svc.add_messages(
        "acme", "dana", [MessageIn("I moved to Lisbon!", speaker="Dana", timestamp=TS + timedelta(days=30))]
    )
    assert r2.extraction["UPDATE"] == 1 and r2.extraction["ADD"] == 0
    facts = await _facts(svc, owner)
    assert len(facts) == 2
    old = next(f for f in facts if "Berlin" in f.content)
    new = next(f for f in facts if "Lisbon" in f.content)
    assert (old.version, old.is_current) == (1, False)
    assert (new.version, new.is_current, new.replaces_id) == (2, True, old.id)
    assert set(new.source_message_ids) == {r1.messages[0].id, r2.messages[0].id}
    # the decide prompt showed the Berlin memory under an alias, never its real id
    decide_prompt = llm_server.prompts("memory_decisions")[-1]
    assert "Dana lives in Berlin" in decide_prompt and old.id not in decide_prompt
    # the extraction prompt carries the resolved absolute date
    assert "last month [February 2024]" in llm_server.prompts("extracted_facts")[0]
    # history queries return the chain
    res = await svc.search("acme", "dana", "where did Dana live before?", kinds=["fact"])
    assert res.analysis.history
    hit = next(h for h in res.hits if h.memory.id == new.id)
    assert [m.content for m in hit.history] == ["Dana lives in Berlin"]


async def test_update_then_delete_and_repeated_fact_is_none(make_service, llm_server) -> None:
    svc = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"))
    owner = Owner("acme", "dana")
    await svc.add_messages("acme", "dana", [MessageIn("I got a dog yesterday", speaker="Dana", timestamp=TS)])
    again = await svc.add_messages("acme", "dana", [MessageIn("Remember, I got a dog", speaker="Dana", timestamp=TS)])
    assert again.extraction["NONE"] == 1
    gone = await svc.add_messages("acme", "dana", [MessageIn("I gave the dog away", speaker="Dana", timestamp=TS)])
    # "Dana no longer has a dog" is a new fact whose context holds "has a dog": DELETE it
    assert gone.extraction["DELETE"] == 1
    facts = await _facts(svc, owner)
    dog = [f for f in facts if "Pixel" in f.content]
    assert len(dog) == 2  # version 1 and its tombstone
    assert [(f.version, f.is_current, f.deleted) for f in sorted(dog, key=lambda f: f.version)] == [
        (1, False, False),
        (2, False, True),
    ]
    res = await svc.search("acme", "dana", "Does Dana have a dog named Pixel?", kinds=["fact"])
    assert all("Pixel" not in h.memory.content for h in res.hits)


async def test_invented_alias_touches_nothing(make_service, llm_server) -> None:
    svc = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"))
    other = await make_service(llm=None, path=svc.settings.resolved_sqlite_path.with_name("other.db"))
    await other.add_messages("acme", "eve", [MessageIn("I love green tea", timestamp=TS)])
    await svc.add_messages("acme", "dana", [MessageIn("I love green tea", speaker="Dana", timestamp=TS)])
    before = [
        (m.id, m.version, m.is_current)
        for m in await svc.stores.memories.list_memories(Owner("acme", "dana"), include_history=True)
    ]
    llm_server.policy["alias"] = "m99"
    r = await svc.add_messages("acme", "dana", [MessageIn("I love green tea so much", speaker="Dana", timestamp=TS)])
    assert r.extraction["rejected_aliases"] == 1 and r.extraction["UPDATE"] == 0
    after = await svc.stores.memories.list_memories(Owner("acme", "dana"), include_history=True)
    assert [(m.id, m.version, m.is_current) for m in after if m.kind is MemoryKind.FACT] == [
        t for t in before if t[0] in {m.id for m in after if m.kind is MemoryKind.FACT}
    ]


async def test_context_shows_only_this_users_memories(make_service, llm_server) -> None:
    svc = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"))
    await svc.add_messages("acme", "mallory", [MessageIn("I moved to Berlin", speaker="Dana", timestamp=TS)])
    await svc.add_messages("other-tenant", "dana", [MessageIn("I moved to Berlin", speaker="Dana", timestamp=TS)])
    r = await svc.add_messages("acme", "dana", [MessageIn("I moved to Lisbon", speaker="Dana", timestamp=TS)])
    assert r.extraction["ADD"] == 1  # nothing of the other users was offered for UPDATE
    prompt = llm_server.prompts("memory_decisions")[-1]
    assert "Berlin" not in prompt


async def test_async_job_survives_a_restart(make_service, llm_server, tmp_path) -> None:
    db = tmp_path / "durable.db"
    first = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"), path=db)
    r = await first.add_messages(
        "acme", "dana", [MessageIn("We are planning a trip to Japan", speaker="Dana", timestamp=TS)], background=True
    )
    assert r.job is not None and r.job.status is JobStatus.QUEUED
    # the raw message is searchable at once, before extraction ran
    hits = (await first.search("acme", "dana", "trip to Japan")).hits
    assert hits and hits[0].memory.kind is MemoryKind.RAW
    await first.close()  # the process "stops" before the job ran

    second = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"), path=db)
    assert (await second.get_job("acme", "dana", r.job.id)).status is JobStatus.QUEUED
    assert await second.worker.drain() == 1
    job = await second.get_job("acme", "dana", r.job.id)
    assert job.status is JobStatus.DONE and job.result["ADD"] == 1
    assert [f.content for f in await _facts(second, Owner("acme", "dana"))] == ["Dana is planning a trip to Japan"]


def dead_letter_metrics(captured) -> list[dict]:
    """The EMF blobs that carry JobsDeadLettered, the metric the dead-letter alarm watches."""
    return [
        b for b in captured.metric_blobs()
        if any(m["Name"] == "JobsDeadLettered" for d in b["_aws"]["CloudWatchMetrics"] for m in d["Metrics"])
    ]  # fmt: skip


async def test_llm_errors_retry_with_backoff_then_dead_letter(make_service, llm_server, captured_telemetry) -> None:
    svc = await make_service(
        llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"), job_max_attempts=3, job_backoff_s=0.0
    )
    llm_server.policy["fail"] = True
    r = await svc.add_messages("acme", "dana", [MessageIn("I got a dog", timestamp=TS)], background=True)
    job = await svc.worker.run_once()
    assert job is not None and job.status is JobStatus.FAILED and job.attempts == 1
    assert "llm" in job.last_error
    assert dead_letter_metrics(captured_telemetry) == []  # a failed attempt is not a dead letter
    await svc.worker.drain()
    dead = await svc.get_job("acme", "dana", r.job.id)
    assert dead.status is JobStatus.DEAD and dead.attempts == 3
    # the worker's own EMF line, in the shape the alarm (infra/cognis_infra/observability.py) reads
    (blob,) = dead_letter_metrics(captured_telemetry)
    (directive,) = blob["_aws"]["CloudWatchMetrics"]
    assert (directive["Namespace"], directive["Dimensions"]) == ("CognisMemory", [["service"]])
    assert blob["JobsDeadLettered"] in (1, 1.0, [1.0]) and blob["service"] == "cognis-memory"
    # listed with the tenant's dead letters
    assert [(j.id, j.user_id) for j in await svc.list_jobs("acme", status="dead")] == [(r.job.id, "dana")]
    assert await svc.list_jobs("globex", status="dead") == []
    # the raw message was never lost
    assert (await svc.search("acme", "dana", "dog")).hits


async def test_backoff_delays_the_next_attempt(make_service, llm_server) -> None:
    svc = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"), job_backoff_s=60.0)
    llm_server.policy["fail"] = True
    await svc.add_messages("acme", "dana", [MessageIn("I got a dog", timestamp=TS)], background=True)
    job = await svc.worker.run_once()
    assert job.status is JobStatus.FAILED
    assert job.next_attempt_at >= datetime.now(UTC) + timedelta(seconds=50)
    assert await svc.worker.run_once() is None  # not due yet


async def test_malformed_decisions_fail_the_job_but_keep_the_message(make_service, llm_server) -> None:
    svc = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"), job_backoff_s=0.0)
    llm_server.policy["malformed"] = True
    r = await svc.add_messages("acme", "dana", [MessageIn("I got a dog", timestamp=TS)], background=True)
    job = await svc.worker.run_once()
    assert job.status is JobStatus.FAILED and "LLMOutputError" in job.last_error
    assert not await _facts(svc, Owner("acme", "dana"))
    raw = await svc.stores.memories.list_memories(Owner("acme", "dana"))
    assert [m.source_message_ids for m in raw] == [[r.messages[0].id]]


@pytest.mark.parametrize(
    ("patch", "path"),
    [
        ({"action": "MERGE"}, r"\$\.decisions\[0\]\.action: Input should be 'ADD'"),
        ({"fact": "0"}, r"\$\.decisions\[0\]\.fact: Input should be a valid integer"),
        ({"reason": "new"}, r"\$\.decisions\[0\]\.reason: Extra inputs are not permitted"),
        ({"category": "food"}, r"\$\.decisions\[0\]\.category: Input should be 'personal_details'"),
    ],
    ids=["bad-enum", "wrong-type", "extra-key", "bad-category"],
)
async def test_a_decision_outside_the_schema_fails_the_job(make_service, llm_server, patch, path) -> None:
    svc = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"), job_backoff_s=0.0)
    llm_server.policy["patch"] = patch
    await svc.add_messages("acme", "dana", [MessageIn("I got a dog", timestamp=TS)], background=True)
    job = await svc.worker.run_once()
    assert job.status is JobStatus.FAILED and "LLMOutputError" in job.last_error
    assert re.search(path, job.last_error), job.last_error
    assert not await _facts(svc, Owner("acme", "dana"))


async def test_sync_mode_llm_failure_is_a_retryable_error_after_storing(make_service, llm_server) -> None:
    from cognis_memory.errors import DependencyUnavailableError

    svc = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"))
    llm_server.policy["fail"] = True
    with pytest.raises(DependencyUnavailableError):
        await svc.add_messages("acme", "dana", [MessageIn("I got a dog", timestamp=TS, client_message_id="c-1")])
    # stage 1 happened: a retry with the same client id does not duplicate the message
    llm_server.policy.clear()
    r = await svc.add_messages("acme", "dana", [MessageIn("I got a dog", timestamp=TS, client_message_id="c-1")])
    assert r.created == [False]
    assert len(await svc.stores.memories.list_memories(Owner("acme", "dana"))) == 1
