"""Stage 3 (fact extraction: each fact decided against the similar stored facts) and durable jobs,
through a real HTTP LLM endpoint.

The LLM is the real OpenAICompatibleLLM talking to a scripted chat-completions server on
127.0.0.1 (tests/llm_server.py): the scripted "model" extracts facts from known sentences
and decides ADD / UPDATE / DELETE / NONE by looking at the aliases the pipeline showed it.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from datetime import UTC, datetime, timedelta

import pytest

from cognis_memory.domain import JobStatus, MemoryKind, Owner, Scope
from cognis_memory.providers.llms import OpenAICompatibleLLM
from cognis_memory.service import MemoryFilter, MessageBody
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
            if "garbage" in policy:
                raise Reply(200, '{"choices": [{"message": {"content": "no idea, sorry"}}]}')
            facts = [
                {"content": fact, "category": cat, "scope": "USER", "event_date": None, "sources": [number]}
                for key, (fact, cat) in FACTS.items()
                for number, line in enumerate(prompt.splitlines(), start=1)
                if key in line
            ]
            return {"facts": facts}
        assert schema == "memory_decisions"
        if "garbage" in policy:
            raise Reply(200, '{"choices": [{"message": {"content": "no idea, sorry"}}]}')
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
        "acme", "dana", [MessageBody(content="I moved to Berlin last month", speaker="Dana", timestamp=TS)]
    )
    assert r1.extraction["ADD"] == 1
    r2 = await svc.add_messages(
        "acme", "dana", [MessageBody(content="I moved to Lisbon!", speaker="Dana", timestamp=TS + timedelta(days=30))]
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
    # the extraction prompt carries the speaker and the resolved absolute date (fields of the raw memory,
    # whose content is the message as said)
    assert "Dana: I moved to Berlin last month [February 2024]" in llm_server.prompts("extracted_facts")[0]
    raw = {m.content for m in await svc.stores.memories.list_memories(owner) if m.kind is MemoryKind.RAW}
    assert raw == {"I moved to Berlin last month", "I moved to Lisbon!"}
    # history queries return the chain
    res = await svc.search("acme", "dana", "where did Dana live before?", filter=MemoryFilter(kinds=["fact"]))
    assert res.analysis.history
    hit = next(h for h in res.hits if h.memory.id == new.id)
    assert [m.content for m in hit.history] == ["Dana lives in Berlin"]


async def test_update_then_delete_and_repeated_fact_is_none(make_service, llm_server) -> None:
    svc = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"))
    owner = Owner("acme", "dana")
    await svc.add_messages("acme", "dana", [MessageBody(content="I got a dog yesterday", speaker="Dana", timestamp=TS)])
    again = await svc.add_messages(
        "acme", "dana", [MessageBody(content="Remember, I got a dog", speaker="Dana", timestamp=TS)]
    )
    assert again.extraction["NONE"] == 1
    gone = await svc.add_messages(
        "acme", "dana", [MessageBody(content="I gave the dog away", speaker="Dana", timestamp=TS)]
    )
    # "Dana no longer has a dog" is a new fact whose context holds "has a dog": DELETE it
    assert gone.extraction["DELETE"] == 1
    facts = await _facts(svc, owner)
    dog = [f for f in facts if "Pixel" in f.content]
    assert len(dog) == 2  # version 1 and its tombstone
    assert [(f.version, f.is_current, f.deleted) for f in sorted(dog, key=lambda f: f.version)] == [
        (1, False, False),
        (2, False, True),
    ]
    res = await svc.search("acme", "dana", "Does Dana have a dog named Pixel?", filter=MemoryFilter(kinds=["fact"]))
    assert all("Pixel" not in h.memory.content for h in res.hits)


async def test_invented_alias_touches_nothing(make_service, llm_server) -> None:
    svc = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"))
    other = await make_service(llm=None, path=svc.settings.embedded.resolved_sqlite_path.with_name("other.db"))
    await other.add_messages("acme", "eve", [MessageBody(content="I love green tea", timestamp=TS)])
    await svc.add_messages("acme", "dana", [MessageBody(content="I love green tea", speaker="Dana", timestamp=TS)])
    before = [
        (m.id, m.version, m.is_current)
        for m in await svc.stores.memories.list_memories(Owner("acme", "dana"), include_history=True)
        if m.kind is MemoryKind.FACT
    ]
    llm_server.policy["alias"] = "m99"
    r = await svc.add_messages(
        "acme", "dana", [MessageBody(content="I love green tea so much", speaker="Dana", timestamp=TS)]
    )
    # the UPDATE named no listed memory: nothing existing is touched, and the new statement is kept as an ADD
    assert r.extraction["rejected_aliases"] == 1 and r.extraction["UPDATE"] == 0 and r.extraction["ADD"] == 1
    assert r.extraction["answers"]["repairs"] == {"update_without_target_added": 1}
    after = await svc.stores.memories.list_memories(Owner("acme", "dana"), include_history=True)
    facts = [(m.id, m.version, m.is_current) for m in after if m.kind is MemoryKind.FACT]
    assert set(before) < set(facts) and len(facts) == len(before) + 1


async def test_context_shows_only_this_users_facts(make_service, llm_server) -> None:
    svc = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"))
    await svc.add_messages("acme", "mallory", [MessageBody(content="I moved to Berlin", speaker="Dana", timestamp=TS)])
    await svc.add_messages(
        "other-tenant", "dana", [MessageBody(content="I moved to Berlin", speaker="Dana", timestamp=TS)]
    )
    await svc.add_messages("acme", "dana", [MessageBody(content="I love green tea", speaker="Dana", timestamp=TS)])
    r = await svc.add_messages("acme", "dana", [MessageBody(content="I moved to Lisbon", speaker="Dana", timestamp=TS)])
    assert r.extraction["ADD"] == 1  # nothing of the other users was offered for UPDATE
    prompt = llm_server.prompts("memory_decisions")[-1]
    assert "Dana loves green tea" in prompt and "Berlin" not in prompt


async def test_only_facts_are_shown_and_a_first_batch_needs_no_decision(make_service, llm_server) -> None:
    """Raw messages are evidence, never candidates for UPDATE (a real model "updated" an assistant's
    acknowledgement); a user with no fact yet has nothing to decide against, so no decide call is made."""
    svc = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"))
    r = await svc.add_messages(
        "acme", "dana",
        [MessageBody(content="I moved to Berlin last month", speaker="Dana", timestamp=TS),
         MessageBody(content="I see, thanks for telling me.", role="assistant", timestamp=TS)],
    )  # fmt: skip
    assert r.extraction["ADD"] == 1 and llm_server.prompts("memory_decisions") == []
    await svc.add_messages(
        "acme", "dana", [MessageBody(content="I see, thanks for telling me.", role="assistant", timestamp=TS)]
    )
    await svc.add_messages("acme", "dana", [MessageBody(content="I moved to Lisbon!", speaker="Dana", timestamp=TS)])
    (prompt,) = llm_server.prompts("memory_decisions")
    listed = [line for line in prompt.splitlines() if line.startswith("  - ")]
    assert listed == ["  - m1: Dana lives in Berlin"]


async def test_a_fact_cites_the_message_it_was_said_in(make_service, llm_server) -> None:
    svc = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"))
    r = await svc.add_messages(
        "acme", "dana",
        [MessageBody(content="Good morning!", speaker="Dana", timestamp=TS),
         MessageBody(content="We are planning a trip to Japan", speaker="Dana", timestamp=TS + timedelta(minutes=1)),
         MessageBody(content="Sounds wonderful.", role="assistant", timestamp=TS + timedelta(minutes=2))],
    )  # fmt: skip
    (fact,) = await _facts(svc, Owner("acme", "dana"))
    assert fact.source_message_ids == [r.messages[1].id]
    assert fact.message_time == TS + timedelta(minutes=1) and fact.speaker == "Dana"
    # the prompt numbered the messages the answer cites
    assert "[2] 2024-03-10 10:01 Dana: We are planning a trip to Japan" in llm_server.prompts("extracted_facts")[0]


async def test_async_job_survives_a_restart(make_service, llm_server, tmp_path) -> None:
    db = tmp_path / "durable.db"
    first = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"), path=db)
    r = await first.add_messages(
        "acme",
        "dana",
        [MessageBody(content="We are planning a trip to Japan", speaker="Dana", timestamp=TS)],
        background=True,
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


async def test_an_unreachable_llm_makes_the_job_wait_without_using_up_its_attempts(
    make_service, llm_server, captured_telemetry
) -> None:
    svc = await make_service(
        llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"), job_max_attempts=3, job_backoff_s=0.0
    )
    llm_server.policy["fail"] = True
    r = await svc.add_messages("acme", "dana", [MessageBody(content="I got a dog", timestamp=TS)], background=True)
    for waits in range(1, 8):  # an outage longer than max_attempts
        job = await svc.worker.run_once()
        assert job is not None and job.status is JobStatus.FAILED and job.attempts == 0, job
        assert job.result["waits"] == waits and "llm" in job.last_error
    assert dead_letter_metrics(captured_telemetry) == []
    assert [j.id for j in await svc.list_jobs("acme", status="pending")] == [r.job.id]
    llm_server.policy.clear()  # the outage ends
    job = await svc.worker.run_once()
    assert job.status is JobStatus.DONE and job.result["ADD"] == 1 and job.result["waits"] == 7
    assert [f.content for f in await _facts(svc, Owner("acme", "dana"))] == ["Dana has a dog named Pixel"]
    assert await svc.list_jobs("acme", status="pending") == []


async def test_a_job_waits_for_the_llm_only_up_to_job_max_wait_s(make_service, llm_server, captured_telemetry) -> None:
    """Past job_max_wait_s since it was enqueued, an unreachable LLM counts attempts and dead-letters the job."""
    svc = await make_service(
        llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"),
        job_max_attempts=2,
        job_backoff_s=0.0,
        job_max_wait_s=1.0,
    )
    llm_server.policy["fail"] = True
    r = await svc.add_messages("acme", "dana", [MessageBody(content="I got a dog", timestamp=TS)], background=True)
    job = await svc.worker.run_once()
    assert job is not None and job.status is JobStatus.FAILED and job.attempts == 0 and job.result["waits"] == 1
    await asyncio.sleep(1.1)  # the outage outlasts the wait
    first, second = await svc.worker.run_once(), await svc.worker.run_once()
    assert first is not None and first.status is JobStatus.FAILED and first.attempts == 1
    assert second is not None and second.status is JobStatus.DEAD and "llm" in second.last_error
    assert len(dead_letter_metrics(captured_telemetry)) == 1
    assert [j.id for j in await svc.list_jobs("acme", status="dead")] == [r.job.id]


async def test_unusable_answers_retry_with_backoff_then_dead_letter(
    make_service, llm_server, captured_telemetry
) -> None:
    svc = await make_service(
        llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"), job_max_attempts=3, job_backoff_s=0.0
    )
    llm_server.policy["garbage"] = True
    r = await svc.add_messages("acme", "dana", [MessageBody(content="I got a dog", timestamp=TS)], background=True)
    job = await svc.worker.run_once()
    assert job is not None and job.status is JobStatus.FAILED and job.attempts == 1
    assert "LLMOutputError" in job.last_error and "after a retry" in job.last_error
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
    await svc.add_messages("acme", "dana", [MessageBody(content="I got a dog", timestamp=TS)], background=True)
    job = await svc.worker.run_once()
    assert job.status is JobStatus.FAILED
    assert job.next_attempt_at >= datetime.now(UTC) + timedelta(seconds=50)
    assert await svc.worker.run_once() is None  # not due yet


async def test_unusable_decisions_keep_the_facts(make_service, llm_server) -> None:
    svc = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"), job_backoff_s=0.0)
    await svc.add_messages("acme", "dana", [MessageBody(content="I moved to Berlin", timestamp=TS)])
    llm_server.policy["malformed"] = True
    r = await svc.add_messages("acme", "dana", [MessageBody(content="I got a dog", timestamp=TS)], background=True)
    job = await svc.worker.run_once()
    assert job.status is JobStatus.DONE and job.result["ADD"] == 1
    assert job.result["answers"]["dropped"] == {"decisions_unusable": 1}
    assert job.result["answers"]["unusable"] == 1 and job.result["answers"]["calls"] == 3  # extract + decide twice
    assert {f.content for f in await _facts(svc, Owner("acme", "dana"))} == {
        "Dana lives in Berlin", "Dana has a dog named Pixel"
    }  # fmt: skip
    raw = [m for m in await svc.stores.memories.list_memories(Owner("acme", "dana")) if m.kind is MemoryKind.RAW]
    assert r.messages[0].id in {i for m in raw for i in m.source_message_ids}


@pytest.mark.parametrize(
    ("patch", "repairs", "dropped", "added"),
    [
        ({"action": "MERGE"}, {}, {"decision_action_unknown": 1}, 1),
        ({"action": "update"}, {"action_spelling": 1}, {}, 0),
        ({"fact": "0"}, {}, {}, 0),
        ({"reason": "new"}, {"extra_key": 1}, {}, 0),
        ({"category": "food"}, {}, {}, 0),
        ({"target": "Dana lives in Berlin"}, {"target_by_text": 1}, {}, 0),
        ({"target": "M1"}, {"target_spelling": 1}, {}, 0),
        ({"target": "m7"}, {"update_without_target_added": 1}, {}, 1),
    ],
    ids=["bad-enum", "lower-case-action", "index-as-string", "extra-key", "bad-category", "target-as-text",
         "target-spelling", "unknown-target"],
)  # fmt: skip
async def test_a_decision_outside_the_schema_is_repaired_or_dropped_never_fatal(
    make_service, llm_server, patch, repairs, dropped, added
) -> None:
    svc = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"), job_backoff_s=0.0)
    await svc.add_messages("acme", "dana", [MessageBody(content="I moved to Berlin", timestamp=TS)])
    llm_server.policy["patch"] = patch
    await svc.add_messages("acme", "dana", [MessageBody(content="I moved to Lisbon", timestamp=TS)], background=True)
    job = await svc.worker.run_once()
    assert job.status is JobStatus.DONE, job.last_error
    answers = job.result["answers"]
    assert answers["valid"] + answers["repaired"] == 2 and answers["unusable"] == 0
    assert answers["repairs"] == repairs and answers["dropped"] == dropped
    assert (job.result["UPDATE"], job.result["ADD"]) == (1 - added, added)
    current = {f.content for f in await _facts(svc, Owner("acme", "dana")) if f.is_current}
    assert "Dana lives in Lisbon" in current


async def test_sync_mode_llm_failure_answers_stored_with_the_facts_pending(make_service, llm_server) -> None:
    svc = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"))
    llm_server.policy["fail"] = True
    r = await svc.add_messages(
        "acme", "dana", [MessageBody(content="I got a dog", timestamp=TS, client_message_id="c-1")]
    )
    assert r.created == [True] and r.facts == "pending" and r.job is not None
    assert r.extraction == {"deferred": "llm_unavailable"} and r.degraded and "llm" in r.degraded[0]
    # the client's retry is answered "already stored" and does not duplicate the message or the job
    llm_server.policy.clear()
    again = await svc.add_messages(
        "acme", "dana", [MessageBody(content="I got a dog", timestamp=TS, client_message_id="c-1")]
    )
    assert again.created == [False] and again.facts == "nothing_new" and again.job is None
    assert len(await svc.stores.memories.list_memories(Owner("acme", "dana"))) == 1
    assert await svc.worker.drain() == 1
    assert [f.content for f in await _facts(svc, Owner("acme", "dana"))] == ["Dana has a dog named Pixel"]


async def test_a_request_spanning_sessions_is_extracted_session_by_session(make_service, llm_server) -> None:
    """An import of a whole history in one request: the later session's facts are decided against the
    earlier session's (a real model missed "moved to Lisbon" when both came as one batch: with no stored
    fact there was no decision to make, and the two homes stood side by side)."""
    svc = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"))
    r = await svc.add_messages(
        "acme", "dana",
        [MessageBody(content="I moved to Berlin last month", speaker="Dana", timestamp=TS, session_id="s1"),
         MessageBody(content="We are planning a trip to Japan", speaker="Dana", timestamp=TS, session_id="s1"),
         MessageBody(content="I moved to Lisbon!", speaker="Dana", timestamp=TS + timedelta(days=30), session_id="s2")],
    )  # fmt: skip
    assert len(llm_server.prompts("extracted_facts")) == 2  # one per session
    (decide,) = llm_server.prompts("memory_decisions")
    assert "Dana lives in Berlin" in decide and "fact 0: Dana lives in Lisbon" in decide
    assert (r.extraction["ADD"], r.extraction["UPDATE"], r.extraction["sessions"]) == (2, 1, 2)
    assert r.extraction["answers"]["asked"] == 3  # the report of both sessions
    facts = await _facts(svc, Owner("acme", "dana"))
    current = sorted(f.content for f in facts if f.is_current)
    assert current == ["Dana is planning a trip to Japan", "Dana lives in Lisbon"]
    lisbon = next(f for f in facts if "Lisbon" in f.content)
    assert r.messages[2].id in lisbon.source_message_ids and lisbon.version == 2


def two_sessions() -> list[MessageBody]:
    """Two sessions a month apart: the second changes what the first said (fresh objects per request)."""
    return [
        MessageBody(content="I moved to Berlin last month", speaker="Dana", timestamp=TS, session_id="s1"),
        MessageBody(content="I moved to Lisbon!", speaker="Dana", timestamp=TS + timedelta(days=30), session_id="s2"),
    ]


BERLIN_THEN_LISBON = [("Dana lives in Berlin", False), ("Dana lives in Lisbon", True)]


class SecondExtractionFails:
    """A scripted model whose second extract call fails with ``reply``; ``before_failing`` runs first."""

    def __init__(self, reply: Reply, before_failing=None) -> None:  # type: ignore[no-untyped-def]
        self.reply, self.before_failing, self.calls = reply, before_failing, 0

    def __call__(self, schema: str, body: dict) -> dict:
        if schema == "extracted_facts":
            self.calls += 1
            if self.calls == 2:
                if self.before_failing is not None:
                    self.before_failing()
                raise self.reply
        return model()(schema, body)


async def test_a_failure_in_a_later_session_leaves_the_earlier_ones_extracted_once(make_service, llm_server) -> None:
    """The first session's facts are written before the second session fails; the job records that, and
    its retry extracts only the second session (nothing is extracted twice)."""
    svc = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"))
    owner = Owner("acme", "dana")
    llm_server.responder = fails = SecondExtractionFails(Reply(500, '{"error": "boom"}'))
    r = await svc.add_messages("acme", "dana", two_sessions())
    assert r.facts == "pending" and r.job is not None
    assert [f.content for f in await _facts(svc, owner)] == ["Dana lives in Berlin"]
    job = await svc.get_job("acme", "dana", r.job.id)
    assert job.result == {"extracted_message_ids": [r.messages[0].id]}
    assert await svc.worker.drain() == 1
    assert fails.calls == 3  # the retry asked for the second session only
    assert sorted((f.content, f.is_current) for f in await _facts(svc, owner)) == BERLIN_THEN_LISBON
    assert (await svc.get_job("acme", "dana", r.job.id)).status is JobStatus.DONE


async def test_a_jobs_failure_in_a_later_session_is_retried_from_that_session(make_service, llm_server) -> None:
    """The worker's path: the first session's facts are written, the attempt fails in the second; the job
    is saved with its outcome and its progress (and its lease is never cleared mid-run: it is the worker
    that saves it), and the retry extracts the second session only."""
    svc = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"), job_backoff_s=0.0)
    owner = Owner("acme", "dana")
    claim: list[tuple] = []

    def read_the_claim() -> None:  # the first session is applied by now: the job must still hold its claim
        with sqlite3.connect(svc.settings.embedded.resolved_sqlite_path) as db:
            claim.append(db.execute("SELECT status, lease_until FROM jobs").fetchone())

    llm_server.responder = fails = SecondExtractionFails(Reply(503, '{"error": "overloaded"}'), read_the_claim)
    r = await svc.add_messages("acme", "dana", two_sessions(), background=True)
    first = await svc.worker.run_once()
    assert first is not None and first.status is JobStatus.FAILED
    ((status, lease),) = claim
    assert status == "running" and lease is not None  # a worker dying now leaves a job another can claim
    stored = await svc.get_job("acme", "dana", r.job.id)
    # the LLM was away: the job waits for it (the attempt does not count), its progress and wait count kept
    assert stored.status is JobStatus.FAILED
    assert stored.result == {"extracted_message_ids": [r.messages[0].id], "waits": 1}
    assert [f.content for f in await _facts(svc, owner)] == ["Dana lives in Berlin"]
    assert await svc.worker.drain() == 1
    assert fails.calls == 3  # the retry asked for the second session only
    assert sorted((f.content, f.is_current) for f in await _facts(svc, owner)) == BERLIN_THEN_LISBON
    assert (await svc.get_job("acme", "dana", r.job.id)).status is JobStatus.DONE


def test_session_runs_cut_where_the_session_changes() -> None:
    from types import SimpleNamespace

    from cognis_memory.ingest.pipeline import add_counts, session_runs

    msgs = [SimpleNamespace(message=SimpleNamespace(session_id=s)) for s in ["a", "a", None, None, "b", "a"]]
    assert [[m.message.session_id for m in run] for run in session_runs(msgs)] == [
        ["a", "a"],
        [None, None],
        ["b"],
        ["a"],
    ]  # type: ignore[arg-type]
    assert add_counts({"ADD": 1, "answers": {"asked": 2, "repairs": {"x": 1}}, "seconds": 0.5},
                      {"ADD": 2, "answers": {"asked": 1, "repairs": {"y": 3}}, "seconds": 0.25}) == {
        "ADD": 3, "answers": {"asked": 3, "repairs": {"x": 1, "y": 3}}, "seconds": 0.75}  # fmt: skip


async def test_an_older_statement_never_replaces_a_newer_one(make_service, llm_server) -> None:
    """Jobs may run out of order (a retried older batch after a newer one): an UPDATE the model decides with
    an older statement is not written over the newer fact (its time would go back too); the older value is
    kept beside it, counted as a conflict."""
    svc = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"))
    owner = Owner("acme", "dana")
    later = TS + timedelta(days=30)
    await svc.add_messages("acme", "dana", [MessageBody(content="I moved to Lisbon!", speaker="Dana", timestamp=later)])
    r = await svc.add_messages(
        "acme", "dana", [MessageBody(content="I moved to Berlin last month", speaker="Dana", timestamp=TS)]
    )
    assert (r.extraction["UPDATE"], r.extraction["conflicts"]) == (0, 1)
    facts = await _facts(svc, owner)
    assert sorted((f.content, f.version, f.is_current) for f in facts) == [
        ("Dana lives in Berlin", 1, True), ("Dana lives in Lisbon", 1, True)
    ]  # fmt: skip
    assert next(f for f in facts if "Lisbon" in f.content).message_time == later


async def test_a_user_fact_replacing_a_session_fact_is_seen_by_every_session(make_service, llm_server) -> None:
    """A USER fact that updates a CONTEXT fact of another session takes its own scope and session: the new
    value was said for every session (the version used to keep the old one's scope, so it stayed
    session-only)."""
    svc = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"))
    await svc.add_messages("acme", "dana", [
        MessageBody(content="I moved to Berlin", speaker="Dana", timestamp=TS, session_id="trip", scope=Scope.CONTEXT)
    ])  # fmt: skip
    r = await svc.add_messages("acme", "dana", [
        MessageBody(content="I moved to Lisbon", speaker="Dana", timestamp=TS + timedelta(days=2), session_id="home")
    ])  # fmt: skip
    assert r.extraction["UPDATE"] == 1
    (lisbon,) = [f for f in await _facts(svc, Owner("acme", "dana")) if f.is_current]
    assert (lisbon.content, lisbon.scope, lisbon.session_id, lisbon.version) == (
        "Dana lives in Lisbon", Scope.USER, "home", 2
    )  # fmt: skip
    seen = await svc.search("acme", "dana", "Where does Dana live?", filter=MemoryFilter(session_id="elsewhere"))
    assert "Dana lives in Lisbon" in [h.memory.content for h in seen.hits]
