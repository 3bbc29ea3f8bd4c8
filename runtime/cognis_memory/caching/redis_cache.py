"""Redis implementation of the :class:`~cognis_memory.caching.result_cache.Cache` protocol.

Keys (all of one user share one Redis Cluster hash tag, so they live in one slot)::

    cognis:{<sha256(tenant)[:32]>.<sha256(user)[:32]>}:gen                 generation counter
    cognis:{...}:emb:<sha256(model \\0 text)>                               float32 bytes
    cognis:{...}:s:<generation>:<sha256(request_key)>                      search response (JSON)

Tenant and user ids are hashed, so a ``:`` (or a glob character, or any byte) in an id cannot
make two owners' keys collide, ids never appear in Redis, and the owner prefix used by
``forget_user``'s ``SCAN MATCH`` is fixed-length hex, hence unambiguous.

Search entries are reachable only under the user's *current* generation; ``invalidate`` does
``INCR`` so every older entry becomes unreachable at once (and expires with its TTL). The
generation seen by ``get_search`` is remembered (bounded, per process) and used by the
following ``set_search`` of the same request, so a response computed before a concurrent write
is stored under the old generation and never served afterwards.

Failure policy: every Redis error or timeout (``socket_timeout_s``, 250 ms by default) is
swallowed and answered as a miss/no-op; the first error of each ``log_interval_s`` is logged.
After an error the cache stays out of the way for ``retry_after_s`` (calls return at once
without touching the network), so an unreachable Redis costs one timeout per interval, not per
request. Caveat: an ``invalidate`` lost while Redis is unreachable means results cached before
the outage may be served until their TTL (``ttl_s``) once Redis is back.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import numpy as np
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from ..domain import Owner

log = logging.getLogger(__name__)
T = TypeVar("T")


def _h(value: str, n: int = 32) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:n]


def owner_prefix(owner: Owner) -> str:
    """``cognis:{<tenant hash>.<user hash>}:`` -- the prefix of every key of this user."""
    return f"cognis:{{{_h(owner.tenant_id)}.{_h(owner.user_id)}}}:"


_FAILED: Any = object()  # sentinel: the guarded Redis operation did not happen


class RedisCache:
    """Query-embedding and search-result cache in Redis; never raises, a miss when Redis is down."""

    name = "redis"

    def __init__(
        self,
        url: str,
        *,
        password: str | None = None,
        ttl_s: int = 300,
        socket_timeout_s: float = 0.25,
        retry_after_s: float = 1.0,
        log_interval_s: float = 60.0,
        generation_ttl_s: int | None = None,
        remembered_generations: int = 10_000,
        ssl_ca_certs: str | None = None,
    ) -> None:
        self.ttl_s = ttl_s
        # The counter must outlive every entry written under it, or a reset could revive old entries.
        self.generation_ttl_s = generation_ttl_s or max(86_400, 10 * ttl_s)
        self.retry_after_s = retry_after_s
        self.log_interval_s = log_interval_s
        tls: dict[str, Any] = {}
        if url.startswith("rediss://"):  # verified: the server's certificate chain and its host name
            tls = {"ssl_cert_reqs": "required", "ssl_check_hostname": True, "ssl_ca_certs": ssl_ca_certs}
        self._redis = Redis.from_url(
            url,
            password=password,
            socket_timeout=socket_timeout_s,
            socket_connect_timeout=socket_timeout_s,
            retry=Retry(NoBackoff(), 0),
            health_check_interval=0,
            **tls,
        )
        self._down_until = 0.0
        self._last_log = 0.0
        self._suppressed = 0
        self._seen: OrderedDict[tuple[Owner, str], int] = OrderedDict()
        self._seen_max = remembered_generations
        # Owners whose invalidate/forget could not reach Redis: replayed before any other use of
        # their entries, and until then every read of theirs is a miss (so a Redis that was only
        # unreachable, not emptied, cannot serve results from before a write or a forget).
        self._pending: dict[Owner, str] = {}

    # -- failure handling -------------------------------------------------------------------------
    async def _guard(self, op: str, fn: Callable[[], Awaitable[T]], default: T) -> T:
        now = time.monotonic()
        if now < self._down_until:
            return default
        try:
            return await fn()
        except Exception as e:  # a cache never raises
            self._down_until = time.monotonic() + self.retry_after_s
            if now - self._last_log >= self.log_interval_s:
                extra = f" ({self._suppressed} more errors since the last report)" if self._suppressed else ""
                log.warning("redis cache: %s failed, running uncached: %s: %s%s", op, type(e).__name__, e, extra)
                self._last_log, self._suppressed = now, 0
            else:
                self._suppressed += 1
            return default

    # -- keys -------------------------------------------------------------------------------------
    @staticmethod
    def _gen_key(owner: Owner) -> str:
        return owner_prefix(owner) + "gen"

    @staticmethod
    def _emb_key(owner: Owner, model: str, text: str) -> str:
        return owner_prefix(owner) + "emb:" + _h(f"{model}\x00{text}", 64)

    @staticmethod
    def _search_key(owner: Owner, generation: int, request_key: str) -> str:
        return owner_prefix(owner) + f"s:{generation}:" + _h(request_key, 64)

    async def _generation(self, owner: Owner) -> int:
        raw = await self._redis.get(self._gen_key(owner))
        return int(raw) if raw is not None else 0

    def _remember(self, owner: Owner, request_key: str, generation: int) -> None:
        self._seen[(owner, request_key)] = generation
        self._seen.move_to_end((owner, request_key))
        while len(self._seen) > self._seen_max:
            self._seen.popitem(last=False)

    async def _settled(self, owner: Owner) -> bool:
        """Replay this owner's failed invalidate/forget; False while that is still impossible."""
        pending = self._pending.get(owner)
        if pending is None:
            return True
        op = self._forget_keys if pending == "forget" else self._bump
        if await self._guard(f"replay {pending}", lambda: op(owner), _FAILED) is _FAILED:
            return False
        self._pending.pop(owner, None)
        return True

    def _failed(self, owner: Owner, what: str) -> None:
        if self._pending.get(owner) != "forget":  # a pending forget covers an invalidate
            self._pending[owner] = what

    # -- Cache protocol ---------------------------------------------------------------------------
    async def get_query_embedding(self, owner: Owner, model: str, text: str) -> np.ndarray | None:
        if not await self._settled(owner):
            return None

        async def op() -> np.ndarray | None:
            raw = await self._redis.get(self._emb_key(owner, model, text))
            if not isinstance(raw, bytes) or len(raw) % 4:
                return None
            return np.frombuffer(raw, dtype=np.float32).copy()

        return await self._guard("get_query_embedding", op, None)

    async def set_query_embedding(self, owner: Owner, model: str, text: str, vector: np.ndarray) -> None:
        if not await self._settled(owner):
            return
        data = np.ascontiguousarray(vector, dtype=np.float32).tobytes()

        async def op() -> None:
            await self._redis.set(self._emb_key(owner, model, text), data, ex=self.ttl_s)

        await self._guard("set_query_embedding", op, None)

    async def get_search(self, owner: Owner, request_key: str) -> dict[str, Any] | None:
        if not await self._settled(owner):
            return None

        async def op() -> dict[str, Any] | None:
            gen = await self._generation(owner)
            self._remember(owner, request_key, gen)
            raw = await self._redis.get(self._search_key(owner, gen, request_key))
            return json.loads(raw) if raw is not None else None

        return await self._guard("get_search", op, None)

    async def set_search(self, owner: Owner, request_key: str, response: dict[str, Any]) -> None:
        if not await self._settled(owner):
            return
        data = json.dumps(response, default=str)

        async def op() -> None:
            gen = self._seen.pop((owner, request_key), None)
            if gen is None:
                gen = await self._generation(owner)
            await self._redis.set(self._search_key(owner, gen, request_key), data, ex=self.ttl_s)

        await self._guard("set_search", op, None)

    async def _bump(self, owner: Owner) -> None:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.incr(self._gen_key(owner))
            pipe.expire(self._gen_key(owner), self.generation_ttl_s)
            await pipe.execute()

    async def _forget_keys(self, owner: Owner) -> int:
        removed = 0
        batch: list[bytes] = []
        async for key in self._redis.scan_iter(match=owner_prefix(owner) + "*", count=500):
            batch.append(key)
            if len(batch) >= 500:
                removed += int(await self._redis.unlink(*batch))
                batch = []
        if batch:
            removed += int(await self._redis.unlink(*batch))
        return removed

    async def invalidate(self, owner: Owner) -> None:
        if await self._guard("invalidate", lambda: self._bump(owner), _FAILED) is _FAILED:
            self._failed(owner, "invalidate")

    async def forget_user(self, owner: Owner) -> int:
        for key in [k for k in self._seen if k[0] == owner]:
            self._seen.pop(key, None)
        removed = await self._guard("forget_user", lambda: self._forget_keys(owner), _FAILED)
        if removed is _FAILED:
            self._failed(owner, "forget")
            return 0
        self._pending.pop(owner, None)
        return int(removed)

    async def health(self) -> bool:
        async def op() -> bool:
            return bool(await self._redis.ping())

        # A health check always probes, even while other calls are short-circuited.
        self._down_until = 0.0
        return await self._guard("ping", op, False)

    async def close(self) -> None:
        try:
            await self._redis.aclose()
        except Exception:
            log.debug("redis cache: close failed", exc_info=True)
