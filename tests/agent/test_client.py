"""The Python clients against the real app over HTTP: typed results, typed errors, pagination,
and retries that are counted at the server."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from cognis_memory.client import (
    AddMessagesOut,
    AsyncMemoryClient,
    AuthenticationError,
    ContextOut,
    InvalidRequest,
    MemoryClient,
    MemoryConnectionError,
    MemoryOut,
    MessageBody,
    NotFound,
    PermissionDenied,
    RateLimited,
    RetryPolicy,
    SearchOut,
    ServiceUnavailable,
)
from tests.agent.conftest import Fault

FAST = RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=0.05)


def _sync(fn):
    """Run a blocking client call from an async test without blocking the test's loop."""
    return asyncio.to_thread(fn)


async def test_sync_client_round_trip_returns_typed_results(live_server) -> None:
    def run() -> None:
        with MemoryClient(live_server.url, "agent-key") as mem:
            added = mem.add("zoe", "I started a pottery class last week", speaker="Zoe", session_id="s1")
            assert isinstance(added, AddMessagesOut) and added.messages[0].created
            mid = added.memories[0].id
            found = mem.search("zoe", "pottery", limit=3)
            assert isinstance(found, SearchOut) and found.results[0].memory.id == mid
            assert found.results[0].memory.speaker == "Zoe"
            new = mem.update("zoe", mid, content="Zoe takes a pottery class on Tuesdays")
            assert isinstance(new, MemoryOut) and new.version == 2 and new.replaces_id == mid
            assert [v.version for v in mem.history("zoe", new.id)] == [1, 2]
            assert mem.get("zoe", new.id).content == "Zoe takes a pottery class on Tuesdays"
            typed = mem.add_messages("zoe", [MessageBody(content="My kiln is in the garage", speaker="Zoe")])
            assert (typed.memories[0].speaker, typed.memories[0].content) == ("Zoe", "My kiln is in the garage")
            ctx = mem.context("zoe", "What classes does Zoe take?")
            assert isinstance(ctx, ContextOut) and "pottery class on Tuesdays" in ctx.text
            deleted = mem.delete("zoe", new.id)
            assert deleted.deleted and deleted.version == 3
            assert mem.health() == {"status": "ok"}
            assert mem.forget_user("zoe").deleted["memories"] >= 3
            assert mem.search("zoe", "pottery").results == []

    await _sync(run)


async def test_pagination_walks_every_memory_once(live_server) -> None:
    def run() -> None:
        with MemoryClient(live_server.url, "agent-key") as mem:
            mem.add_messages("pat", [{"content": f"Note number {i} about gardening"} for i in range(7)])
            first = mem.list_memories("pat", limit=3)
            assert len(first.memories) == 3 and first.next_after == first.memories[-1].id
            walked = [m.id for m in mem.iter_memories("pat", page_size=3)]
            everything = [m.id for m in mem.list_memories("pat", limit=100).memories]
            assert len(walked) == 7 and walked == everything
            assert live_server.front.count("GET", "/memories") == 1 + 3 + 1  # pages of 3, 3, 1, and the full list

    await _sync(run)


async def test_errors_are_typed_and_carry_the_server_message(live_server) -> None:
    def run() -> None:
        with MemoryClient(live_server.url, "agent-key") as mem:
            with pytest.raises(InvalidRequest) as e:
                mem.search("zoe", "anything", limit=0)
            assert e.value.status == 422 and e.value.field == "limit" and "limit" in e.value.message
            assert e.value.request_id
            with pytest.raises(InvalidRequest) as e:
                mem.add_messages("zoe", [{"content": "hi", "colour": "red"}])
            assert e.value.field == "messages[0].colour"
            with pytest.raises(NotFound):
                mem.get("zoe", "no-such-memory")
            mid = mem.add("zoe", "I own a red bicycle").memories[0].id
            assert mem.update("zoe", mid, content="I own a blue bicycle").id == mid  # the memory keeps its id
            kayak = mem.add("zoe", "I own a red kayak").memories[0].id
            assert mem.delete("zoe", kayak) == mem.delete("zoe", kayak)  # deleting twice: the same answer
            with pytest.raises(NotFound):  # a deleted memory is not edited
                mem.update("zoe", kayak, content="I own a green kayak")
        with MemoryClient(live_server.url, "wrong-key") as bad, pytest.raises(AuthenticationError) as e:
            bad.search("zoe", "bicycle")
        assert e.value.status == 401 and e.value.code == "unauthorized"
        with MemoryClient(live_server.url, "agent-read") as ro:
            assert ro.search("zoe", "bicycle").results  # read-only keys may search
            with pytest.raises(PermissionDenied) as e:
                ro.add("zoe", "read-only keys cannot write")
            assert "read-only" in e.value.message

    await _sync(run)


async def test_reads_are_retried_on_503_and_retry_after_is_honoured(live_server) -> None:
    live_server.front.faults.append(Fault("/search", times=2, status=503, retry_after="1"))

    def run() -> float:
        with MemoryClient(live_server.url, "agent-key", retry=RetryPolicy(max_attempts=3, base_delay_s=0.01)) as mem:
            mem.add("amy", "I play the cello")
            t0 = time.monotonic()
            assert mem.search("amy", "cello").results
            return time.monotonic() - t0

    elapsed = await _sync(run)
    assert live_server.front.count("POST", "/search") == 3
    assert elapsed >= 2.0  # two waits of Retry-After: 1 s, not the 10 ms backoff


async def test_a_lost_answer_to_a_message_post_is_retried_without_storing_twice(live_server) -> None:
    """The app stores the message, the answer is lost (a 502 in front of it): the retry carries the
    same client_message_id, so the server answers created=False and holds the message once."""
    live_server.front.faults.append(Fault("/messages", times=1, status=502, retry_after=None, after_app=True))

    def run() -> AddMessagesOut:
        with MemoryClient(live_server.url, "agent-key", retry=FAST) as mem:
            out = mem.add("amy", "My flight to Oslo leaves on Friday")
            stored = [m.content for m in mem.iter_memories("amy")]
            assert len(stored) == 1 and "My flight to Oslo leaves on Friday" in stored[0]  # a date note may follow
            return out

    out = await _sync(run)
    assert live_server.front.count("POST", "/messages") == 2
    assert out.messages[0].created is False and out.messages[0].client_message_id.startswith("cli-")


async def test_updates_are_not_retried_after_the_request_was_sent(live_server) -> None:
    def run() -> None:
        with MemoryClient(live_server.url, "agent-key", retry=FAST) as mem:
            mid = mem.add("amy", "I live in Bergen").memories[0].id
            live_server.front.faults.append(Fault("/memories/" + mid, times=5, status=503))
            with pytest.raises(ServiceUnavailable) as e:
                mem.update("amy", mid, content="I live in Oslo")
            assert e.value.retry_after_s == 0 and e.value.message == "injected fault"
            assert live_server.front.count("PATCH", mid) == 1

    await _sync(run)


async def test_retries_stop_after_max_attempts(live_server) -> None:
    live_server.front.faults.append(Fault("/search", times=10, status=429))

    def run() -> None:
        with MemoryClient(live_server.url, "agent-key", retry=FAST) as mem, pytest.raises(RateLimited):
            mem.search("amy", "anything")

    await _sync(run)
    assert live_server.front.count("POST", "/search") == 3


async def test_timeouts_are_retried_then_reported(live_server) -> None:
    live_server.front.faults.append(Fault("/health", times=3, delay_s=1.5))

    def run() -> None:
        with MemoryClient(live_server.url, "agent-key", timeout_s=0.3, retry=FAST) as mem:
            with pytest.raises(MemoryConnectionError) as e:
                mem.health()
            assert e.value.code == "timeout" and e.value.status == 0

    await _sync(run)
    deadline = time.monotonic() + 5
    while live_server.front.count("GET", "/health") < 3 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert live_server.front.count("GET", "/health") == 3


async def test_unreachable_server_is_a_connection_error() -> None:
    def run() -> None:
        with MemoryClient("http://127.0.0.1:9", "k", retry=FAST) as mem, pytest.raises(MemoryConnectionError) as e:
            mem.search("amy", "anything")
        assert e.value.code == "connection_error"

    await _sync(run)


async def test_async_client_has_the_same_operations(live_server) -> None:
    live_server.front.faults.append(Fault("/context", times=1, status=503))
    async with AsyncMemoryClient(live_server.url, "agent-key", retry=FAST) as mem:
        added = await mem.add_messages(
            "kai", [{"content": f"Kai's favourite snack number {i} is dried mango"} for i in range(5)], mode="sync"
        )
        assert len(added.memories) == 5
        found = await mem.search("kai", "snack", limit=2)
        assert len(found.results) == 2
        ctx = await mem.context("kai", "What snacks does Kai like?", max_tokens=80)
        assert ctx.memories and ctx.tokens <= 80 and ctx.omitted > 0
        walked = [m.id async for m in mem.iter_memories("kai", page_size=2)]
        assert sorted(walked) == sorted(m.id for m in added.memories)
        first = added.memories[0].id
        assert (await mem.update("kai", first, content="Kai prefers dried apricots")).version == 2
        assert len(await mem.history("kai", first)) == 2
        with pytest.raises(NotFound):
            await mem.job("kai", "no-such-job")
        with pytest.raises(InvalidRequest) as e:
            await mem.context("kai", "snacks", max_tokens=10)
        assert e.value.field == "max_tokens"
    assert live_server.front.count("POST", "/context") == 3  # one 503 retried, one success, one 422


async def test_async_job_polling(live_server) -> None:
    """mode=async without an LLM stores the message and creates no job; with a job id that is not
    the user's the server answers 404, which the client raises (not a hang)."""
    async with AsyncMemoryClient(live_server.url, "agent-key", retry=FAST) as mem:
        out = await mem.add("kai", "Kai runs on Sundays", mode="async")
        assert out.job is None and out.memories
        with pytest.raises(NotFound):
            await mem.wait_for_job("kai", "job-of-someone-else", timeout_s=1)


def test_client_injected_http_client_is_used() -> None:
    """A caller's own httpx client (proxies, TLS, tracing) is used as is; auth headers are added per request."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"status": "ok"})

    http = httpx.Client(base_url="http://memory.test", transport=httpx.MockTransport(handler))
    with MemoryClient("http://ignored", "secret", http_client=http) as mem:
        assert mem.health() == {"status": "ok"}
    assert seen[0].headers["authorization"] == "Bearer secret" and str(seen[0].url) == "http://memory.test/health"


def test_an_answer_that_is_not_the_apis_is_a_server_error() -> None:
    """A proxy's HTML page with status 200 (or a body of the wrong shape) is reported, not parsed into garbage."""
    from cognis_memory.client import ServerError

    bodies = iter([httpx.Response(200, text="<html>captive portal</html>"), httpx.Response(200, json={"results": 7})])
    http = httpx.Client(base_url="http://memory.test", transport=httpx.MockTransport(lambda request: next(bodies)))
    with MemoryClient("http://ignored", "k", http_client=http) as mem:
        for _ in range(2):
            with pytest.raises(ServerError) as e:
                mem.search("amy", "anything")
            assert e.value.code == "invalid_response" and "/search" in e.value.message


async def test_clients_read_a_sessions_messages_in_order_page_by_page(live_server) -> None:
    sent = [
        {"content": f"turn {i}", "timestamp": f"2025-03-0{day}T12:00:00Z", "session_id": "chat", "speaker": "Lu"}
        for i, day in enumerate([3, 1, 2, 5, 4])
    ]

    def run() -> list[str]:
        with MemoryClient(live_server.url, "agent-key") as mem:
            mem.add_messages("lu", sent)
            mem.add_messages("lu", [{"content": "another session", "session_id": "other"}])
            first = mem.list_session_messages("lu", "chat", limit=2)
            assert [m.content for m in first.messages] == ["turn 1", "turn 2"] and first.next_cursor
            walked = [m.content for m in mem.iter_session_messages("lu", "chat", page_size=2)]
            # oldest first, by cursor (the stored text may have the speaker in front)
            listed = [m.content.split(": ", 1)[-1] for m in mem.iter_memories("lu", page_size=2)]
            assert listed == ["turn 1", "turn 2", "turn 0", "turn 4", "turn 3", "another session"]
            return walked

    assert await _sync(run) == ["turn 1", "turn 2", "turn 0", "turn 4", "turn 3"]
    async with AsyncMemoryClient(live_server.url, "agent-key") as mem:
        walked = [m.content async for m in mem.iter_session_messages("lu", "chat", page_size=3)]
        assert walked == ["turn 1", "turn 2", "turn 0", "turn 4", "turn 3"]
        with pytest.raises(InvalidRequest):
            await mem.list_session_messages("lu", "chat", cursor="garbled")
