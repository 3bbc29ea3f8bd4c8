"""The embedding queue: micro-batches model work of concurrent requests on dedicated worker threads.

Every text the service embeds (raw messages, extracted facts, edited memories, queries) goes
through one :class:`EmbeddingBatcher`. A caller submits its texts with a :class:`Priority` and
awaits a future; ``workers`` threads (1 in the server, the CPU count for ``cognis-memory
import``) take pending texts and run the model, so:

* **the event loop never runs the model**: health checks, other tenants' requests and the job
  worker keep running while a large import is embedded (the model calls release the GIL);
* **batching across messages and requests**: a free worker takes what is pending at once, up
  to ``max_batch`` texts and ``max_tokens`` estimated tokens per model call, so concurrent
  requests share forward passes. There is no waiting window: a text submitted to an idle
  queue runs at once; batches grow only while the model is busy;
* **length grouping**: a request's texts are dispatched shortest first (its vectors are put
  back in input order), so the texts of one model call have similar lengths and little
  padding, and the embedder groups each call's texts by length again;
* **priorities and fairness**: a model call takes only texts of the most urgent level waiting
  (queries before request ingest before background work), and within a level it takes
  texts from every waiting request in turn, so a 500-message import delays a query by at most
  one model call and a small request is not queued behind the whole import. A request's level
  improves by one every ``aging_s`` seconds it waits, so background work cannot starve.

The token budget uses a length estimate (characters / 4, capped at the model's maximum), not
the tokenizer: it bounds how long one call takes, nothing depends on its precision.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from ..errors import SettingError
from ..providers.base import Embedder


class Priority(IntEnum):
    """How urgently a caller waits for its vectors (lower runs first)."""

    QUERY = 0  #: a search or an edit is waiting for one or a few vectors
    INGEST = 1  #: a request is storing its messages
    BACKGROUND = 2  #: extraction jobs and bulk imports


#: The model's input limit in tokens (all-MiniLM-L6-v2: 256); longer texts are truncated.
MAX_TEXT_TOKENS = 256


def estimated_tokens(text: str) -> int:
    """A cheap upper-bound-ish estimate of a text's token count (about 4 characters per token)."""
    return min(MAX_TEXT_TOKENS, len(text) // 4 + 2)


@dataclass(eq=False)
class _Request:
    texts: list[str]
    order: list[int]  # input positions, shortest text first
    priority: Priority
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[np.ndarray]
    submitted: float
    seq: int
    vectors: np.ndarray | None = None
    next: int = 0  # position in ``order`` of the next text to hand out
    done: int = 0  # texts embedded so far
    failed: bool = False
    cancelled: bool = False

    def level(self, now: float, aging_s: float) -> int:
        return max(0, int(self.priority) - int((now - self.submitted) / aging_s))

    @property
    def remaining(self) -> int:
        return len(self.order) - self.next


class EmbeddingBatcher:
    """Runs ``embedder.embed`` on worker threads for the requests of any event loop."""

    def __init__(
        self,
        embedder: Embedder,
        *,
        workers: int = 1,
        max_batch: int = 64,
        max_tokens: int = 2048,
        aging_s: float = 5.0,
    ) -> None:
        if workers < 1:
            raise SettingError("embedding_workers", "must be at least 1")
        self.embedder = embedder
        self.workers = workers
        self.max_batch = max_batch
        self.max_tokens = max_tokens
        self.aging_s = aging_s
        self._pending: list[_Request] = []
        self._cond = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._seq = itertools.count()
        #: model calls made and texts embedded (for benchmarks and tests)
        self.calls = 0
        self.texts = 0

    # -- callers (any event loop) ---------------------------------------------------------
    async def embed(self, texts: Sequence[str], priority: Priority = Priority.INGEST) -> np.ndarray:
        """The embedder's vectors of ``texts`` (rows in input order), computed off the event loop."""
        if not texts:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        loop = asyncio.get_running_loop()
        items = list(texts)
        request = _Request(
            texts=items,
            order=sorted(range(len(items)), key=lambda i: len(items[i])),
            priority=priority,
            loop=loop,
            future=loop.create_future(),
            submitted=time.monotonic(),
            seq=next(self._seq),
        )
        with self._cond:
            self._start_workers()
            self._pending.append(request)
            self._cond.notify()
        try:
            return await request.future
        except asyncio.CancelledError:
            request.cancelled = True  # its remaining texts are dropped, not embedded
            raise

    def close(self) -> None:
        """Stop the worker threads once the texts already queued are embedded (a later call starts them again)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            threads, self._threads = self._threads, []
        for t in threads:
            if t is not threading.current_thread():
                t.join(timeout=60)
        with self._cond:
            self._closed = False

    @property
    def queued_texts(self) -> int:
        with self._cond:
            return sum(r.remaining for r in self._pending)

    # -- workers ---------------------------------------------------------------------------
    def _start_workers(self) -> None:
        while len(self._threads) < self.workers:
            t = threading.Thread(target=self._work, name=f"embedding-{len(self._threads)}", daemon=True)
            self._threads.append(t)
            t.start()

    def _take(self) -> list[tuple[_Request, int, int]]:
        """Slices ``(request, start, end)`` of ``order`` for one model call (called under the lock)."""
        self._pending = [r for r in self._pending if r.remaining and not r.cancelled and not r.failed]
        if not self._pending:
            return []
        now = time.monotonic()
        level = min(r.level(now, self.aging_s) for r in self._pending)
        waiting = sorted((r for r in self._pending if r.level(now, self.aging_s) == level), key=lambda r: r.seq)
        taken: dict[_Request, int] = {}
        count = tokens = 0
        progress = True
        while progress and count < self.max_batch:
            progress = False
            for r in waiting:  # one text from each waiting request in turn
                pos = r.next + taken.get(r, 0)
                if pos >= len(r.order):
                    continue
                cost = estimated_tokens(r.texts[r.order[pos]])
                if count and (count >= self.max_batch or tokens + cost > self.max_tokens):
                    progress = False
                    break
                taken[r] = taken.get(r, 0) + 1
                count += 1
                tokens += cost
                progress = True
        slices = []
        for r, n in taken.items():
            slices.append((r, r.next, r.next + n))
            r.next += n
        return slices

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._closed and not any(r.remaining for r in self._pending):
                    self._cond.wait()
                slices = self._take()
                if not slices:
                    if self._closed:
                        return
                    continue
                if any(r.remaining for r in self._pending):
                    self._cond.notify()  # another worker can start on the rest now
            batch = [r.texts[i] for r, start, end in slices for i in r.order[start:end]]
            try:
                vectors = np.asarray(self.embedder.embed(batch), dtype=np.float32)
                if vectors.ndim != 2 or vectors.shape[0] != len(batch):
                    raise ValueError(f"the embedder returned {vectors.shape} for {len(batch)} texts")
                self.calls += 1
                self.texts += len(batch)
                offset = 0
                for r, start, end in slices:
                    n = end - start
                    self._deliver(r, r.order[start:end], vectors[offset : offset + n])
                    offset += n
            except Exception as exc:  # handed to every waiting caller of this call
                for r, _, _ in slices:  # a caller is never left waiting on a dead call
                    self._fail(r, exc)

    def _deliver(self, r: _Request, positions: list[int], vectors: np.ndarray) -> None:
        with self._cond:
            if r.failed:
                return
            if r.vectors is None:
                r.vectors = np.empty((len(r.texts), vectors.shape[1]), dtype=np.float32)
            r.vectors[positions] = vectors
            r.done += len(positions)
            finished = r.done == len(r.texts)
        if finished:
            _call_soon(r, r.vectors, None)

    def _fail(self, r: _Request, exc: BaseException) -> None:
        with self._cond:
            if r.failed:
                return
            r.failed = True
        _call_soon(r, None, exc)


def _call_soon(r: _Request, value: np.ndarray | None, exc: BaseException | None) -> None:
    try:
        r.loop.call_soon_threadsafe(_resolve, r.future, value, exc)
    except RuntimeError:  # the caller's loop is closed: nobody is waiting any more
        pass


def _resolve(future: asyncio.Future[np.ndarray], value: np.ndarray | None, exc: BaseException | None) -> None:
    if future.done():  # the caller was cancelled meanwhile
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(value)  # type: ignore[arg-type]
