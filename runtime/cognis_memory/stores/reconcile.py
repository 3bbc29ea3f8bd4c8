"""Compare (and optionally repair) the dual store's OpenSearch keyword index against Postgres.

Postgres is the system of record. The index must hold exactly one document per *current*
memory, with the same version and owner. Drift kinds:

* ``missing``: current in Postgres, no document in OpenSearch (and no outbox work pending
  for it, which would still deliver it);
* ``extra``: a document whose memory is no longer current in Postgres or does not exist;
* ``mismatched``: a document for a current memory with another version, owner or
  ``is_current`` flag.

OpenSearch is scanned *before* Postgres: a memory can only stop being current over time, so a
document whose memory is not current at the (later) Postgres read is truly extra. A memory
created after the scan shows up as missing unless its outbox row is still pending (then it is
counted as ``pending`` instead); repairing it is harmless (idempotent, versioned).

Repair indexes missing and mismatched memories from Postgres with version ``4v+1``
(``external_gte``, so it also beats a tombstone left by an out-of-band delete) and deletes
extra documents (unversioned: whatever the index holds for a non-current memory must go).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from opensearchpy import exceptions as os_exc
from psycopg.rows import dict_row

from ..domain import Memory
from .dual import DualStore
from .opensearch.keyword_index import IndexOp, KeywordDoc, OpenSearchKeywordIndex, doc_version_repair
from .postgres import PostgresDatabase
from .records import MEMORY_COLUMNS_WITHOUT_VECTORS, POSTGRES, memory_from_row

#: How many example ids of each drift kind the report keeps.
SAMPLE = 20
_COLS_NO_VEC = ", ".join(MEMORY_COLUMNS_WITHOUT_VECTORS)


@dataclass(slots=True, frozen=True)
class IndexState:
    """(id, version, owner) of one current memory, as reconcile compares it."""

    memory_id: str
    version: int
    tenant_id: str
    user_id: str


async def iter_current_states(
    db: PostgresDatabase, *, tenant_id: str | None = None, batch: int = 5000
) -> AsyncIterator[IndexState]:
    """Every current memory's (id, version, owner), streamed with a server-side cursor (operator path)."""
    where = " AND tenant_id = %s" if tenant_id is not None else ""
    params: tuple[Any, ...] = (tenant_id,) if tenant_id is not None else ()
    async with db.connection() as conn, conn.transaction(), conn.cursor(name="cognis_reconcile") as cur:
        cur.itersize = batch
        await cur.execute(f"SELECT id, version, tenant_id, user_id FROM memories WHERE is_current{where}", params)
        async for r in cur:
            yield IndexState(r[0], r[1], r[2], r[3])


async def load_memories_unscoped(db: PostgresDatabase, ids: Sequence[str]) -> list[Memory]:
    """Memories by id across owners, without vectors. Operator path (reconcile repair) only: request
    handling always goes through the owner-scoped roles."""
    if not ids:
        return []
    async with db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(f"SELECT {_COLS_NO_VEC} FROM memories WHERE id = ANY(%s)", (list(ids),))
        return [memory_from_row(r, POSTGRES) for r in await cur.fetchall()]


@dataclass(slots=True)
class ReconcileReport:
    """Counts of what reconcile compared, found and fixed (``samples`` holds example ids)."""

    tenant_id: str | None = None
    repair: bool = False
    postgres_current: int = 0
    opensearch_documents: int = 0
    missing: int = 0
    extra: int = 0
    mismatched: int = 0
    pending: int = 0
    indexed: int = 0
    deleted: int = 0
    repair_failures: int = 0
    duration_s: float = 0.0
    samples: dict[str, list[str]] = field(default_factory=lambda: {"missing": [], "extra": [], "mismatched": []})

    @property
    def drift(self) -> int:
        return self.missing + self.extra + self.mismatched

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["drift"] = self.drift
        return d


def _keep(report: ReconcileReport, kind: str, memory_id: str) -> None:
    if len(report.samples[kind]) < SAMPLE:
        report.samples[kind].append(memory_id)


async def reconcile(
    store: DualStore, *, repair: bool, tenant_id: str | None = None, batch: int = 500
) -> ReconcileReport:
    """Compare the current memories of Postgres with the OpenSearch documents; fix drift if ``repair``."""
    t0 = time.perf_counter()
    report = ReconcileReport(tenant_id=tenant_id, repair=repair)
    index = store.keyword
    await index.refresh_now()  # documents indexed within the last refresh interval count too

    docs: dict[str, KeywordDoc] = {}
    async for doc in index.scan(tenant_id=tenant_id):
        docs[doc.memory_id] = doc
    report.opensearch_documents = len(docs)

    current: dict[str, IndexState] = {}
    async for st in iter_current_states(store.pg, tenant_id=tenant_id):
        current[st.memory_id] = st
    report.postgres_current = len(current)
    pending = await store.outbox.pending_memory_ids(tenant_id=tenant_id)

    to_index: list[str] = []
    to_delete: list[str] = []
    for mid, st in current.items():
        found = docs.get(mid)
        if found is None:
            if mid in pending:
                report.pending += 1
                continue
            report.missing += 1
            _keep(report, "missing", mid)
            to_index.append(mid)
        elif (found.version, found.tenant_id, found.user_id) != (st.version, st.tenant_id, st.user_id) or not (
            found.is_current
        ):
            report.mismatched += 1
            _keep(report, "mismatched", mid)
            to_index.append(mid)
    for mid in docs:
        if mid not in current:
            if mid in pending:
                report.pending += 1
                continue
            report.extra += 1
            _keep(report, "extra", mid)
            to_delete.append(mid)

    if repair:
        await _repair_index(store, index, to_index, batch, report)
        await _repair_delete(index, to_delete, batch, report)
        if to_index or to_delete:
            await index.refresh_now()
    report.duration_s = round(time.perf_counter() - t0, 3)
    return report


async def _repair_index(
    store: DualStore, index: OpenSearchKeywordIndex, ids: list[str], batch: int, report: ReconcileReport
) -> None:
    for i in range(0, len(ids), batch):
        memories = [m for m in await load_memories_unscoped(store.pg, ids[i : i + batch]) if m.is_current]
        ops = [
            IndexOp("index", m.id, doc_version_repair(m.version), OpenSearchKeywordIndex.document(m),
                    version_type="external_gte", conflict_ok=False)
            for m in memories
        ]  # fmt: skip
        for r in await index.apply(ops):
            if r.ok:
                report.indexed += 1
            else:
                report.repair_failures += 1


async def _repair_delete(index: OpenSearchKeywordIndex, ids: list[str], batch: int, report: ReconcileReport) -> None:
    runner, client = index.runner, index.client
    for i in range(0, len(ids), batch):
        body = [{"delete": {"_index": index.alias, "_id": mid}} for mid in ids[i : i + batch]]
        try:
            res = await runner(client.bulk, body=body, refresh=False, request_timeout=index.write_timeout_s)
        except os_exc.TransportError:
            report.repair_failures += len(body)
            continue
        for item in res["items"]:
            status = int(item["delete"].get("status", 500))
            if status in (200, 404):
                report.deleted += 1 if status == 200 else 0
            else:
                report.repair_failures += 1
