"""The dual store (production): PostgreSQL + pgvector as the system of record, OpenSearch for BM25.

Write path (transactional outbox):

1. Every write goes to Postgres, and in the *same transaction* the outbox gets one row per
   OpenSearch change (memory id, version, op ``upsert``/``delete``; ``forget`` for a user).
2. Right after the commit the writer wakes the background drain loop
   (:meth:`DualStore.start_background_drain`, run by the service) and returns: the write never
   waits for OpenSearch, and one drain round pushes the rows of every write since the last one.
   The loop also drains every ``interval_s``, and backs off exponentially while OpenSearch is
   down (wake-ups do not cut a backoff short). Without a running loop (tools, tests) the writer
   makes one best-effort drain attempt itself (skipped for a few seconds after OpenSearch was
   found down). The service's index pushes with ``refresh=true``, so a round ends when its
   documents are searchable, and then tells :meth:`DualStore.on_indexed` listeners which users
   changed (the service invalidates their cached searches). Rounds start at most every
   ``min_round_spacing_s`` (0.25 s in the service), which bounds those refreshes to four a second
   per process, each covering every write of its round. A drain locks a batch of rows with
   ``FOR UPDATE SKIP LOCKED`` (several processes can drain at once), pushes them in one bulk
   request, and deletes the rows only after OpenSearch acknowledged them; failures stay in the
   outbox with an attempt count and the last error.
3. The drain does not replay the outbox row: it pushes the memory's state *as Postgres has it
   now* (current -> index; superseded or gone -> delete), under external versions (see
   :mod:`..opensearch.keyword_index`), so replays in any order converge and a stale retry cannot
   resurrect an old version.
4. :meth:`DualStore.outbox_state` tells how far OpenSearch is behind (rows waiting, age of the oldest); the
   store emits no metric itself, the service reports it on an interval
   (:mod:`cognis_memory.telemetry.outbox`).

Roles (:mod:`.roles`): PostgreSQL supplies messages, memory versions, vector search, jobs and API keys
(its writes add the outbox rows and call :meth:`DualStore.after_write`, because the dual store attaches
itself as the outbox listener); only keyword search is composed here (:class:`HydratedKeywordSearch`).

Read path: vector search, fetches, chains, jobs and keys are Postgres. Keyword search asks
OpenSearch for ids, then *hydrates* them from Postgres keeping only rows that are current there
for this owner, so a document the outbox has not caught up with yet can never surface an old
version or a deleted/forgotten memory. When OpenSearch is unreachable, keyword search raises
``DependencyUnavailableError("opensearch")`` within ``search_timeout_s`` and the pipeline answers from
the vector side (degraded). ``forget_user`` deletes the user's rows in every Postgres table and
leaves a durable ``forget`` outbox item in the same transaction; it is executed at once
(``delete_by_query`` on tenant + user) or, if OpenSearch is down, by a later drain.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from ...domain import Memory, Owner
from ...errors import DependencyUnavailableError
from ..context import StoreContext
from ..opensearch.keyword_index import IndexOp, OpenSearchKeywordIndex, doc_version_current, doc_version_gone
from ..postgres import PostgresStore
from ..roles import StoreBundle
from ..settings import OpenSearchSettings, PostgresSettings
from .keywords import HydratedKeywordSearch
from .outbox import OutboxBatch, OutboxItem, OutboxState, PostgresOutbox

log = logging.getLogger(__name__)

#: How many on_indexed calls (a cache invalidation each: one Redis round trip) a drain round has in flight at once.
INDEXED_CALLS_AT_ONCE = 16


@dataclass(slots=True)
class DrainResult:
    claimed: int = 0
    done: int = 0
    failed: int = 0
    deleted_documents: int = 0


def _retry_delay(attempts: int) -> float:
    """Per-item retry delay after ``attempts`` failed attempts: 1 s doubling, at most 5 min."""
    return float(min(300.0, 2.0 ** max(0, attempts)))


class DualStore:
    """The lifecycle of the dual store and the relay that keeps OpenSearch in step with PostgreSQL
    (the system of record) through the transactional outbox. :meth:`roles` composes the store:
    PostgreSQL supplies every role but keyword search, :class:`HydratedKeywordSearch` that one.

    ``outbox_batch``: rows per drain round. ``inline_drain``: without a running background loop, try a drain
    right after each write (with one, a write wakes the loop instead).
    ``down_skip_s``: after OpenSearch was found down, skip inline drains for that long.
    ``background_drain_interval_s``: when set, ``open()`` starts the background drain loop (backing off to
    ``down_skip_s`` at most while OpenSearch is down). ``min_round_spacing_s``: the loop starts a round at
    most that often (writes arriving in between wait for the next round, which pushes them together).
    """

    name = "dual"

    def __init__(
        self,
        postgres: PostgresStore,
        keyword: OpenSearchKeywordIndex,
        *,
        outbox_batch: int = 100,
        inline_drain: bool = True,
        down_skip_s: float = 5.0,
        background_drain_interval_s: float | None = None,
        min_round_spacing_s: float = 0.0,
    ) -> None:
        self.pg = postgres
        self.outbox = PostgresOutbox(postgres)
        self.keyword = keyword
        self.outbox_batch = outbox_batch
        self.inline_drain = inline_drain
        self.down_skip_s = down_skip_s
        self.background_drain_interval_s = background_drain_interval_s
        self.min_round_spacing_s = min_round_spacing_s
        self._os_down_until = 0.0
        self._drain_task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        self._indexed_listeners: list[Callable[[Owner], Awaitable[None]]] = []
        postgres.attach_outbox(self)

    # -- lifecycle -------------------------------------------------------------------------------
    async def open(self) -> None:
        await self.pg.open()
        try:
            await self.keyword.ensure_index()
        except DependencyUnavailableError as e:  # writes still work; the index is created by a later drain
            log.warning("dual store: OpenSearch unavailable at open (%s); keyword search degraded until it returns", e)
            self._mark_down()
        if self.background_drain_interval_s is not None:
            # while OpenSearch is down, one attempt every down_skip_s at most: it drains soon after it returns
            interval = self.background_drain_interval_s
            self.start_background_drain(interval_s=interval, max_backoff_s=max(interval, self.down_skip_s))

    async def close(self) -> None:
        """Stop the drain loop, then push what its last writes left in the outbox (one best-effort round): a
        short-lived process (a CLI ``add``) would otherwise leave its writes to the next process's drain."""
        if self._drain_task is not None:
            await self.stop_background_drain()
            await self._drain_once()
        await self.pg.close()
        await self.keyword.close()

    async def health(self) -> dict[str, bool]:
        pg, os_ok = await asyncio.gather(self.pg.ping(), self.keyword.ping())
        return {"postgres": pg, "opensearch": os_ok}

    # -- outbox ----------------------------------------------------------------------------------
    def on_indexed(self, listener: Callable[[Owner], Awaitable[None]]) -> None:
        """Call ``listener(owner)`` after a drain pushed changes of that owner's memories to OpenSearch (with the
        ``refresh=true`` of the service's index: once they are searchable there). The service invalidates
        the owner's cached searches with it: one computed after the write but before its keyword side caught
        up would otherwise be served until its TTL."""
        self._indexed_listeners.append(listener)

    async def _indexed(self, owners: set[Owner]) -> None:
        """Tell the listeners, concurrently (up to :data:`INDEXED_CALLS_AT_ONCE` calls at a time), which owners
        a push made searchable. It runs before the batch's rows are acknowledged, while they are still
        locked: a process that dies in between leaves the rows to be pushed and announced again, where one
        that acknowledged first could leave an owner's stale cached searches to their TTL."""
        if not owners or not self._indexed_listeners:
            return
        limit = asyncio.Semaphore(INDEXED_CALLS_AT_ONCE)

        async def tell(listener: Callable[[Owner], Awaitable[None]], owner: Owner) -> None:
            async with limit:
                try:
                    await listener(owner)
                except Exception:  # the documents are indexed; a listener's failure is only logged
                    log.exception("dual store: on_indexed listener failed")

        await asyncio.gather(*(tell(listener, o) for o in owners for listener in self._indexed_listeners))

    def _mark_down(self) -> None:
        self._os_down_until = time.monotonic() + self.down_skip_s

    async def after_write(self) -> None:
        """Right after a commit: wake the background drain loop, or without one make one best-effort drain
        (never raises; the outbox keeps the work)."""
        if self._drain_task is not None and not self._drain_task.done():
            self._wake.set()
            return
        if self.inline_drain:
            await self._drain_once()

    async def _drain_once(self) -> None:
        """One best-effort drain round (never raises; the outbox keeps the work), skipped for a while after
        OpenSearch was found down."""
        if time.monotonic() < self._os_down_until:
            return
        try:
            await self._drain_batch(self.outbox_batch)
        except DependencyUnavailableError as e:
            log.info("dual store: OpenSearch unavailable, outbox keeps the write (%s)", e)
        except Exception:  # the write itself succeeded
            log.exception("dual store: outbox drain failed")

    async def after_forget(self, outbox_id: int) -> dict[str, int]:
        """Run the ``forget`` item of a user at once (``delete_by_query`` on tenant + user); when
        OpenSearch is down it stays in the outbox for a later drain."""
        try:
            res = await self._drain_batch(1, only_ids=[outbox_id])
            return {"index_documents": res.deleted_documents, "index_pending": 0 if res.done else 1}
        except DependencyUnavailableError as e:
            log.warning("dual store: OpenSearch unavailable; forget of one user stays in the outbox (%s)", e)
            return {"index_documents": 0, "index_pending": 1}

    async def drain_outbox(self, max_items: int | None = None) -> int:
        """Push up to ``max_items`` due outbox rows to OpenSearch; returns how many were completed.

        Raises ``DependencyUnavailableError("opensearch")`` when OpenSearch is unreachable (rows stay).
        """
        budget = self.outbox_batch if max_items is None else max_items
        done = 0
        while budget > 0:
            res = await self._drain_batch(min(self.outbox_batch, budget))
            done += res.done
            budget -= res.claimed
            if res.claimed == 0 or res.done == 0:
                break
        return done

    async def outbox_size(self) -> int:
        return await self.outbox.size()

    async def outbox_state(self) -> OutboxState:
        """The outbox's backlog now: rows still to push to OpenSearch and the age of the oldest, seconds. The
        service reports them as metrics on an interval (the store itself emits nothing): a backlog that grows,
        or an oldest row that keeps ageing, means new memories are missing from keyword search."""
        return await self.outbox.state()

    async def _drain_batch(self, limit: int, *, only_ids: Sequence[int] | None = None) -> DrainResult:
        result = DrainResult()
        error: DependencyUnavailableError | None = None
        try:
            await self.keyword.ensure_index()
        except DependencyUnavailableError:
            self._mark_down()
            raise
        async with self.outbox.batch(limit, only_ids=only_ids) as batch:
            result.claimed = len(batch.items)
            pending: list[OutboxItem] = []
            todo = list(batch.items)
            forget: OutboxItem | None = None
            try:
                while todo:
                    item = todo.pop(0)
                    if item.op != "forget":
                        pending.append(item)
                        continue
                    # A forget is a barrier: everything before it is pushed first.
                    await self._push(batch, pending, result)
                    pending, forget = [], item
                    try:
                        result.deleted_documents += await self.keyword.delete_owner(Owner(item.tenant_id, item.user_id))
                    except DependencyUnavailableError:
                        raise
                    except Exception as e:  # a bad item must not block the outbox
                        log.exception("dual store: forget item %s failed", item.id)
                        await batch.fail([item.id], f"{type(e).__name__}: {e}", _retry_delay(item.attempts))
                        result.failed += 1
                    else:
                        await batch.ack([item.id])
                        result.done += 1
                    forget = None
                await self._push(batch, pending, result)
                pending = []
            except DependencyUnavailableError as e:
                error = e
                self._mark_down()
                rest = [i.id for i in ([forget] if forget else []) + pending + todo]
                await batch.fail(rest, str(e), retry_in_s=0.0)  # due again at once: the drain loop backs off
                result.failed += len(rest)
        if error is not None:
            raise error
        if result.claimed:
            self._os_down_until = 0.0
        return result

    async def _push(self, batch: OutboxBatch, items: list[OutboxItem], result: DrainResult) -> None:
        """Mirror the Postgres state of the items' memories into OpenSearch (one bulk request)."""
        if not items:
            return
        ops: dict[str, IndexOp] = {}
        for item in items:
            assert item.memory_id is not None
            if item.memory_id in ops:
                continue
            state = batch.states.get(item.memory_id)
            if state is not None and state.is_current:
                ops[item.memory_id] = IndexOp(
                    "index", state.id, doc_version_current(state.version), OpenSearchKeywordIndex.document(state)
                )
            else:
                version = state.version if state is not None else (item.version or 0)
                ops[item.memory_id] = IndexOp("delete", item.memory_id, doc_version_gone(version))
        try:
            outcomes = {r.memory_id: r for r in await self.keyword.apply(list(ops.values()))}
        except DependencyUnavailableError:
            raise
        except Exception as e:  # e.g. a rejected request: retry these items later
            log.exception("dual store: bulk push of %d outbox items failed", len(items))
            for item in items:
                await batch.fail([item.id], f"{type(e).__name__}: {e}", _retry_delay(item.attempts))
            result.failed += len(items)
            return
        ok_ids = [i.id for i in items if outcomes[str(i.memory_id)].ok]
        await self._indexed({Owner(i.tenant_id, i.user_id) for i in items if outcomes[str(i.memory_id)].ok})
        await batch.ack(ok_ids)
        result.done += len(ok_ids)
        for item in items:
            r = outcomes[str(item.memory_id)]
            if not r.ok:
                result.failed += 1
                log.warning(
                    "dual store: outbox item %s (%s) failed with %s: %s", item.id, item.memory_id, r.status, r.error
                )
                await batch.fail([item.id], f"{r.status}: {r.error}", _retry_delay(item.attempts))

    def start_background_drain(self, *, interval_s: float = 1.0, max_backoff_s: float = 30.0) -> None:
        """Drain the outbox forever in a task of the running loop (idempotent)."""
        if self._drain_task is not None and not self._drain_task.done():
            return
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        self._drain_task = asyncio.create_task(self._drain_loop(interval_s, max_backoff_s), name="cognis-outbox-drain")

    async def stop_background_drain(self) -> None:
        task, self._drain_task = self._drain_task, None
        if task is None:
            return
        self._stop.set()
        self._wake.set()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task

    async def _drain_loop(self, interval_s: float, max_backoff_s: float) -> None:
        """Drain, then wait for a write's wake-up or ``interval_s``; after a failure wait out the backoff
        (only a stop ends it early), so writes during an outage do not turn into a stream of attempts."""
        delay = interval_s
        round_started, full = -math.inf, False
        while not self._stop.is_set():
            spacing_left = round_started + self.min_round_spacing_s - time.monotonic()
            if spacing_left > 0 and not full:  # a round just ran: let this one gather the writes of the spacing
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), timeout=spacing_left)
                if self._stop.is_set():
                    break
            round_started = time.monotonic()
            self._wake.clear()  # a write from now on wakes the next round
            failed = False
            try:
                res = await self._drain_batch(self.outbox_batch)  # one bulk request per round
                delay = interval_s
                full = res.claimed >= self.outbox_batch and res.done > 0
                if full:
                    continue  # a backlog: go again at once (a full round already shares its refresh)
            except DependencyUnavailableError as e:
                failed, delay = True, min(max_backoff_s, delay * 2)
                log.info("dual store: outbox drain waiting for OpenSearch (%s); next try in %.1fs", e, delay)
            except Exception:  # keep the loop alive (Postgres blips, bugs are logged)
                failed, delay = True, min(max_backoff_s, delay * 2)
                log.exception("dual store: outbox drain failed; next try in %.1fs", delay)
            event = self._stop if failed else self._wake
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout=delay * random.uniform(0.8, 1.2))

    # -- roles ---------------------------------------------------------------------------------
    def roles(self) -> StoreBundle:
        """PostgreSQL for every role but keyword search; BM25 from OpenSearch, hydrated from PostgreSQL."""
        return StoreBundle(
            backend=self,
            messages=self.pg.messages,
            memories=self.pg.memories,
            vectors=self.pg.vectors,
            keywords=HydratedKeywordSearch(self.keyword, self.pg.memories),
            jobs=self.pg.jobs,
            api_keys=self.pg.api_keys,
        )

    # -- bulk load (benchmarks, imports) ----------------------------------------------------------
    async def bulk_load(self, memories: Sequence[Memory]) -> None:
        """COPY into Postgres (index built after), then bulk-index OpenSearch directly (no outbox)."""
        await self.pg.memories.bulk_load(memories)
        await self.keyword.bulk_index([m for m in memories if m.is_current])


#: The service's drain starts a round at most this often: each round's bulk refreshes the shards it wrote (a new
#: small segment), so this bounds the refreshes to four a second per process, while a write waits at most this
#: long, plus one round, to be searchable. Waiting out the index's own 1 s refresh instead (``refresh=wait_for``)
#: made every round last up to a second, and the writes that came during it waited for the next one.
DRAIN_ROUND_SPACING_S = 0.25

#: Keyword searches give up quickly so that the pipeline can answer from the vector side.
KEYWORD_SEARCH_TIMEOUT_CAP_S = 2.0


def from_settings(context: StoreContext, *, postgres: PostgresSettings, opensearch: OpenSearchSettings) -> StoreBundle:
    """PostgreSQL (DSN and app role from its settings, see :mod:`..connections`) and the OpenSearch keyword
    index over ``opensearch_url``, outbox drained in the background every second (registry entry ``dual``)."""
    from ..connections import opensearch_client, postgres_app_dsn, postgres_dsn

    app_dsn = postgres_app_dsn(postgres, aws_region=context.aws_region)
    # Without migrating (postgres_migrate=false) and with an application role, no owner credentials are needed.
    owner_dsn = postgres_dsn(postgres, aws_region=context.aws_region) if postgres.migrate or app_dsn is None else None
    pool_dsn = app_dsn or owner_dsn
    assert pool_dsn is not None
    system_of_record = PostgresStore(
        pool_dsn,
        dim=context.dim,
        dim_short=context.dim_short,
        pool_max=max(1, postgres.pool_size),
        migration_dsn=owner_dsn,
        app_role=postgres.app_user,
        vector_space=context.vector_space,
        migrate=postgres.migrate,
    )
    keyword = OpenSearchKeywordIndex(
        opensearch_client(opensearch, store=context.kind, aws_region=context.aws_region),
        index_prefix=opensearch.index_prefix,
        shards=opensearch.shards,
        search_timeout_s=min(opensearch.timeout_s, KEYWORD_SEARCH_TIMEOUT_CAP_S),
        write_timeout_s=opensearch.timeout_s,
        # the drain's bulk refreshes the shards it wrote, so its documents are searchable when it returns and
        # on_indexed fires when a search sees them; writes do not wait for it (they only wake the drain)
        refresh=True,
    )
    # one loop drains for every write of the process: rounds of up to 500 rows (one _bulk request each) catch up
    # a backlog (OpenSearch back after an outage) in fewer, cheaper requests than rounds of 100
    return DualStore(
        system_of_record,
        keyword,
        outbox_batch=500,
        background_drain_interval_s=1.0,
        min_round_spacing_s=DRAIN_ROUND_SPACING_S,
    ).roles()
