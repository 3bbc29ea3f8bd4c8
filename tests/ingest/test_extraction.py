"""Stage 3 (context-aware extraction) and durable jobs, through a real HTTP LLM endpoint.

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
from cognis_memory.service import FilterRequest, MessageBody
from tests.llm_server import Reply, ScriptedLLMServer

TS = datetime(2024, 3, 10, 10, tzinfo=UTC)

#: key phrase in a message -> the fact the scripted model extracts from it (attribute, value)
FACTS = {
    "moved to Berlin": ("home city", "Berlin"),
    "moved to Lisbon": ("home city", "Lisbon"),
    "got a dog": ("dog", "Pixel"),
    "gave the dog away": ("dog", "gave the dog away"),
    "love green tea": ("favourite drink", "green tea"),
    "trip to Japan": ("travel plan", "trip to Japan"),
}
_MESSAGE = re.compile(r"^Message from .*\):\n(.*)\Z", re.MULTILINE | re.DOTALL)
_FACT = re.compile(r"^(Older|Newer) fact \(said [^)]*\): (.*)$", re.MULTILINE)


def change_pair(prompt: str) -> tuple[str, str]:
    """(older fact, newer fact) of a change-check prompt."""
    facts = dict(m.groups() for m in _FACT.finditer(prompt))
    return facts["Older"], facts["Newer"]


def model(policy: dict[str, object] | None = None):
    """A scripted model: facts by key phrase (about the speaker, or Ana for "my friend Ana"); "no longer true" when both facts give one attribute two values,
    or always with ``policy["yes"]``; ``policy["verdict"]`` replaces the change answer."""
    policy = {} if policy is None else policy

    def respond(schema: str, body: dict) -> dict:
        prompt = body["messages"][-1]["content"]
        if "fail" in policy:
            raise Reply(500, '{"error": "boom"}')
        if schema == "extracted_facts":
            if "garbage" in policy:
                raise Reply(200, '{"choices": [{"message": {"content": "no idea, sorry"}}]}')
            match = _MESSAGE.search(prompt)
            text = match.group(1) if match else ""
            subject = "Ana" if "friend Ana" in text else "speaker"
            return {"facts": [{"subject": subject, "attribute": attribute, "value": value}
                              for key, (attribute, value) in FACTS.items() if key in text]}  # fmt: skip
        assert schema == "fact_change"
        if "malformed" in policy:
            raise Reply(200, '{"choices": [{"message": {"content": "not json at all"}}]}')
        if "verdict" in policy:
            return policy["verdict"]  # type: ignore[return-value]
        older, newer = change_pair(prompt)
        same = older.split(": ")[0] == newer.split(": ")[0]
        return {"no_longer_true": "yes" if policy.get("yes") or (same and older != newer) else "no"}

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
    assert r1.extraction["ADD"] == 1 and r1.extraction["change_checks"] == 0  # nothing stored to replace
    r2 = await svc.add_messages(
        "acme", "dana", [MessageBody(content="I moved to Lisbon!", speaker="Dana", timestamp=TS + timedelta(days=30))]
    )
    assert r2.extraction["UPDATE"] == 1 and r2.extraction["ADD"] == 0
    assert (r2.extraction["change_checks"], r2.extraction["changes_said"]) == (1, 1)
    facts = await _facts(svc, owner)
    assert len(facts) == 2
    old = next(f for f in facts if "Berlin" in f.content)
    new = next(f for f in facts if "Lisbon" in f.content)
    assert (old.content, old.subject, old.attribute) == ("Dana's home city: Berlin", "Dana", "home city")
    assert (old.version, old.is_current) == (1, False)
    assert (new.version, new.is_current, new.replaces_id) == (2, True, old.id)
    assert set(new.source_message_ids) == {r1.messages[0].id, r2.messages[0].id}
    assert new.message_time == TS + timedelta(days=30) and new.event_time is None  # not the old value's date
    # the change check showed the two facts with their dates, never an id
    (check,) = llm_server.prompts("fact_change")
    assert change_pair(check) == ("Dana's home city: Berlin", "Dana's home city: Lisbon")
    assert "(said 10 March 2024)" in check and old.id not in check
    # the extract question carries the resolved absolute date
    assert "last month [February 2024]" in llm_server.prompts("extracted_facts")[0]
    # history queries return the chain
    res = await svc.search("acme", "dana", "where did Dana live before?", filter=FilterRequest(kinds=["fact"]))
    assert res.analysis.history
    hit = next(h for h in res.hits if h.memory.id == new.id)
    assert [m.content for m in hit.history] == ["Dana's home city: Berlin"]


async def test_a_repeated_fact_is_none_and_an_ended_one_is_replaced(make_service, llm_server) -> None:
    svc = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"))
    owner = Owner("acme", "dana")
    await svc.add_messages(
        "acme", "dana", [MessageBody(content="I got a dog called Pixel yesterday", speaker="Dana", timestamp=TS)]
    )
    again = await svc.add_messages(
        "acme",
        "dana",
        [MessageBody(content="Remember, I got a dog called Pixel", speaker="Dana", timestamp=TS + timedelta(days=1))],
    )
    assert again.extraction["NONE"] == 1 and again.extraction["change_checks"] == 0  # code saw it: no question
    gone = await svc.add_messages(
        "acme", "dana", [MessageBody(content="I gave the dog away", speaker="Dana", timestamp=TS + timedelta(days=2))]
    )
    assert gone.extraction["UPDATE"] == 1
    dog = sorted(await _facts(svc, owner), key=lambda f: f.version)
    assert [(f.content, f.version, f.is_current) for f in dog] == [
        ("Dana's dog: Pixel", 1, False), ("Dana's dog: gave the dog away", 2, True)
    ]  # fmt: skip
    res = await svc.search("acme", "dana", "Does Dana have a dog named Pixel?", filter=FilterRequest(kinds=["fact"]))
    assert all("Pixel" not in h.memory.content for h in res.hits)


async def test_a_model_that_says_yes_to_everything_touches_only_this_users_earlier_facts(
    make_service, llm_server
) -> None:
    """Candidates are chosen by code: facts of the same person, of this tenant and user, said earlier, about
    the same attribute or similar. A model answering "no longer true" to every question cannot reach anything
    else, and never sees an id."""
    svc = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"))
    await svc.add_messages("acme", "mallory", [MessageBody(content="I moved to Berlin", speaker="Dana", timestamp=TS)])
    await svc.add_messages(
        "other-tenant", "dana", [MessageBody(content="I moved to Berlin", speaker="Dana", timestamp=TS)]
    )
    await svc.add_messages("acme", "dana", [MessageBody(content="I love green tea", speaker="Dana", timestamp=TS)])
    await svc.add_messages(
        "acme", "dana", [MessageBody(content="My friend Ana moved to Berlin", speaker="Dana", timestamp=TS)]
    )
    others = {
        m.id: (m.version, m.is_current)
        for o in (Owner("acme", "mallory"), Owner("other-tenant", "dana"))
        for m in await svc.stores.memories.list_memories(o, include_history=True)
    }
    llm_server.policy["yes"] = True
    r = await svc.add_messages(
        "acme", "dana", [MessageBody(content="I moved to Lisbon", speaker="Dana", timestamp=TS + timedelta(days=3))]
    )
    for prompt in llm_server.prompts("fact_change"):
        older, newer = change_pair(prompt)
        assert older.startswith("Dana's") and newer == "Dana's home city: Lisbon"
        assert "Berlin" not in older  # the other users' Berlin facts were never candidates
    assert r.extraction["ADD"] + r.extraction["UPDATE"] == 1
    after = {
        m.id: (m.version, m.is_current)
        for o in (Owner("acme", "mallory"), Owner("other-tenant", "dana"))
        for m in await svc.stores.memories.list_memories(o, include_history=True)
    }
    assert after == others


async def test_an_assistants_message_is_never_asked_about_and_a_first_fact_needs_no_check(
    make_service, llm_server
) -> None:
    """Facts come from what people said: an assistant's words are not asked about (a real model made the
    user's facts of an assistant's acknowledgement); a user with no fact yet has nothing to compare with."""
    svc = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"))
    r = await svc.add_messages(
        "acme", "dana",
        [MessageBody(content="I moved to Berlin last month", speaker="Dana", timestamp=TS),
         MessageBody(content="I see, you moved to Lisbon then.", role="assistant", timestamp=TS),
         MessageBody(content="Any tips for sleeping better?", speaker="Dana", timestamp=TS)],
    )  # fmt: skip
    assert r.extraction["ADD"] == 1 and llm_server.prompts("fact_change") == []
    (asked,) = llm_server.prompts("extracted_facts")  # not the assistant's line, not the question
    assert asked.endswith("Message from Dana (10 March 2024):\nI moved to Berlin last month [February 2024]")
    assert asked.startswith("Known attributes: none yet")
    await svc.add_messages(
        "acme", "dana", [MessageBody(content="I moved to Lisbon!", speaker="Dana", timestamp=TS + timedelta(days=9))]
    )
    (check,) = llm_server.prompts("fact_change")
    assert change_pair(check)[0] == "Dana's home city: Berlin"
    assert llm_server.prompts("extracted_facts")[-1].startswith("Known attributes: home city")


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
    assert len(llm_server.prompts("extracted_facts")) == 2  # one question per message of Dana's


async def test_an_older_statement_never_replaces_a_newer_one(make_service, llm_server) -> None:
    """Jobs may run out of order (a retried older batch after a newer one): the older home is kept beside the
    newer, never written over it, and a present-state question puts the newer first."""
    svc = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"))
    owner = Owner("acme", "dana")
    await svc.add_messages(
        "acme", "dana", [MessageBody(content="I moved to Lisbon!", speaker="Dana", timestamp=TS + timedelta(days=30))]
    )
    r = await svc.add_messages(
        "acme", "dana", [MessageBody(content="I moved to Berlin last month", speaker="Dana", timestamp=TS)]
    )
    assert (r.extraction["ADD"], r.extraction["UPDATE"], r.extraction["change_checks"]) == (1, 0, 0)
    facts = await _facts(svc, owner)
    assert all(f.is_current and f.version == 1 for f in facts) and len(facts) == 2
    lisbon = next(f for f in facts if "Lisbon" in f.content)
    assert lisbon.message_time == TS + timedelta(days=30)
    res = await svc.search("acme", "dana", "Where does Dana live now?", filter=FilterRequest(kinds=["fact"]))
    assert [h.memory.content for h in res.hits][:2] == ["Dana's home city: Lisbon", "Dana's home city: Berlin"]


async def test_a_user_fact_replacing_a_session_fact_is_seen_by_every_session(make_service, llm_server) -> None:
    """Scope rules hold both ways: a CONTEXT fact never replaces what every session sees, and a USER fact
    that replaces a CONTEXT fact of another session is a USER fact (it was kept in that session)."""
    svc = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"))
    owner = Owner("acme", "dana")
    await svc.add_messages("acme", "dana", [
        MessageBody(content="I moved to Berlin", speaker="Dana", timestamp=TS, session_id="trip", scope=Scope.CONTEXT)
    ])  # fmt: skip
    r = await svc.add_messages("acme", "dana", [
        MessageBody(content="I moved to Lisbon", speaker="Dana", timestamp=TS + timedelta(days=2), session_id="home")
    ])  # fmt: skip
    assert r.extraction["UPDATE"] == 1
    (lisbon,) = [f for f in await _facts(svc, owner) if f.is_current]
    assert (lisbon.content, lisbon.scope, lisbon.session_id) == ("Dana's home city: Lisbon", Scope.USER, "home")
    # the other way round: a session-only statement leaves the USER fact as it is
    r = await svc.add_messages("acme", "dana", [
        MessageBody(content="Say I moved to Berlin", speaker="Dana", timestamp=TS + timedelta(days=4),
                    session_id="game", scope=Scope.CONTEXT)
    ])  # fmt: skip
    assert (r.extraction["ADD"], r.extraction["UPDATE"], r.extraction["change_checks"]) == (1, 0, 0)
    assert r.extraction["answers"]["overruled"] == {"context_fact_on_wider_memory": 1}
    current = {f.content: f for f in await _facts(svc, owner) if f.is_current}
    assert current["Dana's home city: Lisbon"].version == 2
    assert (current["Dana's home city: Berlin"].scope, current["Dana's home city: Berlin"].session_id) == (
        Scope.CONTEXT, "game"
    )  # fmt: skip


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
    assert [f.content for f in await _facts(second, Owner("acme", "dana"))] == ["Dana's travel plan: trip to Japan"]


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
    r = await svc.add_messages(
        "acme", "dana", [MessageBody(content="I got a dog called Pixel", timestamp=TS)], background=True
    )
    for waits in range(1, 8):  # an outage longer than max_attempts
        job = await svc.worker.run_once()
        assert job is not None and job.status is JobStatus.FAILED and job.attempts == 0, job
        assert job.result["waits"] == waits and "llm" in job.last_error
    assert dead_letter_metrics(captured_telemetry) == []
    assert [j.id for j in await svc.list_jobs("acme", status="pending")] == [r.job.id]
    llm_server.policy.clear()  # the outage ends
    job = await svc.worker.run_once()
    assert job.status is JobStatus.DONE and job.result["ADD"] == 1 and job.result["waits"] == 7
    assert [f.content for f in await _facts(svc, Owner("acme", "dana"))] == ["The user's dog: Pixel"]
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
    r = await svc.add_messages(
        "acme", "dana", [MessageBody(content="I got a dog called Pixel", timestamp=TS)], background=True
    )
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
    r = await svc.add_messages(
        "acme", "dana", [MessageBody(content="I got a dog called Pixel", timestamp=TS)], background=True
    )
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
    await svc.add_messages(
        "acme", "dana", [MessageBody(content="I got a dog called Pixel", timestamp=TS)], background=True
    )
    job = await svc.worker.run_once()
    assert job.status is JobStatus.FAILED
    assert job.next_attempt_at >= datetime.now(UTC) + timedelta(seconds=50)
    assert await svc.worker.run_once() is None  # not due yet


async def test_an_unusable_change_check_keeps_both_facts(make_service, llm_server) -> None:
    """A change check no answer of which can be read, even asked twice, is a "no": nothing is retired on a guess,
    the new fact is added and the job is done."""
    svc = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"), job_backoff_s=0.0)
    await svc.add_messages("acme", "dana", [MessageBody(content="I moved to Berlin", timestamp=TS)])
    llm_server.policy["malformed"] = True
    r = await svc.add_messages(
        "acme", "dana", [MessageBody(content="I moved to Lisbon", timestamp=TS + timedelta(days=1))], background=True
    )
    job = await svc.worker.run_once()
    assert job.status is JobStatus.DONE and (job.result["ADD"], job.result["UPDATE"]) == (1, 0)
    assert job.result["answers"]["dropped"] == {"change_check_unusable": 1}
    assert job.result["answers"]["unusable"] == 1 and job.result["answers"]["calls"] == 3  # extract + check twice
    assert {f.content for f in await _facts(svc, Owner("acme", "dana")) if f.is_current} == {
        "The user's home city: Berlin", "The user's home city: Lisbon"
    }  # fmt: skip
    raw = [m for m in await svc.stores.memories.list_memories(Owner("acme", "dana")) if m.kind is MemoryKind.RAW]
    assert r.messages[0].id in {i for m in raw for i in m.source_message_ids}


@pytest.mark.parametrize(
    ("verdict", "repairs", "updated"),
    [
        ({"no_longer_true": "yes"}, {}, 1),
        ({"no_longer_true": "Yes."}, {"verdict_spelling": 1}, 1),
        ({"no_longer_true": True}, {"verdict_as_boolean": 1}, 1),
        ({"answer": "yes"}, {"envelope_key": 1}, 1),
        ({"no_longer_true": "no", "reason": "both true"}, {"extra_key": 1}, 0),
    ],
    ids=["as-asked", "capitals-and-stop", "boolean", "other-key", "extra-key"],
)  # fmt: skip
async def test_a_verdict_outside_the_schema_is_read_when_it_has_one_reading(
    make_service, llm_server, verdict, repairs, updated
) -> None:
    svc = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"), job_backoff_s=0.0)
    await svc.add_messages("acme", "dana", [MessageBody(content="I moved to Berlin", timestamp=TS)])
    llm_server.policy["verdict"] = verdict
    await svc.add_messages(
        "acme", "dana", [MessageBody(content="I moved to Lisbon", timestamp=TS + timedelta(days=1))], background=True
    )
    job = await svc.worker.run_once()
    assert job.status is JobStatus.DONE, job.last_error
    answers = job.result["answers"]
    assert answers["valid"] + answers["repaired"] == 2 and answers["unusable"] == 0
    assert answers["repairs"] == repairs
    assert (job.result["UPDATE"], job.result["ADD"]) == (updated, 1 - updated)
    current = {f.content for f in await _facts(svc, Owner("acme", "dana")) if f.is_current}
    assert "The user's home city: Lisbon" in current


async def test_sync_mode_llm_failure_answers_stored_with_the_facts_pending(make_service, llm_server) -> None:
    svc = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"))
    llm_server.policy["fail"] = True
    r = await svc.add_messages(
        "acme", "dana", [MessageBody(content="I got a dog called Pixel", timestamp=TS, client_message_id="c-1")]
    )
    assert r.created == [True] and r.facts == "pending" and r.job is not None
    assert r.extraction == {"deferred": "llm_unavailable"} and r.degraded and "llm" in r.degraded[0]
    # the client's retry is answered "already stored" and does not duplicate the message or the job
    llm_server.policy.clear()
    again = await svc.add_messages(
        "acme", "dana", [MessageBody(content="I got a dog called Pixel", timestamp=TS, client_message_id="c-1")]
    )
    assert again.created == [False] and again.facts == "nothing_new" and again.job is None
    assert len(await svc.stores.memories.list_memories(Owner("acme", "dana"))) == 1
    assert await svc.worker.drain() == 1
    assert [f.content for f in await _facts(svc, Owner("acme", "dana"))] == ["The user's dog: Pixel"]


async def test_a_request_spanning_sessions_is_extracted_session_by_session(make_service, llm_server) -> None:
    """An import of a whole history in one request: the later session's facts are checked against the
    earlier session's (a real model missed "moved to Lisbon" when both came as one batch: with no stored
    fact there was nothing to compare, and the two homes stood side by side)."""
    svc = await make_service(llm=OpenAICompatibleLLM(llm_server.base_url, "scripted"))
    r = await svc.add_messages(
        "acme", "dana",
        [MessageBody(content="I moved to Berlin last month", speaker="Dana", timestamp=TS, session_id="s1"),
         MessageBody(content="We are planning a trip to Japan", speaker="Dana", timestamp=TS, session_id="s1"),
         MessageBody(content="I moved to Lisbon!", speaker="Dana", timestamp=TS + timedelta(days=30), session_id="s2")],
    )  # fmt: skip
    assert len(llm_server.prompts("extracted_facts")) == 3  # one per message
    (check,) = llm_server.prompts("fact_change")
    assert change_pair(check) == ("Dana's home city: Berlin", "Dana's home city: Lisbon")
    assert (r.extraction["ADD"], r.extraction["UPDATE"], r.extraction["sessions"]) == (2, 1, 2)
    assert r.extraction["answers"]["asked"] == 4  # the report of both sessions
    facts = await _facts(svc, Owner("acme", "dana"))
    current = sorted(f.content for f in facts if f.is_current)
    assert current == ["Dana's home city: Lisbon", "Dana's travel plan: trip to Japan"]
    lisbon = next(f for f in facts if "Lisbon" in f.content)
    assert r.messages[2].id in lisbon.source_message_ids and lisbon.version == 2


def two_sessions() -> list[MessageBody]:
    """Two sessions a month apart: the second changes what the first said (fresh objects per request)."""
    return [
        MessageBody(content="I moved to Berlin last month", speaker="Dana", timestamp=TS, session_id="s1"),
        MessageBody(content="I moved to Lisbon!", speaker="Dana", timestamp=TS + timedelta(days=30), session_id="s2"),
    ]


BERLIN_THEN_LISBON = [("Dana's home city: Berlin", False), ("Dana's home city: Lisbon", True)]


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
    assert [f.content for f in await _facts(svc, owner)] == ["Dana's home city: Berlin"]
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
    assert [f.content for f in await _facts(svc, owner)] == ["Dana's home city: Berlin"]
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
