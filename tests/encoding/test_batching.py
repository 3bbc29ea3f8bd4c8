"""The embedding queue: off the event loop, batched across requests, by priority, fair, in input order.

The embedder here is a test implementation of the ``Embedder`` protocol whose calls can be held
at a gate, so the tests decide what is pending while a model call runs; the queue and the
encoder under test are the real ones.
"""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from cognis_memory.encoding.batching import EmbeddingBatcher, Priority
from cognis_memory.encoding.encoder import MatryoshkaEncoder


class GatedEmbedder:
    """Vectors from a hash of each text; each call waits until the test opens the gate."""

    name, dim = "gated", 8

    def __init__(self, *, hold: bool = True) -> None:
        self.calls: list[list[str]] = []
        self.gate = threading.Semaphore(0)
        self.hold = hold
        self.started = threading.Semaphore(0)
        self.running = 0
        self.most_running = 0
        self._lock = threading.Lock()

    def embed(self, texts):
        with self._lock:
            self.calls.append(list(texts))
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        self.started.release()
        if self.hold:
            assert self.gate.acquire(timeout=30), "the test never opened the gate"
        with self._lock:
            self.running -= 1
        if any(t == "boom" for t in texts):
            raise RuntimeError("model failed")
        return np.stack([vector(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)


def vector(text: str) -> np.ndarray:
    v = np.random.default_rng(abs(hash(text)) % 2**32).normal(size=GatedEmbedder.dim).astype(np.float32)
    return v / np.linalg.norm(v)


async def started(embedder: GatedEmbedder, calls: int = 1) -> None:
    """Wait (off the loop) until ``calls`` more model calls have begun."""
    for _ in range(calls):
        assert await asyncio.to_thread(embedder.started.acquire, True, 30)


async def until_queued(batcher: EmbeddingBatcher, texts: int) -> None:
    while batcher.queued_texts < texts:
        await asyncio.sleep(0.001)


def release(embedder: GatedEmbedder, n: int = 100) -> None:
    for _ in range(n):
        embedder.gate.release()


async def test_the_event_loop_runs_while_the_model_works() -> None:
    embedder = GatedEmbedder()
    enc = MatryoshkaEncoder(embedder, dim_short=4, cpu_threads=None)
    task = asyncio.create_task(enc.encode_async(["a long message"]))
    await started(embedder)
    ticks = 0
    for _ in range(50):  # the loop keeps running other work while the model call is held
        await asyncio.sleep(0)
        ticks += 1
    assert ticks == 50 and not task.done()
    release(embedder)
    full, short = await task
    assert full.shape == (1, 8) and short.shape == (1, 4)
    enc.close()


async def test_vectors_come_back_in_input_order() -> None:
    embedder = GatedEmbedder(hold=False)
    batcher = EmbeddingBatcher(embedder, max_batch=3)
    texts = ["ccc", "a", "bbbbbbbb", "dd", "eeeee", "f", "gggggggggggg"]
    got = await batcher.embed(texts)
    np.testing.assert_allclose(got, np.stack([vector(t) for t in texts]))
    # dispatched shortest first, so each call holds texts of similar length
    assert embedder.calls == [["a", "f", "dd"], ["ccc", "eeeee", "bbbbbbbb"], ["gggggggggggg"]]
    batcher.close()


async def test_requests_waiting_together_share_one_model_call() -> None:
    embedder = GatedEmbedder()
    batcher = EmbeddingBatcher(embedder)
    first = asyncio.create_task(batcher.embed(["first"]))
    await started(embedder)
    waiting = [asyncio.create_task(batcher.embed([f"req {i} a", f"req {i} b"])) for i in range(5)]
    await until_queued(batcher, 10)
    release(embedder)
    await asyncio.gather(first, *waiting)
    assert len(embedder.calls) == 2 and len(embedder.calls[1]) == 10
    batcher.close()


async def test_a_query_overtakes_a_bulk_import_and_a_small_request_is_not_queued_behind_it() -> None:
    embedder = GatedEmbedder()
    batcher = EmbeddingBatcher(embedder, max_batch=4)
    bulk = asyncio.create_task(batcher.embed([f"bulk {i:03d}" for i in range(40)], Priority.INGEST))
    await started(embedder)  # the bulk import's first call is running; 36 of its texts wait
    small = asyncio.create_task(batcher.embed(["small 1", "small 2"], Priority.INGEST))
    query = asyncio.create_task(batcher.embed(["where do I live?"], Priority.QUERY))
    await until_queued(batcher, 36 + 3)
    embedder.gate.release()  # end the first call
    await started(embedder)
    assert embedder.calls[1] == ["where do I live?"]  # the query alone, ahead of everything
    embedder.gate.release()
    await started(embedder)
    assert "small 1" in embedder.calls[2] and "small 2" in embedder.calls[2]  # in turn with the bulk
    release(embedder)
    await asyncio.gather(bulk, small, query)
    batcher.close()


async def test_background_work_is_not_starved_forever() -> None:
    embedder = GatedEmbedder()
    batcher = EmbeddingBatcher(embedder, max_batch=1, aging_s=0.05)
    first = asyncio.create_task(batcher.embed(["first"], Priority.INGEST))
    await started(embedder)
    job = asyncio.create_task(batcher.embed(["job"], Priority.BACKGROUND))
    await asyncio.sleep(0.2)  # the job waits longer than two aging steps...
    ingest = asyncio.create_task(batcher.embed(["newer request"], Priority.INGEST))
    await until_queued(batcher, 2)
    release(embedder)
    await asyncio.gather(first, job, ingest)
    assert embedder.calls[1] == ["job"]  # ...so it now goes before a newer request
    batcher.close()


async def test_a_failed_model_call_fails_its_callers_only() -> None:
    embedder = GatedEmbedder()
    batcher = EmbeddingBatcher(embedder, max_batch=1)
    first = asyncio.create_task(batcher.embed(["first"]))
    await started(embedder)
    bad = asyncio.create_task(batcher.embed(["boom", "never embedded"]))
    good = asyncio.create_task(batcher.embed(["fine"]))
    await until_queued(batcher, 3)
    release(embedder)
    with pytest.raises(RuntimeError, match="model failed"):
        await bad
    np.testing.assert_allclose((await good)[0], vector("fine"))
    await first
    assert ["never embedded"] not in embedder.calls  # the rest of a failed request is dropped
    batcher.close()


async def test_a_cancelled_request_is_not_embedded() -> None:
    embedder = GatedEmbedder()
    batcher = EmbeddingBatcher(embedder, max_batch=2)
    first = asyncio.create_task(batcher.embed(["first"]))
    await started(embedder)
    gone = asyncio.create_task(batcher.embed([f"gone {i}" for i in range(6)]))
    await until_queued(batcher, 6)
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    release(embedder)
    await first
    assert await batcher.embed(["after"]) is not None
    assert not any(t.startswith("gone") for call in embedder.calls for t in call)
    batcher.close()


async def test_workers_run_model_calls_at_once() -> None:
    embedder = GatedEmbedder()
    batcher = EmbeddingBatcher(embedder, workers=2, max_batch=2)
    task = asyncio.create_task(batcher.embed([f"text {i}" for i in range(8)]))
    await started(embedder, calls=2)  # two calls are held at the same time
    assert embedder.most_running == 2
    release(embedder)
    got = await task
    assert got.shape == (8, 8)
    batcher.close()


async def test_the_token_budget_bounds_one_call() -> None:
    embedder = GatedEmbedder(hold=False)
    batcher = EmbeddingBatcher(embedder, max_batch=64, max_tokens=600)
    long_texts = [f"{i} " + "word " * 300 for i in range(6)]  # about 256 estimated tokens each
    await batcher.embed(long_texts)
    assert [len(c) for c in embedder.calls] == [2, 2, 2]
    batcher.close()


async def test_close_lets_queued_work_finish_and_a_later_call_starts_again() -> None:
    embedder = GatedEmbedder(hold=False)
    batcher = EmbeddingBatcher(embedder)
    await batcher.embed(["one"])
    batcher.close()
    assert (await batcher.embed(["two"])).shape == (1, 8)
    batcher.close()


async def test_an_async_embedder_is_awaited_directly() -> None:
    class RemoteEmbedder:  # a remote embedding service: no thread needed
        name, dim = "remote", 8

        def __init__(self) -> None:
            self.requests: list[list[str]] = []

        async def embed_async(self, texts):
            self.requests.append(list(texts))
            await asyncio.sleep(0)
            return np.stack([vector(t) for t in texts])

        def embed(self, texts):
            raise AssertionError("the encoder must not run a remote embedder on a thread")

    remote = RemoteEmbedder()
    enc = MatryoshkaEncoder(remote, dim_short=4, cpu_threads=None)
    full, _ = await enc.encode_async(["hello", "world"])
    np.testing.assert_allclose(full[0], vector("hello"), atol=1e-6)
    assert remote.requests == [["hello", "world"]] and enc.batcher.calls == 0


async def test_a_malformed_answer_of_the_embedder_fails_its_callers_instead_of_hanging() -> None:
    class ShortEmbedder(GatedEmbedder):
        def embed(self, texts):
            return super().embed(texts)[:-1]  # one row short

    embedder = ShortEmbedder(hold=False)
    batcher = EmbeddingBatcher(embedder)
    with pytest.raises(ValueError, match="returned"):
        await asyncio.wait_for(batcher.embed(["a", "b"]), timeout=30)
    assert (await batcher.embed([])).shape == (0, 8)
    batcher.close()
