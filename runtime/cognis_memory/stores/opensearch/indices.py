"""The indices of the OpenSearch-only store: their names, mappings and creation, the vector-space check,
and the document reads and writes every role of the store uses.

Indices (each an alias ``<prefix>-<name>`` over ``<prefix>-<name>-000001``): ``memories``,
``messages``, ``message-keys`` (client message id claims), ``jobs``, ``apikeys``,
``apikey-revocations`` (hashes revoked for good). Document ids are *owner-scoped*
(:func:`~.documents.owner_key`).

An index is created once, with a strict mapping; opening adds the fields a newer record has to it
(:func:`~.client.ensure_index`, an additive ``PUT _mapping``). Moving data is more: the ``messages``
index records the layout of its documents in its ``_meta`` (:data:`MESSAGE_LAYOUT_KEY`), and one made
before layout 2 (a message's scope and its raw memory's id as keys of its metadata) is upgraded when the
store opens: every document is rewritten in the new layout (:func:`message_in_layout_2`), then the layout
is recorded, so a later open costs one mapping read. The ``memories`` index likewise records
:data:`MEMORY_LAYOUT_KEY`: one made before layout 2 gets each memory's chain id (the id of its chain's
first version, found by walking ``replaces_id`` back) written into every document that lacks it (each
document written whole again, see :func:`memory_document`); one made before layout 3 gets each fact's
superseded sources moved out of its metadata into their field (:func:`memory_in_layout_3`). The exact-time
fields the time-ordered listings sort on (:data:`SAID_US`, :data:`TS_US`) are filled in on open for the
documents written before them (:meth:`OpenSearchIndices._add_exact_times`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy import exceptions as os_exc

from ...domain import SUPERSEDED_SOURCES_KEY, Memory, MemoryKind, Scope
from ..records import MEMORY_RECORD, MESSAGE_RECORD, OPENSEARCH, aware, epoch_us, memory_from_row
from ..vector_space import KEY as VECTOR_SPACE_KEY
from ..vector_space import check as check_vector_space
from .client import OpenSearchRunner, Refresh, ensure_index, index_settings
from .documents import knn_field, memory_fields, memory_mapping, message_mapping, owner_key

#: The ``_meta`` key of the messages index holding the layout of its documents (absent: layout 1).
MESSAGE_LAYOUT_KEY = "message_layout"
#: 2: ``scope`` and ``raw_memory_id`` are fields of their own (layout 1 kept them in ``metadata``).
MESSAGE_LAYOUT = 2
#: The ``_meta`` key of the memories index holding the layout of its documents (absent: layout 1).
MEMORY_LAYOUT_KEY = "memory_layout"
#: 2: every memory document has ``chain_id`` (layout 1 had none). 3: a fact's ``superseded_sources`` is a
#: field of its own (layouts 1 and 2 kept it in ``metadata``).
MEMORY_LAYOUT = 3
#: documents rewritten per bulk request when an index is upgraded
UPGRADE_PAGE = 500
#: A memory's listing time (:attr:`~cognis_memory.domain.Memory.said_at`) and a message's timestamp in exact
#: epoch microseconds: the listings sort on them (a ``date`` keeps only milliseconds).
SAID_US = "said_us"
TS_US = "ts_us"


def memory_doc(m: Memory, *, successor_id: str | None = None, flip_pending: bool = False) -> dict[str, Any]:
    """The whole document of one memory version: its record fields, the version-chain bookkeeping of this
    store (``successor_id``, ``flip_pending``) and the exact listing time."""
    return memory_fields(m, MEMORY_RECORD) | {
        "successor_id": successor_id,
        "flip_pending": flip_pending,
        SAID_US: epoch_us(m.said_at),
    }


def memory_document(source: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A memory document rebuilt whole from its ``_source`` with ``changes`` applied: the knn fields are not
    kept in ``_source`` (a partial update would lose them), so they are written again from their stored
    float32 copies."""
    m = memory_from_row(source, OPENSEARCH)
    for name, value in changes.items():
        setattr(m, name, value)
    return memory_doc(m, successor_id=source.get("successor_id"), flip_pending=bool(source.get("flip_pending", False)))


def message_in_layout_2(source: dict[str, Any]) -> dict[str, Any]:
    """A message document of layout 1 in layout 2: ``scope`` and ``raw_memory_id`` taken out of its
    metadata (a message without a scope there is USER, as it was read)."""
    metadata = dict(source.get("metadata") or {})
    scope = Scope.CONTEXT if metadata.pop("scope", None) == Scope.CONTEXT.value else Scope.USER
    raw_memory_id = metadata.pop("raw_memory_id", None)
    return {**source, "metadata": metadata, "scope": scope.value, "raw_memory_id": raw_memory_id}


def memory_in_layout_3(source: dict[str, Any]) -> dict[str, Any] | None:
    """The whole document of a fact whose metadata holds its superseded sources (layouts 1 and 2), with them
    moved into their field (the list's text items, in order); None for any other document. A raw memory's
    metadata is the caller's message metadata: a key of that name there is the caller's and stays."""
    metadata = source.get("metadata")
    if source.get("kind") != MemoryKind.FACT.value or not isinstance(metadata, dict):
        return None
    if SUPERSEDED_SOURCES_KEY not in metadata:
        return None
    rest = dict(metadata)
    value = rest.pop(SUPERSEDED_SOURCES_KEY)
    sources = [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
    return memory_document(source, superseded_sources=sources, metadata=rest)


class OpenSearchIndices:
    """The indices of one OpenSearch-only store (``client``: a synchronous ``opensearchpy.OpenSearch``,
    which the store owns from now on)."""

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
        vector_space: str | None = None,
    ) -> None:
        self.client = client
        #: the embedding model's vector space, kept in the memories index's ``_meta`` (None: no check)
        self.vector_space = vector_space
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
                "properties": memory_mapping(MEMORY_RECORD, self.vector_fields)
                | {"successor_id": kw, "flip_pending": {"type": "boolean"}, SAID_US: {"type": "long"}},
                "_source": {"excludes": ["embedding", "embedding_short"]},
                "_meta": {MEMORY_LAYOUT_KEY: MEMORY_LAYOUT},
            },
        }
        messages = {
            "settings": settings,
            "mappings": {
                "dynamic": "strict",
                "properties": message_mapping(MESSAGE_RECORD) | {TS_US: {"type": "long"}},
                "_meta": {MESSAGE_LAYOUT_KEY: MESSAGE_LAYOUT},
            },
        }
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

    def vector_fields(self, name: str) -> dict[str, Any]:
        """A vector's ``knn_vector`` field and the compact copy (float32, base64) returned with hits: the knn
        fields are not in ``_source``."""
        return {
            name: knn_field(self.dim if name == "embedding" else self.dim_short),
            f"{name}_b64": {"type": "binary"},
        }

    async def open(self) -> None:
        """Create the indices (with aliases) when missing, add the fields a newer record has to those that exist;
        idempotent and safe under concurrency."""
        for alias, body in self._bodies().items():
            await ensure_index(self.runner, alias, f"{alias}-000001", body)
        await self._upgrade_messages()
        await self._upgrade_memories()  # first: it writes whole documents, the exact time among their fields
        await self._add_exact_times(self.memories, SAID_US, ("message_time", "created_at"))
        await self._add_exact_times(self.messages, TS_US, ("ts",))
        await self._check_vector_space()

    async def _add_exact_times(self, index: str, field: str, sources: tuple[str, ...]) -> None:
        """Give the documents written before ``field`` existed their exact time, from the first of the ISO 8601
        ``sources`` they have, page by page (nothing to do costs one search). Each write is conditional on the
        document being unchanged since it was read, so a document changed or deleted meanwhile is read again or
        left alone; several stores opening at once each finish what the other has not. A memory document is
        written whole (:func:`memory_document`): its knn fields are not in ``_source``, so a partial update
        would drop its vectors."""
        whole = index == self.memories
        client, timeout = self.client, self.write_timeout_s
        query = {"bool": {"must_not": [{"exists": {"field": field}}]}}
        await self.runner(client.indices.refresh, index=index, request_timeout=timeout)
        stuck = 0
        while True:
            res = await self.runner(
                client.search, index=index, request_timeout=timeout,
                body={"size": UPGRADE_PAGE, "query": query, "seq_no_primary_term": True, "sort": ["_doc"],
                      "_source": True if whole else list(sources)},
            )  # fmt: skip
            hits = res["hits"]["hits"]
            if not hits:
                return
            body: list[dict[str, Any]] = []
            for h in hits:
                said = next((h["_source"][f] for f in sources if h["_source"].get(f)), None)
                if said is None:
                    raise RuntimeError(f"adding {field} to {index}: document {h['_id']} has none of {sources}")
                where = {"_index": h["_index"], "_id": h["_id"], "if_seq_no": h["_seq_no"]}
                exact = epoch_us(aware(datetime.fromisoformat(said)))  # type: ignore[arg-type]
                where |= {"if_primary_term": h["_primary_term"]}
                if whole:
                    body += [{"index": where}, memory_document(h["_source"])]
                else:
                    body += [{"update": where}, {"doc": {field: exact}}]
            done = await self.runner(client.bulk, body=body, refresh=True, request_timeout=timeout)
            results = [next(iter(i.values())) for i in done["items"]]
            statuses = [int(r.get("status", 500)) for r in results]
            failed = [r for r, st in zip(results, statuses, strict=True) if st not in (200, 201, 404, 409)]
            if failed:
                raise RuntimeError(f"adding {field} to {index}: a write failed: {failed[0]}")
            # A page of conflicts only (changed meanwhile, or written by another opener) is read again. Documents
            # that keep coming back without the field are being written by an older release.
            stuck = 0 if 200 in statuses or 201 in statuses else stuck + 1
            if stuck == 3:
                raise RuntimeError(
                    f"adding {field} to {index}: documents without it keep being written "
                    "(is an older release of cognis-memory still running on this index?)"
                )

    async def _upgrade_messages(self) -> None:
        """Bring a messages index made before :data:`MESSAGE_LAYOUT` to it (see the module's docstring). Safe
        when several stores open at once: each step can run twice (a document rewritten by one is skipped by
        the other's conditional write)."""
        found: dict[str, Any] = await self.runner(self.client.indices.get_mapping, index=self.messages)
        index: dict[str, Any] = next(iter(found.values()), {})  # the alias's one concrete index
        mapping: dict[str, Any] = index.get("mappings", {})
        meta: dict[str, Any] = mapping.get("_meta", {})
        if meta.get(MESSAGE_LAYOUT_KEY, 1) >= MESSAGE_LAYOUT:
            return
        await self._rewrite_messages_of_layout_1()  # ensure_index has added the fields to the mapping
        body = {"_meta": {**meta, MESSAGE_LAYOUT_KEY: MESSAGE_LAYOUT}}
        await self.runner(self.client.indices.put_mapping, index=self.messages, body=body)

    async def _rewrite_messages_of_layout_1(self) -> None:
        """Rewrite every message document without a ``scope`` field (layout 1) in layout 2, page by page. Each
        write is conditional on the document being unchanged since it was read (``if_seq_no``), so a message
        deleted meanwhile (a forget) is not written back."""
        client, timeout = self.client, self.write_timeout_s
        query = {"bool": {"must_not": [{"exists": {"field": "scope"}}]}}
        await self.runner(client.indices.refresh, index=self.messages, request_timeout=timeout)
        stuck = 0
        while True:
            res = await self.runner(
                client.search, index=self.messages, request_timeout=timeout,
                body={"size": UPGRADE_PAGE, "query": query, "seq_no_primary_term": True, "sort": ["_doc"]},
            )  # fmt: skip
            hits = res["hits"]["hits"]
            if not hits:
                return
            body: list[dict[str, Any]] = []
            for h in hits:
                where = {"_index": h["_index"], "_id": h["_id"], "if_seq_no": h["_seq_no"]}
                body += [{"index": where | {"if_primary_term": h["_primary_term"]}}, message_in_layout_2(h["_source"])]
            done = await self.runner(client.bulk, body=body, refresh=True, request_timeout=timeout)
            written = 0
            for item in done["items"]:
                status = int(item["index"].get("status", 500))
                if status in (200, 201):
                    written += 1
                elif status != 409:  # 409: changed or deleted since it was read
                    raise RuntimeError(f"upgrading the messages of {self.messages}: a write failed: {item['index']}")
            # A page of conflicts only (deleted, or rewritten by another opener) is read again: those documents
            # no longer match. Documents that keep coming back in layout 1 are being written by an older release.
            stuck = 0 if written else stuck + 1
            if stuck == 3:
                raise RuntimeError(
                    f"upgrading the messages of {self.messages}: messages in the old layout keep being written "
                    "(is an older release of cognis-memory still running on this index?)"
                )

    async def _index_meta(self, index: str) -> dict[str, Any]:
        found: dict[str, Any] = await self.runner(self.client.indices.get_mapping, index=index)
        concrete: dict[str, Any] = next(iter(found.values()), {})  # the alias's one concrete index
        meta: dict[str, Any] = concrete.get("mappings", {}).get("_meta", {})
        return meta

    async def _upgrade_memories(self) -> None:
        """Bring a memories index made before :data:`MEMORY_LAYOUT` to it (see the module's docstring), then
        record the layout. Conditional writes, as for the messages: safe when several stores open at once, and
        a document changed meanwhile is read again."""
        meta = await self._index_meta(self.memories)
        layout = meta.get(MEMORY_LAYOUT_KEY, 1)
        if layout >= MEMORY_LAYOUT:
            return
        if layout < 2:
            await self._fill_chain_ids()
        await self._move_superseded_sources()
        meta = await self._index_meta(self.memories)
        await self.runner(
            self.client.indices.put_mapping,
            index=self.memories,
            body={"_meta": {**meta, MEMORY_LAYOUT_KEY: MEMORY_LAYOUT}},
        )

    async def _fill_chain_ids(self) -> None:
        """Write its chain id into every memory document without one, page by page."""
        client, timeout = self.client, self.write_timeout_s
        query = {"bool": {"must_not": [{"exists": {"field": "chain_id"}}]}}
        await self.runner(client.indices.refresh, index=self.memories, request_timeout=timeout)
        stuck = 0
        while True:
            res = await self.runner(
                client.search, index=self.memories, request_timeout=timeout,
                body={"size": UPGRADE_PAGE, "query": query, "seq_no_primary_term": True, "sort": ["_doc"]},
            )  # fmt: skip
            hits = res["hits"]["hits"]
            if not hits:
                break
            roots = await self._chain_roots([h["_source"] for h in hits])
            body: list[dict[str, Any]] = []
            for h in hits:
                where = {"_index": h["_index"], "_id": h["_id"], "if_seq_no": h["_seq_no"]}
                doc = memory_document(h["_source"], chain_id=roots[h["_source"]["memory_id"]])
                body += [{"index": where | {"if_primary_term": h["_primary_term"]}}, doc]
            done = await self.runner(client.bulk, body=body, refresh=True, request_timeout=timeout)
            written = sum(1 for item in done["items"] if int(item["index"].get("status", 500)) in (200, 201))
            failed = [it["index"] for it in done["items"] if int(it["index"].get("status", 500)) not in (200, 201, 409)]
            if failed:
                raise RuntimeError(f"upgrading the memories of {self.memories}: a write failed: {failed[0]}")
            stuck = 0 if written else stuck + 1
            if stuck == 3:
                raise RuntimeError(
                    f"upgrading the memories of {self.memories}: memories without a chain id keep being written "
                    "(is an older release of cognis-memory still running on this index?)"
                )

    async def _move_superseded_sources(self) -> None:
        """Rewrite every fact document whose metadata holds its superseded sources in layout 3
        (:func:`memory_in_layout_3`). The facts without the field are read page by page in a fixed order
        (``search_after``: a fact with no superseded source still lacks the field once rewritten, so the
        search does not shrink as the documents are done); a document changed since it was read is not
        written, and the facts are read again until a pass meets no such change."""
        client, timeout = self.client, self.write_timeout_s
        query = {"bool": {"filter": [{"term": {"kind": MemoryKind.FACT.value}}],
                          "must_not": [{"exists": {"field": "superseded_sources"}}]}}  # fmt: skip
        order = [{"tenant_id": "asc"}, {"user_id": "asc"}, {"memory_id": "asc"}]  # unique: the document id's parts
        for _ in range(3):
            await self.runner(client.indices.refresh, index=self.memories, request_timeout=timeout)
            changed, after = 0, None
            while True:
                page = {"size": UPGRADE_PAGE, "query": query, "seq_no_primary_term": True, "sort": order}
                res = await self.runner(
                    client.search, index=self.memories, request_timeout=timeout,
                    body=page | ({"search_after": after} if after else {}),
                )  # fmt: skip
                hits = res["hits"]["hits"]
                if not hits:
                    break
                after = hits[-1]["sort"]
                body: list[dict[str, Any]] = []
                for h in hits:
                    doc = memory_in_layout_3(h["_source"])
                    if doc is not None:
                        where = {"_index": h["_index"], "_id": h["_id"], "if_seq_no": h["_seq_no"]}
                        body += [{"index": where | {"if_primary_term": h["_primary_term"]}}, doc]
                if not body:
                    continue
                done = await self.runner(client.bulk, body=body, refresh=True, request_timeout=timeout)
                statuses = [int(it["index"].get("status", 500)) for it in done["items"]]
                failed = [
                    it["index"] for it, st in zip(done["items"], statuses, strict=True) if st not in (200, 201, 409)
                ]
                if failed:
                    raise RuntimeError(f"upgrading the memories of {self.memories}: a write failed: {failed[0]}")
                changed += statuses.count(409)
            if not changed:
                return
        raise RuntimeError(
            f"upgrading the memories of {self.memories}: facts with superseded sources in their metadata keep being "
            "changed while they are moved (is an older release of cognis-memory still running on this index?)"
        )

    async def _chain_roots(self, sources: Sequence[dict[str, Any]]) -> dict[str, str]:
        """The chain id of each memory document (by ``memory_id``): the nearest ``chain_id`` on the way back
        through ``replaces_id``, else the id of the first version reached (within the document's owner);
        the versions on the way are read in one ``mget`` per step back."""
        known: dict[tuple[str, str, str], dict[str, Any] | None] = {
            (s["tenant_id"], s["user_id"], s["memory_id"]): s for s in sources
        }

        def root(s: dict[str, Any]) -> str | tuple[str, str, str]:
            seen: set[str] = set()
            while True:
                if s.get("chain_id"):
                    return str(s["chain_id"])
                back = s.get("replaces_id")
                if not back or back in seen:
                    return str(s["memory_id"])
                seen.add(back)
                key = (s["tenant_id"], s["user_id"], back)
                if key not in known:
                    return key  # to read first
                previous = known[key]
                if previous is None:  # the earlier version is gone: this one starts what is left
                    return str(s["memory_id"])
                s = previous

        while True:
            found = {s["memory_id"]: root(s) for s in sources}
            wanted = sorted({r for r in found.values() if isinstance(r, tuple)})
            if not wanted:
                return {k: str(v) for k, v in found.items()}
            docs = await self.mget_sources(self.memories, [owner_key(*k) for k in wanted])
            by_key = {(d["tenant_id"], d["user_id"], d["memory_id"]): d for d in docs}
            known.update({k: by_key.get(k) for k in wanted})

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

    # -- documents -------------------------------------------------------------------------------
    async def get_source(self, index: str, doc_id: str) -> dict[str, Any] | None:
        """Realtime GET: the raw response (``_source``, ``_seq_no``, ``_primary_term``) or None."""
        try:
            return await self.runner(self.client.get, index=index, id=doc_id, request_timeout=self.write_timeout_s)
        except os_exc.NotFoundError:
            return None

    async def mget_sources(self, index: str, doc_ids: Sequence[str]) -> list[dict[str, Any]]:
        if not doc_ids:
            return []
        res = await self.runner(
            self.client.mget, index=index, body={"ids": list(doc_ids)}, request_timeout=self.write_timeout_s
        )
        return [d["_source"] for d in res["docs"] if d.get("found")]

    async def create(self, index: str, doc_id: str, doc: dict[str, Any]) -> bool:
        """Create a document; False when that id exists already."""
        try:
            await self.runner(
                self.client.index, index=index, id=doc_id, body=doc, op_type="create",
                refresh=self.refresh, request_timeout=self.write_timeout_s,
            )  # fmt: skip
            return True
        except os_exc.ConflictError:
            return False

    async def delete_quietly(self, index: str, doc_id: str) -> None:
        try:
            await self.runner(self.client.delete, index=index, id=doc_id, refresh=self.refresh)
        except os_exc.NotFoundError:
            pass
