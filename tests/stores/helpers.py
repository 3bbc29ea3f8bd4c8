"""Helpers of the store tests: vectors, memories, namespaces, and reference implementations
(filter semantics straight from the SearchFilter docstring; numpy brute-force cosine search)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from opensearchpy import OpenSearch

from cognis_memory.domain import Category, Memory, Owner, Scope
from cognis_memory.stores.records import MEMORY_FILTERS, Match
from cognis_memory.stores.registry import STORES
from cognis_memory.stores.roles import StoreBundle

DIM = 32
DIM_SHORT = 8
STORE_KINDS = tuple(STORES)  # every registered store kind


def new_owner(user_id: str = "alice") -> Owner:
    return Owner(f"t-{uuid.uuid4().hex[:12]}", user_id)


def unit(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)


def short_of(full: np.ndarray) -> np.ndarray:
    """The re-normalised prefix (what the embedder produces as the short vector)."""
    return unit(np.asarray(full)[..., :DIM_SHORT])


def make_memory(
    owner: Owner,
    content: str,
    rng: np.random.Generator,
    *,
    vector: np.ndarray | None = None,
    category: Category = Category.HOBBIES,
    **kw: Any,
) -> Memory:
    full = unit(vector if vector is not None else rng.normal(size=DIM))
    return Memory(
        tenant_id=owner.tenant_id,
        user_id=owner.user_id,
        content=content,
        category=category,
        embedding=full,
        embedding_short=short_of(full),
        **kw,
    )


# -- database / index namespaces -------------------------------------------------------------------
def os_client(url: str, *, timeout: float = 30.0) -> OpenSearch:
    return OpenSearch(hosts=[url], timeout=timeout, max_retries=0, retry_on_timeout=False)


def new_prefix() -> str:
    return f"test-{uuid.uuid4().hex[:10]}"


# -- harness ----------------------------------------------------------------------------------------
@dataclass
class Harness:
    kind: str
    store: StoreBundle  # the roles of the store under test
    raw_counts: Callable[[Owner], Awaitable[dict[str, int]]]
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    async def close(self) -> None:
        for c in reversed(self.closers):
            await c()


# -- a reference implementation of the filter semantics (SearchFilter's docstring) ----------------
def admits(flt: Any, m: Memory) -> bool:
    """Whether ``flt`` admits the current memory ``m``, written straight from the documented rules: each
    column filter of the record by its match (a set: the value is one of it; one value: the value is it),
    then the rules of their own."""
    if (m.tenant_id, m.user_id) != (flt.owner.tenant_id, flt.owner.user_id) or not m.is_current:
        return False
    for c, f in MEMORY_FILTERS:
        wanted, value = getattr(flt, f.name), getattr(m, c.field)
        if wanted is not None and (value not in wanted if f.match is Match.ANY_OF else value != wanted):
            return False
    if flt.session_id is not None and m.scope is Scope.CONTEXT and m.session_id != flt.session_id:
        return False
    if flt.time_from is not None or flt.time_to is not None:
        t: datetime | None = m.effective_time
        if t is None:
            return False
        if flt.time_from is not None and t < flt.time_from:
            return False
        if flt.time_to is not None and t > flt.time_to:
            return False
    return True


def brute_force(
    memories: list[Memory], q: np.ndarray, *, limit: int, shortlist: int | None = None
) -> list[tuple[str, float]]:
    """Reference cosine search in numpy: exact, or two-stage when ``shortlist`` is given."""
    ids = [m.id for m in memories]
    full = np.stack([m.embedding for m in memories])
    cand = np.arange(len(memories))
    if shortlist is not None:
        short = np.stack([m.embedding_short for m in memories])
        s = short @ short_of(q)
        cand = np.argsort(-s, kind="stable")[:shortlist]
    scores = full[cand] @ q
    order = np.argsort(-scores, kind="stable")[:limit]
    return [(ids[cand[i]], float(scores[i])) for i in order]
