"""The OpenSearch-only store's memory-version role.

Not transactional, and what that means:

* ``write_version`` is several requests. It reads the previous version (realtime GET, with its
  ``_seq_no``/``_primary_term``), creates the new version, then flips the previous one
  (``is_current=false``, ``successor_id``) *conditionally* on that seq_no. Of two concurrent
  writers on one head, exactly one flip succeeds; the loser deletes its new document and gets
  ``ConflictError``. A crash between "create new" and "flip old" leaves two current documents
  of one chain: every search and listing drops a hit when some document ``replaces_id`` it (the
  higher version wins), and the next ``write_version`` on the stale head finishes the flip and
  answers ``ConflictError``. A concurrent search may briefly miss a head that a losing writer's
  short-lived document claims to replace.
* ``forget_user`` deletes by query in every index (refresh first, then paged bulk deletes);
  a crash in the middle leaves the rest for a retry of the same call.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from opensearchpy import exceptions as os_exc

from ...domain import Memory, Owner
from ...errors import ConflictError
from ..records import OPENSEARCH, epoch_us, memory_from_row
from ..values import PagePosition, UserSummary
from ..version_rules import check_new_version_owner, check_previous_version, require_previous_version
from .client import delete_matching
from .documents import owner_key, owner_query
from .indices import SAID_US, OpenSearchIndices, memory_doc


class OpenSearchMemories:
    """The :class:`~cognis_memory.stores.roles.MemoryVersions` of an OpenSearch-only store; also the search
    of current documents that the vector and keyword roles run (:meth:`search_current`)."""

    def __init__(self, ix: OpenSearchIndices, *, leftover_after_s: float = 30.0) -> None:
        self.ix = ix
        self.leftover_after_s = leftover_after_s

    _memory_doc = staticmethod(memory_doc)  # the whole document of a version, as the index upgrade writes it too

    async def insert_memories(self, memories: Sequence[Memory]) -> None:
        if not memories:
            return
        body: list[dict[str, Any]] = []
        for m in memories:
            body.append({"create": {"_index": self.ix.memories, "_id": owner_key(m.tenant_id, m.user_id, m.id)}})
            body.append(self._memory_doc(m))
        res = await self.ix.runner(
            self.ix.client.bulk, body=body, refresh=self.ix.refresh, request_timeout=self.ix.write_timeout_s
        )
        if res.get("errors"):
            bad = [it["create"] for it in res["items"] if it["create"].get("status") not in (200, 201)]
            if bad:
                raise ConflictError(
                    f"insert_memories: {len(bad)} documents were not created, e.g. {bad[0].get('error')}"
                )

    async def _successors(self, owner: Owner, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """{replaced id: source of a document that replaces it} among ``ids`` (any version state)."""
        if not ids:
            return {}
        body = {
            "size": len(ids) * 2 + 10,
            "_source": ["replaces_id", "memory_id", "created_at", "flip_pending"],
            "query": {
                "bool": {"filter": [*owner_query(owner)["bool"]["filter"], {"terms": {"replaces_id": list(ids)}}]}
            },
        }
        res = await self.ix.runner(
            self.ix.client.search, index=self.ix.memories, body=body, request_timeout=self.ix.search_timeout_s
        )
        return {h["_source"]["replaces_id"]: h["_source"] for h in res["hits"]["hits"]}

    async def write_version(self, owner: Owner, previous_id: str, new: Memory) -> Memory:
        check_new_version_owner(owner, new)
        prev_key = owner_key(owner.tenant_id, owner.user_id, previous_id)
        prev = require_previous_version(previous_id, await self.ix.get_source(self.ix.memories, prev_key))
        # a document of an older release has no chain id: it is taken to be of the new version's chain
        chain_id = prev["_source"].get("chain_id", new.chain_id)
        check_previous_version(previous_id, new, is_current=prev["_source"]["is_current"], chain_id=chain_id)
        other = (await self._successors(owner, [previous_id])).get(previous_id)
        if other is not None and other["memory_id"] != new.id:
            # Another version of this head exists. Old: a crashed write; finish it. Young: a concurrent
            # write in progress; leave it alone. Either way this write loses.
            age = datetime.now(UTC) - (OPENSEARCH.time(other.get("created_at")) or datetime.now(UTC))
            if age.total_seconds() > self.leftover_after_s:
                await self._flip(prev, other["memory_id"])
            raise ConflictError(f"memory {previous_id} is not the current version")
        new_key = owner_key(owner.tenant_id, owner.user_id, new.id)
        # 1. the new version, marked as waiting for the flip (searches drop what it replaces) ...
        await self.ix.create(self.ix.memories, new_key, self._memory_doc(new, flip_pending=True))
        # 2. ... the previous version loses is_current, only if nobody changed it since we read it ...
        if not await self._flip(prev, new.id):
            await self.ix.delete_quietly(self.ix.memories, new_key)
            raise ConflictError(f"memory {previous_id} is not the current version")
        # 3. ... and the new version stops asking searches to check.
        await self.ix.runner(
            self.ix.client.index, index=self.ix.memories, id=new_key, body=self._memory_doc(new),
            refresh=self.ix.refresh, request_timeout=self.ix.write_timeout_s,
        )  # fmt: skip
        return new

    async def _flip(self, prev: dict[str, Any], successor_id: str) -> bool:
        """Re-index the previous version as not current, conditional on the seq_no we read.

        A full re-index rather than a partial update: the knn fields are not in ``_source``,
        so an update would drop them."""
        old = memory_from_row(prev["_source"], OPENSEARCH)
        old.is_current = False
        try:
            await self.ix.runner(
                self.ix.client.index, index=self.ix.memories, id=prev["_id"],
                body=self._memory_doc(old, successor_id=successor_id),
                if_seq_no=prev["_seq_no"], if_primary_term=prev["_primary_term"],
                refresh=self.ix.refresh, request_timeout=self.ix.write_timeout_s,
            )  # fmt: skip
            return True
        except os_exc.ConflictError:
            return False

    async def get_memory(self, owner: Owner, memory_id: str) -> Memory | None:
        got = await self.ix.get_source(self.ix.memories, owner_key(owner.tenant_id, owner.user_id, memory_id))
        return memory_from_row(got["_source"], OPENSEARCH) if got else None

    async def get_chain(self, owner: Owner, memory_id: str) -> list[Memory]:
        start = await self.ix.get_source(self.ix.memories, owner_key(owner.tenant_id, owner.user_id, memory_id))
        if start is None:
            return []
        chain: dict[str, Memory] = {}
        src = start["_source"]
        chain[src["memory_id"]] = memory_from_row(src, OPENSEARCH)
        back = src.get("replaces_id")
        while back and back not in chain:  # walk back through replaces_id (realtime GETs)
            got = await self.ix.get_source(self.ix.memories, owner_key(owner.tenant_id, owner.user_id, back))
            if got is None:
                break
            chain[back] = memory_from_row(got["_source"], OPENSEARCH)
            back = got["_source"].get("replaces_id")
        head_src = src
        while True:  # walk forward through successor_id, then look for an unflipped successor
            nxt = head_src.get("successor_id")
            if not nxt:
                found = (await self._successors(owner, [head_src["memory_id"]])).get(head_src["memory_id"])
                nxt = found["memory_id"] if found else None
            if not nxt or nxt in chain:
                break
            got = await self.ix.get_source(self.ix.memories, owner_key(owner.tenant_id, owner.user_id, nxt))
            if got is None:
                break
            head_src = got["_source"]
            chain[nxt] = memory_from_row(head_src, OPENSEARCH)
        return sorted(chain.values(), key=lambda m: (m.version, m.created_at))

    async def fetch_memories(self, owner: Owner, ids: Sequence[str]) -> list[Memory]:
        docs = await self.ix.mget_sources(self.ix.memories, [owner_key(owner.tenant_id, owner.user_id, i) for i in ids])
        by_id = {d["memory_id"]: memory_from_row(d, OPENSEARCH) for d in docs}
        return [by_id[i] for i in ids if i in by_id]

    async def search_current(self, owner: Owner, body: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
        """Run ``body`` on the memories index together (one ``_msearch``) with the query for this
        owner's versions still waiting for their flip; returns the hits and the ids to drop.

        A pending version supersedes the version it replaces (the higher version wins), unless
        that version already names another successor: then the pending one is the orphan of a
        lost race whose writer died before deleting it, and it is the one dropped.
        """
        pending_q = {
            "size": 100,
            "_source": ["memory_id", "replaces_id"],
            "query": {"bool": {"filter": [*owner_query(owner)["bool"]["filter"], {"term": {"flip_pending": True}}]}},
        }
        lines = [{"index": self.ix.memories}, body, {"index": self.ix.memories}, pending_q]
        res = await self.ix.runner(self.ix.client.msearch, body=lines, request_timeout=self.ix.search_timeout_s)
        main, pending = res["responses"]
        for r in (main, pending):
            if "error" in r:
                raise RuntimeError(f"opensearch search failed: {r['error']}")
        drop: set[str] = set()
        waiting = [h["_source"] for h in pending["hits"]["hits"] if h["_source"].get("replaces_id")]
        if waiting:
            keys = [owner_key(owner.tenant_id, owner.user_id, w["replaces_id"]) for w in waiting]
            replaced = {d["memory_id"]: d for d in await self.ix.mget_sources(self.ix.memories, keys)}
            for w in waiting:
                prev = replaced.get(w["replaces_id"])
                if (
                    prev is not None
                    and not prev["is_current"]
                    and prev.get("successor_id") not in (None, w["memory_id"])
                ):
                    drop.add(w["memory_id"])
                else:
                    drop.add(w["replaces_id"])
        return main["hits"], drop

    async def list_memories(
        self, owner: Owner, *, include_history: bool = False, limit: int = 1000, after: PagePosition | None = None
    ) -> list[Memory]:
        filters = list(owner_query(owner)["bool"]["filter"])
        if not include_history:
            filters.append({"term": {"is_current": True}})
        body: dict[str, Any] = {
            "size": limit,
            "sort": [{SAID_US: "asc"}, {"memory_id": "asc"}],
            "query": {"bool": {"filter": filters}},
            "track_total_hits": False,
        }
        if after is not None:
            body["search_after"] = [epoch_us(after.time), after.id]
        if include_history:
            res = await self.ix.runner(
                self.ix.client.search, index=self.ix.memories, body=body, request_timeout=self.ix.search_timeout_s
            )
            return [memory_from_row(h["_source"], OPENSEARCH) for h in res["hits"]["hits"]]
        # Superseded heads still marked current are dropped after the search: read on until the page is full.
        page: list[Memory] = []
        while True:
            found, drop = await self.search_current(owner, body)
            hits = found["hits"]
            page += [memory_from_row(h["_source"], OPENSEARCH) for h in hits if h["_source"]["memory_id"] not in drop]
            if len(page) >= limit or len(hits) < body["size"]:
                return page[:limit]
            body = body | {"search_after": hits[-1]["sort"]}

    async def list_users(
        self, tenant_id: str, *, limit: int = 100, after_user_id: str | None = None
    ) -> list[UserSummary]:
        """A composite aggregation over user_id within the tenant's filter, paged by its ``after`` key.
        Counts come from searchable documents: a write may take up to the refresh interval to show."""
        live = [{"term": {"is_current": True}}, {"term": {"deleted": False}}]
        users: dict[str, Any] = {
            "composite": {"size": limit, "sources": [{"user_id": {"terms": {"field": "user_id"}}}]},
            "aggs": {
                "current": {"filter": {"bool": {"filter": live}}},
                "last": {"max": {"field": "created_at"}},
            },
        }
        if after_user_id is not None:
            users["composite"]["after"] = {"user_id": after_user_id}
        tenant = {"bool": {"filter": [{"term": {"tenant_id": tenant_id}}]}}
        body = {"size": 0, "query": tenant, "aggs": {"users": users}}
        res = await self.ix.runner(
            self.ix.client.search, index=self.ix.memories, body=body, request_timeout=self.ix.search_timeout_s
        )
        return [
            UserSummary(
                b["key"]["user_id"],
                int(b["current"]["doc_count"]),
                datetime.fromtimestamp(b["last"]["value"] / 1000, tz=UTC),
            )
            for b in res["aggregations"]["users"]["buckets"]
        ]

    async def forget_user(self, owner: Owner) -> dict[str, int]:
        q = owner_query(owner)
        t = max(self.ix.write_timeout_s, 30.0)
        return {
            "memories": await delete_matching(
                self.ix.runner, self.ix.memories, q, refresh=self.ix.refresh, timeout_s=t
            ),
            "messages": await delete_matching(
                self.ix.runner, self.ix.messages, q, refresh=self.ix.refresh, timeout_s=t
            ),
            "message_keys": await delete_matching(
                self.ix.runner, self.ix.message_keys, q, refresh=self.ix.refresh, timeout_s=t
            ),
            "jobs": await delete_matching(self.ix.runner, self.ix.jobs, q, refresh=self.ix.refresh, timeout_s=t),
        }

    async def bulk_load(self, memories: Sequence[Memory], *, chunk: int = 1000) -> None:
        """Index many memories fast (no refresh per request; one refresh at the end)."""
        for i in range(0, len(memories), chunk):
            body: list[dict[str, Any]] = []
            for m in memories[i : i + chunk]:
                body.append({"index": {"_index": self.ix.memories, "_id": owner_key(m.tenant_id, m.user_id, m.id)}})
                body.append(self._memory_doc(m))
            res = await self.ix.runner(self.ix.client.bulk, body=body, request_timeout=300)
            if res.get("errors"):
                bad = [it["index"] for it in res["items"] if it["index"].get("status") not in (200, 201)]
                raise RuntimeError(f"bulk_load: {len(bad)} documents failed, e.g. {bad[0] if bad else res}")
        await self.ix.runner(self.ix.client.indices.refresh, index=self.ix.memories, request_timeout=300)
