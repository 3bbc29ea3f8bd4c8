"""OpenSearch-only store (pattern A): BM25 and k-NN in one memories index, plus messages, jobs
and API keys in their own indices. No Postgres.

Indices (each an alias ``<prefix>-<name>`` over ``<prefix>-<name>-000001``): ``memories``,
``messages``, ``message-keys`` (client message id claims), ``jobs``, ``apikeys``,
``apikey-revocations`` (hashes revoked for good).

* Document ids are *owner-scoped*: ``sha256(tenant \\0 user \\0 id)``. A lookup by id for an owner
  is a realtime GET of that owner's key, so another owner's record cannot even be addressed.
* Vectors: ``embedding_short`` and ``embedding`` are ``knn_vector`` fields (HNSW, engine
  ``lucene``, ``cosinesimil``; the native faiss/nmslib engines need JNI libraries). Two-stage
  search is one request: a ``knn`` query on ``embedding_short`` for ``shortlist`` candidates with
  every filter *inside* the knn clause (Lucene's efficient filtering: exact search when the
  filtered set is small, filtered HNSW otherwise), then a ``rescore`` of that window with a
  ``knn_score`` script on the full ``embedding``. The returned hits carry their full vectors,
  and the cosine reported is recomputed exactly with numpy from them. Without a short query
  vector the search is one exact ``script_score`` over the owner's filtered documents.
  Timings: ``vector_short`` is the whole request (both stages run server-side), ``vector_full``
  the local exact scoring.
* Keyword search: the same ``match``-only BM25 query and ``bool.filter`` clauses as the dual
  store's keyword index (:mod:`.opensearch_index`).

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
* Messages with a client id claim ``message-keys/<owner-scoped client id>`` (``op_type=create``)
  before the message is written; a retry after a crash in between writes the message under the
  claimed id.
* Job claims search due jobs, re-read each candidate (realtime) and update it with
  ``if_seq_no``/``if_primary_term``, so two workers never claim the same job.
* Visibility: realtime GETs always see the latest write; *searches* see writes after the next
  refresh. ``refresh`` (default ``False``: up to the 1 s refresh interval) is passed to every
  write; tests use ``True``, ``"wait_for"`` makes writes wait for the next refresh instead.
* ``forget_user`` deletes by query in every index (refresh first, then paged bulk deletes);
  a crash in the middle leaves the rest for a retry of the same call.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from opensearchpy import OpenSearch
from opensearchpy import exceptions as os_exc

from ..config import Settings
from ..domain import Job, JobStatus, Memory, Message, Owner
from ..errors import ConflictError, NotFoundError
from .filters import opensearch_filter
from .opensearch_index import (
    OpenSearchRunner,
    Refresh,
    create_index_once,
    delete_matching,
    index_settings,
    match_clause,
    match_text,
    memory_fields,
    memory_mapping,
)
from .records import (
    MEMORY_RECORD,
    OPENSEARCH,
    epoch_us,
    iso,
    job_from_row,
    job_to_row,
    memory_from_row,
    message_from_row,
    message_to_row,
)
from .roles import StoreBundle
from .values import ApiKeyRecord, ScoredMemory, SearchFilter, UserSummary, VectorSearchResult
from .vector_space import KEY as VECTOR_SPACE_KEY
from .vector_space import check as check_vector_space


def owner_key(tenant_id: str, user_id: str, record_id: str) -> str:
    """The document id of one owner's record: no other owner can address it."""
    return hashlib.sha256(f"{tenant_id}\x00{user_id}\x00{record_id}".encode()).hexdigest()


def _owner_query(owner: Owner) -> dict[str, Any]:
    return {"bool": {"filter": [{"term": {"tenant_id": owner.tenant_id}}, {"term": {"user_id": owner.user_id}}]}}


def _knn_field(dim: int) -> dict[str, Any]:
    return {
        "type": "knn_vector",
        "dimension": dim,
        "method": {
            "name": "hnsw",
            "engine": "lucene",
            "space_type": "cosinesimil",
            "parameters": {"m": 16, "ef_construction": 128},
        },
    }


def _knn_score(field: str, vector: np.ndarray) -> dict[str, Any]:
    return {
        "lang": "knn",
        "source": "knn_score",
        "params": {"field": field, "query_value": vector.astype(float).tolist(), "space_type": "cosinesimil"},
    }


class OpenSearchStore:
    """OpenSearch-only store: supplies every role of :mod:`cognis_memory.stores.roles` itself.

    ``client`` is a synchronous ``opensearchpy.OpenSearch`` (the store owns it from now on).
    """

    name = "opensearch"

    def roles(self) -> StoreBundle:
        return StoreBundle.of(self)

    def __init__(
        self,
        client: OpenSearch,
        *,
        index_prefix: str,
        dim: int,
        dim_short: int,
        shards: int = 1,
        replicas: int | None = None,
        refresh: Refresh = False,
        search_timeout_s: float = 5.0,
        write_timeout_s: float = 10.0,
        max_workers: int = 8,
        leftover_after_s: float = 30.0,
        vector_space: str | None = None,
    ) -> None:
        self.client = client
        #: the embedding model's vector space, kept in the memories index's ``_meta`` (None: no check)
        self.vector_space = vector_space
        self.leftover_after_s = leftover_after_s
        self.runner = OpenSearchRunner(client, max_workers=max_workers)
        self.prefix = index_prefix
        self.dim, self.dim_short = dim, dim_short
        self.shards, self.replicas = shards, replicas
        self.refresh = refresh
        self.search_timeout_s = search_timeout_s
        self.write_timeout_s = write_timeout_s
        self.memories = f"{index_prefix}-memories"
        self.messages = f"{index_prefix}-messages"
        self.message_keys = f"{index_prefix}-message-keys"
        self.jobs = f"{index_prefix}-jobs"
        self.apikeys = f"{index_prefix}-apikeys"
        self.revocations = f"{index_prefix}-apikey-revocations"

    # -- lifecycle -------------------------------------------------------------------------------
    def _bodies(self) -> dict[str, dict[str, Any]]:
        kw = {"type": "keyword"}
        date = {"type": "date"}
        settings = index_settings(shards=self.shards, replicas=self.replicas)
        memories = {
            "settings": index_settings(shards=self.shards, replicas=self.replicas, extra={"knn": True}),
            "mappings": {
                "dynamic": "strict",
                "properties": memory_mapping(MEMORY_RECORD, self._vector_fields)
                | {"successor_id": kw, "flip_pending": {"type": "boolean"}},
                "_source": {"excludes": ["embedding", "embedding_short"]},
            },
        }
        messages = {
            "settings": settings,
            "mappings": {
                "dynamic": "strict",
                "properties": {
                    "id": kw, "tenant_id": kw, "user_id": kw, "session_id": kw, "agent_id": kw, "speaker": kw,
                    "role": kw, "content": {"type": "text", "index": False}, "ts": date, "client_message_id": kw,
                    "metadata": {"type": "object", "enabled": False}, "created_at": date,
                },
            },
        }  # fmt: skip
        message_keys = {
            "settings": settings,
            "mappings": {"dynamic": "strict", "properties": {"tenant_id": kw, "user_id": kw, "message_id": kw}},
        }
        jobs = {
            "settings": settings,
            "mappings": {
                "dynamic": "strict",
                "properties": {
                    "id": kw, "tenant_id": kw, "user_id": kw, "message_ids": kw, "status": kw,
                    "attempts": {"type": "integer"}, "max_attempts": {"type": "integer"},
                    "last_error": {"type": "text", "index": False}, "next_attempt_at": date,
                    "next_attempt_us": {"type": "long"}, "lease_until": date, "lease_until_us": {"type": "long"},
                    "created_at": date, "updated_at": date, "result": {"type": "object", "enabled": False},
                },
            },
        }  # fmt: skip
        apikeys = {
            "settings": settings,
            "mappings": {
                "dynamic": "strict",
                "properties": {"key_hash": kw, "tenant_id": kw, "read_only": {"type": "boolean"}, "name": kw},
            },
        }
        revocations = {
            "settings": settings,
            "mappings": {"dynamic": "strict", "properties": {"key_hash": kw, "revoked_at": date}},
        }
        return {
            self.memories: memories,
            self.messages: messages,
            self.message_keys: message_keys,
            self.jobs: jobs,
            self.apikeys: apikeys,
            self.revocations: revocations,
        }

    def _vector_fields(self, name: str) -> dict[str, Any]:
        """A vector's ``knn_vector`` field and the compact copy (float32, base64) returned with hits: the knn
        fields are not in ``_source``."""
        return {
            name: _knn_field(self.dim if name == "embedding" else self.dim_short),
            f"{name}_b64": {"type": "binary"},
        }

    async def open(self) -> None:
        """Create the indices (with aliases) when missing; idempotent and safe under concurrency."""
        for alias, body in self._bodies().items():
            await create_index_once(self.runner, alias, f"{alias}-000001", body)
        await self._check_vector_space()

    async def _check_vector_space(self) -> None:
        """Record the configured vector space in the memories index's ``_meta`` (first open), or refuse another."""
        if self.vector_space is None:
            return
        mappings: dict[str, Any] = await self.runner(self.client.indices.get_mapping, index=self.memories)
        index: dict[str, Any] = next(iter(mappings.values()), {})  # the alias's one concrete index
        meta: dict[str, Any] = index.get("mappings", {}).get("_meta", {})
        where = f"the OpenSearch index {self.memories}"
        if check_vector_space(where, meta.get(VECTOR_SPACE_KEY), self.vector_space):
            body = {"_meta": {**meta, VECTOR_SPACE_KEY: self.vector_space}}
            await self.runner(self.client.indices.put_mapping, index=self.memories, body=body)

    async def close(self) -> None:
        self.runner.close()

    async def health(self) -> dict[str, bool]:
        return {"opensearch": await self.runner.ping(min(self.search_timeout_s, 2.0))}

    # -- documents ---------------------------------------------------------------------------------
    @staticmethod
    def _memory_doc(m: Memory, *, successor_id: str | None = None, flip_pending: bool = False) -> dict[str, Any]:
        return memory_fields(m, MEMORY_RECORD) | {"successor_id": successor_id, "flip_pending": flip_pending}

    @staticmethod
    def _message_doc(m: Message) -> dict[str, Any]:
        return message_to_row(m, OPENSEARCH)

    @staticmethod
    def _job_doc(job: Job, lease_until: datetime | None = None) -> dict[str, Any]:
        return job_to_row(job, OPENSEARCH) | {
            "next_attempt_us": epoch_us(job.next_attempt_at),
            "lease_until": iso(lease_until),
            "lease_until_us": epoch_us(lease_until) if lease_until is not None else None,
        }

    async def _get(self, index: str, doc_id: str) -> dict[str, Any] | None:
        """Realtime GET: the raw response (``_source``, ``_seq_no``, ``_primary_term``) or None."""
        try:
            return await self.runner(self.client.get, index=index, id=doc_id, request_timeout=self.write_timeout_s)
        except os_exc.NotFoundError:
            return None

    async def _mget(self, index: str, doc_ids: Sequence[str]) -> list[dict[str, Any]]:
        if not doc_ids:
            return []
        res = await self.runner(
            self.client.mget, index=index, body={"ids": list(doc_ids)}, request_timeout=self.write_timeout_s
        )
        return [d["_source"] for d in res["docs"] if d.get("found")]

    async def _create(self, index: str, doc_id: str, doc: dict[str, Any]) -> bool:
        """Create a document; False when that id exists already."""
        try:
            await self.runner(
                self.client.index, index=index, id=doc_id, body=doc, op_type="create",
                refresh=self.refresh, request_timeout=self.write_timeout_s,
            )  # fmt: skip
            return True
        except os_exc.ConflictError:
            return False

    # -- messages --------------------------------------------------------------------------------
    async def save_messages(self, messages: Sequence[Message]) -> list[tuple[Message, bool]]:
        out: list[tuple[Message, bool]] = []
        for msg in messages:
            if msg.client_message_id is None:
                created = await self._create(
                    self.messages, owner_key(msg.tenant_id, msg.user_id, msg.id), self._message_doc(msg)
                )
                if not created:
                    raise ConflictError(f"message id {msg.id} exists already")
                out.append((msg, True))
                continue
            claim_id = owner_key(msg.tenant_id, msg.user_id, "client\x00" + msg.client_message_id)
            claim = {"tenant_id": msg.tenant_id, "user_id": msg.user_id, "message_id": msg.id}
            if await self._create(self.message_keys, claim_id, claim):
                await self._create(self.messages, owner_key(msg.tenant_id, msg.user_id, msg.id), self._message_doc(msg))
                out.append((msg, True))
                continue
            got = await self._get(self.message_keys, claim_id)
            assert got is not None, "a claimed client message id vanished"
            mid = got["_source"]["message_id"]
            stored = await self._get(self.messages, owner_key(msg.tenant_id, msg.user_id, mid))
            if stored is not None:
                out.append((message_from_row(stored["_source"], OPENSEARCH), False))
                continue
            # The first writer crashed between the claim and the message: finish its write.
            retry = dataclasses.replace(msg, id=mid)
            await self._create(self.messages, owner_key(msg.tenant_id, msg.user_id, mid), self._message_doc(retry))
            out.append((retry, True))
        return out

    async def get_messages(self, owner: Owner, ids: Sequence[str]) -> list[Message]:
        docs = await self._mget(self.messages, [owner_key(owner.tenant_id, owner.user_id, i) for i in ids])
        msgs = [message_from_row(d, OPENSEARCH) for d in docs]
        return sorted(msgs, key=lambda m: (m.timestamp, m.id))

    # -- memories --------------------------------------------------------------------------------
    async def insert_memories(self, memories: Sequence[Memory]) -> None:
        if not memories:
            return
        body: list[dict[str, Any]] = []
        for m in memories:
            body.append({"create": {"_index": self.memories, "_id": owner_key(m.tenant_id, m.user_id, m.id)}})
            body.append(self._memory_doc(m))
        res = await self.runner(self.client.bulk, body=body, refresh=self.refresh, request_timeout=self.write_timeout_s)
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
                "bool": {"filter": [*_owner_query(owner)["bool"]["filter"], {"terms": {"replaces_id": list(ids)}}]}
            },
        }
        res = await self.runner(
            self.client.search, index=self.memories, body=body, request_timeout=self.search_timeout_s
        )
        return {h["_source"]["replaces_id"]: h["_source"] for h in res["hits"]["hits"]}

    async def write_version(self, owner: Owner, previous_id: str, new: Memory) -> Memory:
        if (new.tenant_id, new.user_id) != (owner.tenant_id, owner.user_id):
            raise ValueError("new version must belong to the same owner")
        prev_key = owner_key(owner.tenant_id, owner.user_id, previous_id)
        prev = await self._get(self.memories, prev_key)
        if prev is None:
            raise NotFoundError(f"memory {previous_id} not found")
        if not prev["_source"]["is_current"]:
            raise ConflictError(f"memory {previous_id} is not the current version")
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
        await self._create(self.memories, new_key, self._memory_doc(new, flip_pending=True))
        # 2. ... the previous version loses is_current, only if nobody changed it since we read it ...
        if not await self._flip(prev, new.id):
            await self._delete_quietly(self.memories, new_key)
            raise ConflictError(f"memory {previous_id} is not the current version")
        # 3. ... and the new version stops asking searches to check.
        await self.runner(
            self.client.index, index=self.memories, id=new_key, body=self._memory_doc(new),
            refresh=self.refresh, request_timeout=self.write_timeout_s,
        )  # fmt: skip
        return new

    async def _flip(self, prev: dict[str, Any], successor_id: str) -> bool:
        """Re-index the previous version as not current, conditional on the seq_no we read.

        A full re-index rather than a partial update: the knn fields are not in ``_source``,
        so an update would drop them."""
        old = memory_from_row(prev["_source"], OPENSEARCH)
        old.is_current = False
        try:
            await self.runner(
                self.client.index, index=self.memories, id=prev["_id"],
                body=self._memory_doc(old, successor_id=successor_id),
                if_seq_no=prev["_seq_no"], if_primary_term=prev["_primary_term"],
                refresh=self.refresh, request_timeout=self.write_timeout_s,
            )  # fmt: skip
            return True
        except os_exc.ConflictError:
            return False

    async def _delete_quietly(self, index: str, doc_id: str) -> None:
        try:
            await self.runner(self.client.delete, index=index, id=doc_id, refresh=self.refresh)
        except os_exc.NotFoundError:
            pass

    async def get_memory(self, owner: Owner, memory_id: str) -> Memory | None:
        got = await self._get(self.memories, owner_key(owner.tenant_id, owner.user_id, memory_id))
        return memory_from_row(got["_source"], OPENSEARCH) if got else None

    async def get_chain(self, owner: Owner, memory_id: str) -> list[Memory]:
        start = await self._get(self.memories, owner_key(owner.tenant_id, owner.user_id, memory_id))
        if start is None:
            return []
        chain: dict[str, Memory] = {}
        src = start["_source"]
        chain[src["memory_id"]] = memory_from_row(src, OPENSEARCH)
        back = src.get("replaces_id")
        while back and back not in chain:  # walk back through replaces_id (realtime GETs)
            got = await self._get(self.memories, owner_key(owner.tenant_id, owner.user_id, back))
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
            got = await self._get(self.memories, owner_key(owner.tenant_id, owner.user_id, nxt))
            if got is None:
                break
            head_src = got["_source"]
            chain[nxt] = memory_from_row(head_src, OPENSEARCH)
        return sorted(chain.values(), key=lambda m: (m.version, m.created_at))

    async def fetch_memories(self, owner: Owner, ids: Sequence[str]) -> list[Memory]:
        docs = await self._mget(self.memories, [owner_key(owner.tenant_id, owner.user_id, i) for i in ids])
        by_id = {d["memory_id"]: memory_from_row(d, OPENSEARCH) for d in docs}
        return [by_id[i] for i in ids if i in by_id]

    async def _search(self, owner: Owner, body: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
        """Run ``body`` on the memories index together (one ``_msearch``) with the query for this
        owner's versions still waiting for their flip; returns the hits and the ids to drop.

        A pending version supersedes the version it replaces (the higher version wins), unless
        that version already names another successor: then the pending one is the orphan of a
        lost race whose writer died before deleting it, and it is the one dropped.
        """
        pending_q = {
            "size": 100,
            "_source": ["memory_id", "replaces_id"],
            "query": {"bool": {"filter": [*_owner_query(owner)["bool"]["filter"], {"term": {"flip_pending": True}}]}},
        }
        lines = [{"index": self.memories}, body, {"index": self.memories}, pending_q]
        res = await self.runner(self.client.msearch, body=lines, request_timeout=self.search_timeout_s)
        main, pending = res["responses"]
        for r in (main, pending):
            if "error" in r:
                raise RuntimeError(f"opensearch search failed: {r['error']}")
        drop: set[str] = set()
        waiting = [h["_source"] for h in pending["hits"]["hits"] if h["_source"].get("replaces_id")]
        if waiting:
            keys = [owner_key(owner.tenant_id, owner.user_id, w["replaces_id"]) for w in waiting]
            replaced = {d["memory_id"]: d for d in await self._mget(self.memories, keys)}
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

    async def vector_search(
        self,
        flt: SearchFilter,
        query: np.ndarray,
        query_short: np.ndarray | None,
        *,
        limit: int,
        shortlist: int,
    ) -> VectorSearchResult:
        if limit <= 0:
            return VectorSearchResult(hits=[])
        q = np.asarray(query, dtype=np.float32)
        size = limit + 3  # room for hits dropped as superseded
        knn_filter = {"bool": {"filter": opensearch_filter(flt)}}
        body: dict[str, Any]
        if query_short is not None:
            k = max(shortlist, size)
            body = {
                "size": size,
                "_source": {"excludes": ["embedding_short_b64"]},
                "track_total_hits": True,
                "query": {"knn": {"embedding_short": {"vector": np.asarray(query_short, dtype=float).tolist(), "k": k, "filter": knn_filter}}},
                "rescore": {
                    "window_size": k,
                    "query": {
                        "rescore_query": {"script_score": {"query": {"match_all": {}}, "script": _knn_score("embedding", q)}},
                        "query_weight": 0.0,
                        "rescore_query_weight": 1.0,
                    },
                },
            }  # fmt: skip
        else:
            body = {
                "size": size,
                "_source": {"excludes": ["embedding_short_b64"]},
                "track_total_hits": False,
                "query": {"script_score": {"query": knn_filter, "script": _knn_score("embedding", q)}},
            }
        t0 = time.perf_counter()
        found, drop = await self._search(flt.owner, body)
        t_req = (time.perf_counter() - t0) * 1000
        t1 = time.perf_counter()
        memories = [
            memory_from_row(h["_source"], OPENSEARCH) for h in found["hits"] if h["_source"]["memory_id"] not in drop
        ]
        qn = q / (np.linalg.norm(q) or 1.0)
        scored = []
        for m in memories:
            assert m.embedding is not None
            e = m.embedding
            scored.append(ScoredMemory(m, float(e @ qn / (np.linalg.norm(e) or 1.0))))
        scored.sort(key=lambda s: -s.score)
        t_full = (time.perf_counter() - t1) * 1000
        if query_short is not None:
            return VectorSearchResult(
                hits=scored[:limit],
                candidates_short=int(found["total"]["value"]),
                timings_ms={"vector_short": t_req, "vector_full": t_full},
            )
        return VectorSearchResult(hits=scored[:limit], candidates_short=0, timings_ms={"vector_full": t_req + t_full})

    async def keyword_search(self, flt: SearchFilter, text: str, *, limit: int) -> list[ScoredMemory]:
        words = match_text(text)
        if not words or limit <= 0:
            return []
        body = {
            "size": limit + 3,
            "_source": {"excludes": ["embedding_short_b64"]},
            "track_total_hits": False,
            "query": {"bool": {"must": [match_clause(words)], "filter": opensearch_filter(flt)}},
        }
        found, drop = await self._search(flt.owner, body)
        out = [
            ScoredMemory(memory_from_row(h["_source"], OPENSEARCH), float(h["_score"]))
            for h in found["hits"]
            if h["_source"]["memory_id"] not in drop
        ]
        return out[:limit]

    async def list_memories(
        self, owner: Owner, *, include_history: bool = False, limit: int = 1000, after_id: str | None = None
    ) -> list[Memory]:
        filters = list(_owner_query(owner)["bool"]["filter"])
        if not include_history:
            filters.append({"term": {"is_current": True}})
        if after_id is not None:
            filters.append({"range": {"memory_id": {"gt": after_id}}})
        body = {
            "size": limit,
            "sort": [{"memory_id": "asc"}],
            "query": {"bool": {"filter": filters}},
            "track_total_hits": False,
        }
        if include_history:
            res = await self.runner(
                self.client.search, index=self.memories, body=body, request_timeout=self.search_timeout_s
            )
            return [memory_from_row(h["_source"], OPENSEARCH) for h in res["hits"]["hits"]]
        found, drop = await self._search(owner, body)
        return [
            memory_from_row(h["_source"], OPENSEARCH) for h in found["hits"] if h["_source"]["memory_id"] not in drop
        ]

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
        res = await self.runner(
            self.client.search, index=self.memories, body=body, request_timeout=self.search_timeout_s
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
        q = _owner_query(owner)
        t = max(self.write_timeout_s, 30.0)
        return {
            "memories": await delete_matching(self.runner, self.memories, q, refresh=self.refresh, timeout_s=t),
            "messages": await delete_matching(self.runner, self.messages, q, refresh=self.refresh, timeout_s=t),
            "message_keys": await delete_matching(self.runner, self.message_keys, q, refresh=self.refresh, timeout_s=t),
            "jobs": await delete_matching(self.runner, self.jobs, q, refresh=self.refresh, timeout_s=t),
        }

    # -- jobs ------------------------------------------------------------------------------------
    async def _put_job(self, job: Job) -> None:
        await self.runner(
            self.client.index, index=self.jobs, id=owner_key(job.tenant_id, job.user_id, job.id),
            body=self._job_doc(job), refresh=self.refresh, request_timeout=self.write_timeout_s,
        )  # fmt: skip

    async def enqueue_job(self, job: Job) -> None:
        await self._put_job(job)

    async def save_job(self, job: Job) -> None:
        await self._put_job(job)

    @staticmethod
    def _due(src: dict[str, Any], now_us: int) -> bool:
        if src["status"] in (JobStatus.QUEUED.value, JobStatus.FAILED.value):
            return int(src["next_attempt_us"]) <= now_us
        lease = src.get("lease_until_us")
        return src["status"] == JobStatus.RUNNING.value and lease is not None and int(lease) <= now_us

    async def claim_job(self, now: datetime, lease_s: float) -> Job | None:
        now_us = epoch_us(now)
        due = {
            "bool": {
                "should": [
                    {"bool": {"filter": [{"terms": {"status": ["queued", "failed"]}}, {"range": {"next_attempt_us": {"lte": now_us}}}]}},
                    {"bool": {"filter": [{"term": {"status": "running"}}, {"range": {"lease_until_us": {"lte": now_us}}}]}},
                ],
                "minimum_should_match": 1,
            }
        }  # fmt: skip
        body = {"size": 10, "sort": [{"next_attempt_us": "asc"}], "query": due, "_source": False}
        res = await self.runner(self.client.search, index=self.jobs, body=body, request_timeout=self.search_timeout_s)
        for hit in res["hits"]["hits"]:
            fresh = await self._get(self.jobs, hit["_id"])  # the search may be up to a refresh behind
            if fresh is None or not self._due(fresh["_source"], now_us):
                continue
            job = job_from_row(fresh["_source"], OPENSEARCH)
            job.status, job.attempts, job.updated_at = JobStatus.RUNNING, job.attempts + 1, now
            lease_until = now + timedelta(seconds=lease_s)
            try:
                await self.runner(
                    self.client.index, index=self.jobs, id=hit["_id"], body=self._job_doc(job, lease_until),
                    if_seq_no=fresh["_seq_no"], if_primary_term=fresh["_primary_term"],
                    refresh=self.refresh, request_timeout=self.write_timeout_s,
                )  # fmt: skip
            except os_exc.ConflictError:
                continue  # another worker took it
            return job
        return None

    async def get_job(self, owner: Owner, job_id: str) -> Job | None:
        got = await self._get(self.jobs, owner_key(owner.tenant_id, owner.user_id, job_id))
        return job_from_row(got["_source"], OPENSEARCH) if got else None

    async def list_jobs(
        self, tenant_id: str, *, status: JobStatus | None = None, limit: int = 100, after_id: str | None = None
    ) -> list[Job]:
        """A search: sees jobs written up to a refresh ago (``refresh``)."""
        filters: list[dict[str, Any]] = [{"term": {"tenant_id": tenant_id}}]
        if status is not None:
            filters.append({"term": {"status": status.value}})
        if after_id is not None:
            filters.append({"range": {"id": {"gt": after_id}}})
        query = {"bool": {"filter": filters}}
        body = {"size": limit, "sort": [{"id": "asc"}], "query": query, "track_total_hits": False}
        res = await self.runner(self.client.search, index=self.jobs, body=body, request_timeout=self.search_timeout_s)
        return [job_from_row(h["_source"], OPENSEARCH) for h in res["hits"]["hits"]]

    # -- API keys --------------------------------------------------------------------------------
    async def put_api_key(self, record: ApiKeyRecord) -> None:
        await self.runner(
            self.client.index, index=self.apikeys, id=record.key_hash,
            body={"key_hash": record.key_hash, "tenant_id": record.tenant_id, "read_only": record.read_only,
                  "name": record.name},
            refresh=self.refresh, request_timeout=self.write_timeout_s,
        )  # fmt: skip

    async def get_api_key(self, key_hash: str) -> ApiKeyRecord | None:
        """One realtime multi-get of the key and of its revocation."""
        res = await self.runner(
            self.client.mget,
            body={"docs": [{"_index": self.apikeys, "_id": key_hash}, {"_index": self.revocations, "_id": key_hash}]},
            request_timeout=self.write_timeout_s,
        )
        key, revocation = res["docs"]
        if not key.get("found") or revocation.get("found"):
            return None
        s = key["_source"]
        return ApiKeyRecord(
            key_hash=s["key_hash"], tenant_id=s["tenant_id"], read_only=bool(s["read_only"]), name=s["name"]
        )

    async def revoke_api_key(self, key_hash: str) -> bool:
        """The revocation first, then the key: a crash in between leaves a key that is refused."""
        await self._create(self.revocations, key_hash, {"key_hash": key_hash, "revoked_at": iso(datetime.now(UTC))})
        try:
            await self.runner(
                self.client.delete, index=self.apikeys, id=key_hash, refresh=self.refresh,
                request_timeout=self.write_timeout_s,
            )  # fmt: skip
            return True
        except os_exc.NotFoundError:
            return False

    async def api_key_revoked(self, key_hash: str) -> bool:
        return await self._get(self.revocations, key_hash) is not None

    # -- bulk load (benchmarks, imports) ----------------------------------------------------------
    async def bulk_load(self, memories: Sequence[Memory], *, chunk: int = 1000) -> None:
        """Index many memories fast (no refresh per request; one refresh at the end)."""
        for i in range(0, len(memories), chunk):
            body: list[dict[str, Any]] = []
            for m in memories[i : i + chunk]:
                body.append({"index": {"_index": self.memories, "_id": owner_key(m.tenant_id, m.user_id, m.id)}})
                body.append(self._memory_doc(m))
            res = await self.runner(self.client.bulk, body=body, request_timeout=300)
            if res.get("errors"):
                bad = [it["index"] for it in res["items"] if it["index"].get("status") not in (200, 201)]
                raise RuntimeError(f"bulk_load: {len(bad)} documents failed, e.g. {bad[0] if bad else res}")
        await self.runner(self.client.indices.refresh, index=self.memories, request_timeout=300)


def from_settings(settings: Settings, *, dim: int, dim_short: int) -> StoreBundle:
    """The OpenSearch-only store over ``opensearch_url`` (registry entry ``opensearch``)."""
    from .connections import opensearch_client

    return OpenSearchStore(
        opensearch_client(settings),
        index_prefix=settings.opensearch.index_prefix,
        dim=dim,
        dim_short=dim_short,
        search_timeout_s=settings.opensearch.timeout_s,
        write_timeout_s=settings.opensearch.timeout_s,
        vector_space=settings.embedder.vector_space,
    ).roles()
