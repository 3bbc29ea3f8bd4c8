"""OpenSearch BM25 keyword index of the dual store.

Index design (one alias ``<prefix>-keyword`` over ``<prefix>-keyword-000001``):

* ``_id`` is the memory id. Memory versions have their own ids, so one document only ever goes
  through "current" (indexed) then "gone" (deleted) and never back.
* Writes use ``version_type=external`` with a version derived from the memory version
  (:func:`doc_version_current` ``4v``, :func:`doc_version_gone` ``4v+2``, reconcile repairs
  ``4v+1`` with ``external_gte``), so a delayed retry of an old state is rejected with 409 (which
  the writer counts as "already newer") and cannot resurrect a superseded or deleted memory.
  Deletes leave tombstones for ``index.gc_deletes`` (1 h here), far longer than any retry.
* Every filter is a ``bool.filter`` clause: ``term`` on tenant_id AND user_id AND
  ``is_current: true``, plus the :class:`~cognis_memory.search_filter.SearchFilter` narrowing.
  User text only ever reaches a ``match`` query (analysed as plain words; never
  ``query_string``/``simple_query_string``), so no query syntax can be injected.
* ``search_text`` (:func:`~cognis_memory.search_text.search_text`: the content with its speaker and
  absolute dates) is ``text`` with the standard analyzer, with an ``english`` (stemmed) subfield;
  a search scores both (``bool.should`` of two ``match`` queries); a document written before it
  existed is scored on ``content`` instead, which held that text then.
* Bulk loads (:meth:`OpenSearchKeywordIndex.bulk_index`) run their ``_bulk`` requests and their one
  closing refresh under ``bulk_timeout_s`` (300 s), not the service's per-request timeout: the refresh
  of a large load (100k documents: longer than the 5 s default here) is one request that must not be
  given up while OpenSearch is still doing the work.
* Refresh: ``refresh`` is passed to every write. The default ``False`` makes documents visible at
  the next periodic refresh (1 s): the keyword side of a search may lag a write by up to a
  second, while the vector side (Postgres) is immediate. ``refresh=True`` refreshes the shards a
  request wrote, so its documents are searchable when it returns: the dual store's drain uses it, one
  bulk request per round and rounds at most four a second (:data:`..dual.store.DRAIN_ROUND_SPACING_S`).
  ``"wait_for"`` waits for the next periodic refresh instead (up to the index's 1 s interval).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from opensearchpy import OpenSearch
from opensearchpy import exceptions as os_exc

from ...domain import Memory, Owner
from ...search_filter import SearchFilter
from ..filters import opensearch_filter
from .client import OpenSearchRunner, Refresh, delete_matching, ensure_index, index_settings
from .documents import MEMORY_FIELDS, match_clause, match_text, memory_fields


# -- versions ---------------------------------------------------------------------------------------
def doc_version_current(version: int) -> int:
    """External version of the document of a current memory of version ``version``."""
    return 4 * version


def doc_version_repair(version: int) -> int:
    """External version reconcile uses to (re)index a current memory (beats an out-of-band delete)."""
    return 4 * version + 1


def doc_version_gone(version: int) -> int:
    """External version of the deletion of a memory that is superseded or gone."""
    return 4 * version + 2


# -- the keyword index ------------------------------------------------------------------------------
@dataclass(slots=True, frozen=True)
class IndexOp:
    """One bulk operation: index ``doc`` or delete, under an external version."""

    action: Literal["index", "delete"]
    memory_id: str
    version: int
    doc: dict[str, Any] | None = None
    version_type: Literal["external", "external_gte"] = "external"
    #: Whether a 409 (the index already holds a newer version) counts as success.
    conflict_ok: bool = True


@dataclass(slots=True, frozen=True)
class OpResult:
    memory_id: str
    ok: bool
    status: int
    error: str | None = None


@dataclass(slots=True, frozen=True)
class KeywordDoc:
    """What reconcile reads of one indexed document."""

    memory_id: str
    version: int
    tenant_id: str
    user_id: str
    is_current: bool


class OpenSearchKeywordIndex:
    """BM25 index of current memories in OpenSearch (the keyword side of the dual store).

    ``client`` is a synchronous ``opensearchpy.OpenSearch``; the index takes ownership of it
    (``close()`` closes it). ``replicas=None`` keeps the cluster default (use 0 on one node).
    """

    def __init__(
        self,
        client: OpenSearch,
        *,
        index_prefix: str,
        shards: int = 1,
        replicas: int | None = None,
        refresh: Refresh = False,
        search_timeout_s: float = 1.0,
        write_timeout_s: float = 10.0,
        bulk_timeout_s: float = 300.0,
        max_workers: int = 8,
    ) -> None:
        self.runner = OpenSearchRunner(client, max_workers=max_workers)
        self.client = client
        self.alias = f"{index_prefix}-keyword"
        self.concrete = f"{index_prefix}-keyword-000001"
        self.shards, self.replicas = shards, replicas
        self.refresh = refresh
        self.search_timeout_s = search_timeout_s
        self.write_timeout_s = write_timeout_s
        self.bulk_timeout_s = bulk_timeout_s
        self._ready = False

    # -- lifecycle ----------------------------------------------------------------------------
    def index_body(self) -> dict[str, Any]:
        return {
            "settings": index_settings(shards=self.shards, replicas=self.replicas),
            "mappings": {"dynamic": "strict", "properties": MEMORY_FIELDS},
        }

    async def ensure_index(self) -> None:
        """Create the index and alias if missing (idempotent, safe under concurrency)."""
        if self._ready:
            return
        await ensure_index(self.runner, self.alias, self.concrete, self.index_body())
        self._ready = True

    async def ping(self) -> bool:
        return await self.runner.ping(self.search_timeout_s)

    async def close(self) -> None:
        self.runner.close()

    async def refresh_now(self, *, timeout_s: float | None = None) -> None:
        """Make every document written so far searchable; ``timeout_s``: the request's (default: the client's)."""
        extra = {} if timeout_s is None else {"request_timeout": timeout_s}
        await self.runner(self.client.indices.refresh, index=self.alias, **extra)

    # -- search -------------------------------------------------------------------------------
    async def search(self, flt: SearchFilter, text: str, *, limit: int) -> list[tuple[str, float]]:
        """(memory id, BM25 score) of the best current documents of the filter's owner."""
        words = match_text(text)
        if not words or limit <= 0:
            return []
        body = {
            "size": limit,
            "_source": False,
            "track_total_hits": False,
            "query": {"bool": {"must": [match_clause(words)], "filter": opensearch_filter(flt)}},
        }
        try:
            res = await self.runner(
                self.client.search, index=self.alias, body=body, request_timeout=self.search_timeout_s
            )
        except os_exc.NotFoundError:  # index not created yet (OpenSearch was down at open)
            self._ready = False
            await self.ensure_index()
            return []
        return [(h["_id"], float(h["_score"])) for h in res["hits"]["hits"]]

    # -- writes -------------------------------------------------------------------------------
    @staticmethod
    def document(m: Memory) -> dict[str, Any]:
        return memory_fields(m)

    async def apply(self, ops: Sequence[IndexOp]) -> list[OpResult]:
        """Run index/delete operations in one bulk request; one result per op, in order."""
        if not ops:
            return []
        await self.ensure_index()
        body: list[dict[str, Any]] = []
        for op in ops:
            meta = {"_index": self.alias, "_id": op.memory_id, "version": op.version, "version_type": op.version_type}
            body.append({op.action: meta})
            if op.action == "index":
                assert op.doc is not None
                body.append(op.doc)
        res = await self.runner(self.client.bulk, body=body, refresh=self.refresh, request_timeout=self.write_timeout_s)
        out: list[OpResult] = []
        for op, item in zip(ops, res["items"], strict=True):
            r = item[op.action]
            status = int(r.get("status", 500))
            ok = status in (200, 201) or (status == 409 and op.conflict_ok) or (op.action == "delete" and status == 404)
            err = None if ok else str(r.get("error", r.get("result")))
            out.append(OpResult(op.memory_id, ok, status, err))
        return out

    async def delete_owner(self, owner: Owner) -> int:
        """Delete every document of one user; returns how many were deleted.

        Implemented as refresh + paged search + bulk deletes under external versions
        (:func:`delete_matching`) rather than ``_delete_by_query``: it needs no reindex module
        and leaves versioned tombstones, so a delayed retry cannot bring a document back.
        """
        await self.ensure_index()
        query = {"bool": {"filter": [{"term": {"tenant_id": owner.tenant_id}}, {"term": {"user_id": owner.user_id}}]}}
        return await delete_matching(
            self.runner, self.alias, query, version_of=lambda src: doc_version_gone(int(src["version"])),
            refresh=self.refresh, timeout_s=max(self.write_timeout_s, 30.0),
        )  # fmt: skip

    async def bulk_index(self, memories: Sequence[Memory], *, chunk: int = 2000) -> None:
        """Index many current memories fast (imports, benchmarks): no refresh per request, one at the end. Every
        request here waits up to ``bulk_timeout_s``: a slow answer is OpenSearch still working, not down."""
        await self.ensure_index()
        for i in range(0, len(memories), chunk):
            body: list[dict[str, Any]] = []
            for m in memories[i : i + chunk]:
                if not m.is_current:
                    continue
                body.append({"index": {"_index": self.alias, "_id": m.id, "version": doc_version_current(m.version),
                                       "version_type": "external"}})  # fmt: skip
                body.append(memory_fields(m))
            if body:
                res = await self.runner(self.client.bulk, body=body, request_timeout=self.bulk_timeout_s)
                if res.get("errors"):
                    bad = [it for it in res["items"] if it["index"].get("status", 500) not in (200, 201, 409)]
                    if bad:
                        raise RuntimeError(f"bulk index failed for {len(bad)} documents, e.g. {bad[0]}")
        await self.refresh_now(timeout_s=self.bulk_timeout_s)

    # -- reconcile / tests --------------------------------------------------------------------
    async def scan(self, *, tenant_id: str | None = None, page: int = 5000) -> AsyncIterator[KeywordDoc]:
        """Every document (optionally of one tenant), paged with ``search_after`` on memory_id.

        Without a point-in-time, documents written during the scan may or may not be seen;
        reconcile reads the index *before* Postgres so that this cannot produce false drift.
        """
        await self.ensure_index()
        query: dict[str, Any] = {"term": {"tenant_id": tenant_id}} if tenant_id is not None else {"match_all": {}}
        after: list[Any] | None = None
        while True:
            body: dict[str, Any] = {
                "size": page,
                "query": query,
                "sort": [{"memory_id": "asc"}],
                "_source": ["version", "tenant_id", "user_id", "is_current"],
                "track_total_hits": False,
            }
            if after is not None:
                body["search_after"] = after
            res = await self.runner(self.client.search, index=self.alias, body=body, request_timeout=60)
            hits = res["hits"]["hits"]
            for h in hits:
                s = h["_source"]
                yield KeywordDoc(h["_id"], int(s["version"]), s["tenant_id"], s["user_id"], bool(s["is_current"]))
            if len(hits) < page:
                return
            after = hits[-1]["sort"]

    async def count(self, *, tenant_id: str | None = None, user_id: str | None = None) -> int:
        """Documents of a tenant and/or user (``_count``); for tests and operators."""
        filters = []
        if tenant_id is not None:
            filters.append({"term": {"tenant_id": tenant_id}})
        if user_id is not None:
            filters.append({"term": {"user_id": user_id}})
        body = {"query": {"bool": {"filter": filters}}}
        res = await self.runner(self.client.count, index=self.alias, body=body, request_timeout=30)
        return int(res["count"])

    async def get_document(self, memory_id: str) -> dict[str, Any] | None:
        """The stored document of one memory id, or None (realtime GET)."""
        try:
            res = await self.runner(self.client.get, index=self.alias, id=memory_id, request_timeout=10)
        except os_exc.NotFoundError:
            return None
        return dict(res["_source"])
