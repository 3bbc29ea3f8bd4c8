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
is recorded, so a later open costs one mapping read. The exact-time fields the time-ordered listings sort on
(:data:`SAID_US`, :data:`TS_US`) are filled in on open for the documents written before them
(:meth:`OpenSearchIndices._add_exact_times`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy import exceptions as os_exc

from ...domain import Scope
from ..records import MEMORY_RECORD, MESSAGE_RECORD, aware, epoch_us
from ..vector_space import KEY as VECTOR_SPACE_KEY
from ..vector_space import check as check_vector_space
from .client import OpenSearchRunner, Refresh, ensure_index, index_settings
from .documents import knn_field, memory_mapping, message_mapping

#: The ``_meta`` key of the messages index holding the layout of its documents (absent: layout 1).
MESSAGE_LAYOUT_KEY = "message_layout"
#: 2: ``scope`` and ``raw_memory_id`` are fields of their own (layout 1 kept them in ``metadata``).
MESSAGE_LAYOUT = 2
#: documents rewritten per bulk request when an index is upgraded
UPGRADE_PAGE = 500
#: A memory's listing time (:attr:`~cognis_memory.domain.Memory.said_at`) and a message's timestamp in exact
#: epoch microseconds: the listings sort on them (a ``date`` keeps only milliseconds).
SAID_US = "said_us"
TS_US = "ts_us"


def message_in_layout_2(source: dict[str, Any]) -> dict[str, Any]:
    """A message document of layout 1 in layout 2: ``scope`` and ``raw_memory_id`` taken out of its
    metadata (a message without a scope there is USER, as it was read)."""
    metadata = dict(source.get("metadata") or {})
    scope = Scope.CONTEXT if metadata.pop("scope", None) == Scope.CONTEXT.value else Scope.USER
    raw_memory_id = metadata.pop("raw_memory_id", None)
    return {**source, "metadata": metadata, "scope": scope.value, "raw_memory_id": raw_memory_id}


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
        await self._add_exact_times(self.memories, SAID_US, ("message_time", "created_at"))
        await self._add_exact_times(self.messages, TS_US, ("ts",))
        await self._check_vector_space()

    async def _add_exact_times(self, index: str, field: str, sources: tuple[str, ...]) -> None:
        """Give the documents written before ``field`` existed their exact time, from the first of the ISO 8601
        ``sources`` they have, page by page (nothing to do costs one search). Each write is conditional on the
        document being unchanged since it was read, so a document changed or deleted meanwhile is read again or
        left alone; several stores opening at once each finish what the other has not."""
        client, timeout = self.client, self.write_timeout_s
        query = {"bool": {"must_not": [{"exists": {"field": field}}]}}
        await self.runner(client.indices.refresh, index=index, request_timeout=timeout)
        stuck = 0
        while True:
            res = await self.runner(
                client.search, index=index, request_timeout=timeout,
                body={"size": UPGRADE_PAGE, "query": query, "seq_no_primary_term": True, "sort": ["_doc"],
                      "_source": list(sources)},
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
                body += [{"update": where | {"if_primary_term": h["_primary_term"]}}, {"doc": {field: exact}}]
            done = await self.runner(client.bulk, body=body, refresh=True, request_timeout=timeout)
            statuses = [int(i["update"].get("status", 500)) for i in done["items"]]
            failed = [i["update"] for i, st in zip(done["items"], statuses, strict=True) if st not in (200, 404, 409)]
            if failed:
                raise RuntimeError(f"adding {field} to {index}: a write failed: {failed[0]}")
            # A page of conflicts only (changed meanwhile, or written by another opener) is read again. Documents
            # that keep coming back without the field are being written by an older release.
            stuck = 0 if 200 in statuses else stuck + 1
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
