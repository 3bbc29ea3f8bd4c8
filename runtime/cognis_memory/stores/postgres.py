"""PostgreSQL + pgvector: the system of record of the dual store (usable on its own for vectors).

* Schema and idempotent migrations (:mod:`.migrations.postgres`) run on :meth:`PostgresStore.open`,
  serialised across processes by an advisory lock.
* Memories carry both vectors: ``embedding vector(dim)`` and ``embedding_short vector(dim_short)``.
  An HNSW index (``vector_cosine_ops``) covers the short vector of *current* rows.
* Two-stage vector search, both stages in SQL inside one transaction: an HNSW shortlist of
  ``shortlist`` rows on the short vector with every filter in the ``WHERE`` clause, with
  ``hnsw.iterative_scan = relaxed_order`` and ``hnsw.ef_search >= shortlist`` set locally (without
  the iterative scan a selective filter such as one user's rows can return far fewer rows than
  asked), then exact full-vector rescoring of that shortlist. Without a short query vector the
  search is one exact full-vector stage. Scores are cosine similarities (1 - cosine distance).
* ``write_version`` is one transaction that locks the previous row (``SELECT ... FOR UPDATE``).
* Jobs are claimed with ``FOR UPDATE SKIP LOCKED``, so many workers never take the same job.
* With an outbox listener attached (:meth:`PostgresStore.attach_outbox`, done by the dual store) every
  write adds, in the same transaction, the rows of the transactional outbox that mirrors the change
  into OpenSearch, and tells the listener after the commit.
* There is no BM25 here: the store supplies every role but keyword search
  (:mod:`cognis_memory.stores.roles`); the dual store adds OpenSearch for that one.

Connection or pool failures surface as :class:`~cognis_memory.errors.DependencyUnavailableError`
(``"postgres"``) so the API can answer 503 rather than 500.
"""

from __future__ import annotations

import contextlib
import logging
import struct
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

import numpy as np
import psycopg
from psycopg import sql as psql
from psycopg.abc import Buffer
from psycopg.adapt import Dumper, Loader
from psycopg.pq import Format
from psycopg.rows import dict_row
from psycopg.types import TypeInfo
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ..domain import Job, JobStatus, Memory, Message, Owner
from ..errors import ConflictError, DependencyUnavailableError, NotFoundError
from .filters import postgres_filter
from .migrations.postgres import apply_migrations, check_schema_current
from .records import (
    JOB_COLUMNS,
    MEMORY_COLUMNS,
    MEMORY_RECORD,
    MESSAGE_COLUMNS,
    POSTGRES,
    insert_statement,
    job_from_row,
    job_to_row,
    memory_from_row,
    memory_to_row,
    message_from_row,
    message_to_row,
    row_values,
)
from .values import ApiKeyRecord, ScoredMemory, SearchFilter, UserSummary, VectorSearchResult
from .vector_space import KEY as VECTOR_SPACE_KEY
from .vector_space import check as check_vector_space
from .version_chain import PSYCOPG_PARAM, chain_query

log = logging.getLogger(__name__)

_COLS = ", ".join(MEMORY_COLUMNS)
_CHAIN_SQL = chain_query(_COLS, PSYCOPG_PARAM)
_COLS_M = ", ".join(f"m.{c}" for c in MEMORY_COLUMNS)
_COLS_NO_VEC = ", ".join(c for c in MEMORY_COLUMNS if not c.startswith("embedding"))
_INSERT_MEMORY = insert_statement("memories", MEMORY_COLUMNS, "%s")
_INSERT_MESSAGE = insert_statement("messages", MESSAGE_COLUMNS, "%s")
#: a job is written whole; its lease is the queue's own column (a claim sets it, any save clears it)
_UPSERT_JOB = (
    insert_statement("jobs", (*JOB_COLUMNS, "lease_until"), "%s")
    + " ON CONFLICT (id) DO UPDATE SET status = excluded.status, attempts = excluded.attempts,"
    " last_error = excluded.last_error, next_attempt_at = excluded.next_attempt_at,"
    " lease_until = NULL, updated_at = excluded.updated_at, result = excluded.result"
    " WHERE jobs.tenant_id = excluded.tenant_id AND jobs.user_id = excluded.user_id"
)
_INSERT_OUTBOX = "INSERT INTO outbox (op, memory_id, tenant_id, user_id, version) VALUES (%s, %s, %s, %s, %s)"

#: pgvector accepts ef_search up to 1000.
_MAX_EF_SEARCH = 1000


# -- fast numpy <-> pgvector binary adaptation -------------------------------------------------------
class _VectorBinaryLoader(Loader):
    """pgvector binary format (uint16 dim, uint16 unused, big-endian float32s) to a float32 ndarray."""

    format = Format.BINARY

    def load(self, data: Buffer) -> np.ndarray:
        return np.frombuffer(bytes(data), dtype=">f4", offset=4).astype(np.float32)


class _VectorTextLoader(Loader):
    format = Format.TEXT

    def load(self, data: Buffer) -> np.ndarray:
        text = bytes(data).decode()
        return np.array([float(x) for x in text.strip("[]").split(",") if x], dtype=np.float32)


class _VectorBinaryDumper(Dumper):
    format = Format.BINARY

    def dump(self, obj: np.ndarray) -> Buffer:
        arr = np.ascontiguousarray(obj, dtype=">f4").ravel()
        return struct.pack(">HH", arr.shape[0], 0) + arr.tobytes()


async def register_vector_types(conn: psycopg.AsyncConnection[Any]) -> None:
    """Adapt numpy arrays to and from pgvector's ``vector`` type on this connection."""
    info = await TypeInfo.fetch(conn, "vector")
    if info is None:
        raise psycopg.ProgrammingError("the pgvector extension is not installed in this database")
    info.register(conn)
    dumper = type("NumpyVectorDumper", (_VectorBinaryDumper,), {"oid": info.oid})
    conn.adapters.register_dumper(np.ndarray, dumper)
    conn.adapters.register_loader(info.oid, _VectorBinaryLoader)
    conn.adapters.register_loader(info.oid, _VectorTextLoader)


#: the PostgreSQL type of each column kind (the binary COPY of :meth:`PostgresStore.bulk_load` names them)
_COPY_TYPES = {
    "text": "text", "enum": "text", "int": "int4", "flag": "bool", "time": "timestamptz",
    "required_time": "timestamptz", "ids": "text[]", "json": "jsonb", "vector": "vector",
}  # fmt: skip


def _memory_params(m: Memory) -> tuple[Any, ...]:
    return row_values(memory_to_row(m, POSTGRES), MEMORY_COLUMNS)


@dataclass(slots=True)
class OutboxItem:
    """One pending OpenSearch operation. ``op`` is what the writer intended (upsert/delete/forget)."""

    id: int
    op: str
    memory_id: str | None
    tenant_id: str
    user_id: str
    version: int | None
    attempts: int
    created_at: datetime


class OutboxBatch:
    """Outbox rows locked (``FOR UPDATE SKIP LOCKED``) by one drain, plus the Postgres state they mirror.

    Lives inside one transaction: :meth:`ack` deletes rows, :meth:`fail` records an attempt;
    both take effect when the batch's context exits without an exception.
    """

    def __init__(self, conn: psycopg.AsyncConnection[Any], items: list[OutboxItem], states: dict[str, Memory]) -> None:
        self._conn = conn
        self.items = items
        #: The current Postgres row of every memory named by an item (absent when it no longer exists).
        self.states = states

    async def ack(self, ids: Sequence[int]) -> None:
        if ids:
            await self._conn.execute("DELETE FROM outbox WHERE id = ANY(%s)", (list(ids),))

    async def fail(self, ids: Sequence[int], error: str, retry_in_s: float) -> None:
        if ids:
            await self._conn.execute(
                "UPDATE outbox SET attempts = attempts + 1, last_error = %s,"
                " next_attempt_at = now() + make_interval(secs => %s) WHERE id = ANY(%s)",
                (error[:2000], retry_in_s, list(ids)),
            )


@dataclass(slots=True, frozen=True)
class IndexState:
    """(id, version, owner) of one current memory, as reconcile compares it."""

    memory_id: str
    version: int
    tenant_id: str
    user_id: str


class OutboxListener(Protocol):
    """Who mirrors the outbox into the keyword index (the dual store's relay)."""

    async def after_write(self) -> None:
        """Called after every committed write that added outbox rows; must not raise."""

    async def after_forget(self, outbox_id: int) -> dict[str, int]:
        """Called after a user's rows were deleted and the durable ``forget`` item ``outbox_id``
        was written; returns the counts of the index side (added to ``forget_user``'s counts)."""


class PostgresStore:
    """PostgreSQL + pgvector: the message, memory-version, vector-search, job-queue and API-key roles
    (everything except BM25).

    ``dsn`` is a libpq connection string or URL, or a callable returning one (called for every new
    connection, so rotated credentials are picked up); ``dim``/``dim_short`` the vector sizes (part of
    the schema). ``migration_dsn`` (default: ``dsn``) is the schema owner's, used only by
    :meth:`open` to migrate; with it the pool runs as the least-privilege ``app_role``, which the
    migration creates and grants. ``iterative_scan`` is the pgvector ``hnsw.iterative_scan`` mode used by the
    shortlist stage (``"relaxed_order"``, ``"strict_order"`` or ``"off"`` — off exists for tests
    that show why it matters).
    """

    name = "postgres"

    def __init__(
        self,
        dsn: str | Callable[[], str],
        *,
        dim: int,
        dim_short: int,
        pool_min: int = 1,
        pool_max: int = 10,
        connect_timeout_s: float = 5.0,
        pool_timeout_s: float = 10.0,
        statement_timeout_ms: int = 30_000,
        iterative_scan: str = "relaxed_order",
        migration_dsn: str | Callable[[], str] | None = None,
        app_role: str | None = None,
        vector_space: str | None = None,
        migrate: bool = True,
    ) -> None:
        if iterative_scan not in {"relaxed_order", "strict_order", "off"}:
            raise ValueError(f"iterative_scan: unknown mode {iterative_scan!r}")
        self.dsn = dsn
        self.migration_dsn = migration_dsn if migration_dsn is not None else dsn
        #: False: open() applies nothing and only checks that the schema is current (migrations run elsewhere,
        #: e.g. `cognis-memory migrate` in a one-off task with the owner's credentials)
        self.migrate_on_open = migrate
        self.app_role = app_role
        self.dim, self.dim_short = dim, dim_short
        #: the embedding model's vector space, recorded on first open and checked after (None: no check)
        self.vector_space = vector_space
        self.pool_min, self.pool_max = pool_min, pool_max
        self.connect_timeout_s = connect_timeout_s
        self.pool_timeout_s = pool_timeout_s
        self.statement_timeout_ms = statement_timeout_ms
        self.iterative_scan = iterative_scan
        self._pool: AsyncConnectionPool | None = None
        self._outbox: OutboxListener | None = None

    def attach_outbox(self, listener: OutboxListener) -> None:
        """From now on every write also writes outbox rows and tells ``listener`` after the commit."""
        self._outbox = listener

    # -- lifecycle -----------------------------------------------------------------------------
    def _conninfo(self) -> str:
        return self.dsn() if callable(self.dsn) else self.dsn

    async def _configure(self, conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.set_autocommit(True)
        await conn.execute(
            "SELECT set_config('TimeZone', 'UTC', false), set_config('statement_timeout', %s, false)",
            (str(self.statement_timeout_ms),),
        )
        await register_vector_types(conn)

    async def migrate(self) -> list[int]:
        """Apply pending migrations as the schema owner (advisory-locked), create and grant the application
        role, record the vector space; the versions applied. Opens no pool."""
        try:
            owner_dsn = self.migration_dsn() if callable(self.migration_dsn) else self.migration_dsn
            async with await psycopg.AsyncConnection.connect(
                owner_dsn, autocommit=True, connect_timeout=max(1, int(self.connect_timeout_s))
            ) as conn:
                applied = await apply_migrations(conn, dim=self.dim, dim_short=self.dim_short, app_role=self.app_role)
                await self._check_vector_space(conn)
        except psycopg.OperationalError as e:
            raise DependencyUnavailableError("postgres", str(e)) from e
        if applied:
            log.info("postgres: applied migrations %s", applied)
        return applied

    async def _check_migrated(self) -> None:
        """Without migrating: the schema must be current (as the pool's role, which may read it)."""
        try:
            async with await psycopg.AsyncConnection.connect(
                self._conninfo(), autocommit=True, connect_timeout=max(1, int(self.connect_timeout_s))
            ) as conn:
                await check_schema_current(conn, dim=self.dim, dim_short=self.dim_short)
                await self._check_vector_space(conn)
        except psycopg.OperationalError as e:
            raise DependencyUnavailableError("postgres", str(e)) from e

    async def open(self) -> None:
        """Apply pending migrations (advisory-locked) or, with ``migrate=False``, check that none is pending;
        then open the connection pool."""
        if self._pool is not None:
            return
        if self.migrate_on_open:
            await self.migrate()
        else:
            await self._check_migrated()
        try:
            pool = AsyncConnectionPool(
                self._conninfo,
                min_size=self.pool_min,
                max_size=self.pool_max,
                timeout=self.pool_timeout_s,
                kwargs={"connect_timeout": max(1, int(self.connect_timeout_s))},
                configure=self._configure,
                open=False,
                name="cognis-postgres",
            )
            await pool.open(wait=True, timeout=self.pool_timeout_s)
        except (psycopg.OperationalError, PoolTimeout) as e:
            raise DependencyUnavailableError("postgres", str(e)) from e
        self._pool = pool

    async def _check_vector_space(self, conn: psycopg.AsyncConnection) -> None:
        """Record the configured vector space in ``store_settings`` (first open), or refuse another one."""
        select = "SELECT value FROM store_settings WHERE key = %s"
        row = await (await conn.execute(select, (VECTOR_SPACE_KEY,))).fetchone()
        if check_vector_space("the PostgreSQL store", row[0] if row else None, self.vector_space):
            await conn.execute(
                "INSERT INTO store_settings (key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING",
                (VECTOR_SPACE_KEY, self.vector_space),
            )
            row = await (await conn.execute(select, (VECTOR_SPACE_KEY,))).fetchone()  # a concurrent first open
            check_vector_space("the PostgreSQL store", row[0] if row else None, self.vector_space)

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()

    @property
    def pool(self) -> AsyncConnectionPool:
        if self._pool is None:
            raise RuntimeError("postgres store is not open")
        return self._pool

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A pooled connection (autocommit; use ``conn.transaction()``), errors mapped to DependencyUnavailableError."""
        try:
            async with self.pool.connection() as conn:
                yield conn
        except (psycopg.OperationalError, PoolTimeout) as e:
            raise DependencyUnavailableError("postgres", str(e)) from e

    async def health(self) -> dict[str, bool]:
        return {"postgres": await self.ping()}

    async def ping(self) -> bool:
        try:
            async with self.connection() as conn:
                await conn.execute("SELECT 1")
            return True
        except Exception:  # health reports, never raises
            return False

    # -- messages -------------------------------------------------------------------------------
    async def save_messages(self, messages: Sequence[Message]) -> list[tuple[Message, bool]]:
        out: list[tuple[Message, bool]] = []
        if not messages:
            return out
        async with self.connection() as conn, conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
            for msg in messages:
                await cur.execute(
                    _INSERT_MESSAGE + " ON CONFLICT (tenant_id, user_id, client_message_id) DO NOTHING RETURNING id",
                    row_values(message_to_row(msg, POSTGRES), MESSAGE_COLUMNS),
                )
                if await cur.fetchone() is not None:
                    out.append((msg, True))
                    continue
                await cur.execute(
                    "SELECT * FROM messages WHERE tenant_id = %s AND user_id = %s AND client_message_id = %s",
                    (msg.tenant_id, msg.user_id, msg.client_message_id),
                )
                row = await cur.fetchone()
                assert row is not None, "conflicting message vanished inside the transaction"
                out.append((message_from_row(row, POSTGRES), False))
        return out

    async def get_messages(self, owner: Owner, ids: Sequence[str]) -> list[Message]:
        if not ids:
            return []
        async with self.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                "SELECT * FROM messages WHERE tenant_id = %s AND user_id = %s AND id = ANY(%s) ORDER BY ts, id",
                (owner.tenant_id, owner.user_id, list(ids)),
            )
            return [message_from_row(r, POSTGRES) for r in await cur.fetchall()]

    # -- memories -------------------------------------------------------------------------------
    @staticmethod
    def _outbox_rows_for_insert(memories: Sequence[Memory]) -> list[tuple[Any, ...]]:
        return [("upsert", m.id, m.tenant_id, m.user_id, m.version) for m in memories if m.is_current]

    def _use_outbox(self, outbox: bool | None) -> bool:
        return self._outbox is not None if outbox is None else outbox

    async def _after_write(self, outbox: bool) -> None:
        if outbox and self._outbox is not None:
            await self._outbox.after_write()

    async def insert_memories(self, memories: Sequence[Memory], *, outbox: bool | None = None) -> None:
        """Insert new memories in one transaction; with the outbox (default: when a listener is
        attached) also their OpenSearch upserts."""
        if not memories:
            return
        outbox = self._use_outbox(outbox)
        params = [_memory_params(m) for m in memories]
        async with self.connection() as conn, conn.transaction(), conn.cursor() as cur:
            await cur.executemany(_INSERT_MEMORY, params)
            if outbox:
                rows = self._outbox_rows_for_insert(memories)
                if rows:
                    await cur.executemany(_INSERT_OUTBOX, rows)
        await self._after_write(outbox)

    async def write_version(self, owner: Owner, previous_id: str, new: Memory, *, outbox: bool | None = None) -> Memory:
        if (new.tenant_id, new.user_id) != (owner.tenant_id, owner.user_id):
            raise ValueError("new version must belong to the same owner")
        params = _memory_params(new)
        outbox = self._use_outbox(outbox)
        async with self.connection() as conn, conn.transaction(), conn.cursor() as cur:
            await cur.execute(
                "SELECT is_current, version FROM memories WHERE id = %s AND tenant_id = %s AND user_id = %s FOR UPDATE",
                (previous_id, owner.tenant_id, owner.user_id),
            )
            row = await cur.fetchone()
            if row is None:
                raise NotFoundError(f"memory {previous_id} not found")
            if not row[0]:
                raise ConflictError(f"memory {previous_id} is not the current version")
            await cur.execute("UPDATE memories SET is_current = false WHERE id = %s", (previous_id,))
            await cur.execute(_INSERT_MEMORY, params)
            if outbox:
                rows = [("delete", previous_id, owner.tenant_id, owner.user_id, row[1])]
                rows += self._outbox_rows_for_insert([new])
                await cur.executemany(_INSERT_OUTBOX, rows)
        await self._after_write(outbox)
        return new

    async def _select_memories(self, query: str, params: Sequence[Any]) -> list[Memory]:
        async with self.connection() as conn, conn.cursor(row_factory=dict_row, binary=True) as cur:
            await cur.execute(query, params)
            return [memory_from_row(r, POSTGRES) for r in await cur.fetchall()]

    async def get_memory(self, owner: Owner, memory_id: str) -> Memory | None:
        rows = await self._select_memories(
            f"SELECT {_COLS} FROM memories WHERE id = %s AND tenant_id = %s AND user_id = %s",
            (memory_id, owner.tenant_id, owner.user_id),
        )
        return rows[0] if rows else None

    async def get_chain(self, owner: Owner, memory_id: str) -> list[Memory]:
        params = {"id": memory_id, "t": owner.tenant_id, "u": owner.user_id}
        return await self._select_memories(_CHAIN_SQL, params)  # type: ignore[arg-type]

    async def fetch_memories(self, owner: Owner, ids: Sequence[str]) -> list[Memory]:
        if not ids:
            return []
        rows = await self._select_memories(
            f"SELECT {_COLS} FROM memories WHERE tenant_id = %s AND user_id = %s AND id = ANY(%s)",
            (owner.tenant_id, owner.user_id, list(ids)),
        )
        by_id = {m.id: m for m in rows}
        return [by_id[i] for i in ids if i in by_id]

    async def fetch_current_memories(self, owner: Owner, ids: Sequence[str]) -> list[Memory]:
        """Like :meth:`fetch_memories` but only rows that are current *now* (the dual store's hydration)."""
        if not ids:
            return []
        rows = await self._select_memories(
            f"SELECT {_COLS} FROM memories WHERE tenant_id = %s AND user_id = %s AND is_current AND id = ANY(%s)",
            (owner.tenant_id, owner.user_id, list(ids)),
        )
        by_id = {m.id: m for m in rows}
        return [by_id[i] for i in dict.fromkeys(ids) if i in by_id]

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
        owner = flt.owner
        extra, fparams = postgres_filter(flt)
        q_full = np.asarray(query, dtype=np.float32)
        timings: dict[str, float] = {}
        async with self.connection() as conn, conn.transaction(), conn.cursor(row_factory=dict_row, binary=True) as cur:
            if query_short is None:
                t1 = time.perf_counter()
                await cur.execute(
                    f"SELECT {_COLS_M}, 1 - (m.embedding <=> %s) AS score FROM memories m"
                    f" WHERE m.tenant_id = %s AND m.user_id = %s AND m.is_current{extra}"
                    " ORDER BY m.embedding <=> %s, m.id LIMIT %s",
                    (q_full, owner.tenant_id, owner.user_id, *fparams, q_full, limit),
                )
                rows = await cur.fetchall()
                timings["vector_full"] = (time.perf_counter() - t1) * 1000
                hits = [ScoredMemory(memory_from_row(r, POSTGRES), float(r["score"])) for r in rows]
                return VectorSearchResult(hits=hits, candidates_short=0, timings_ms=timings)

            t0 = time.perf_counter()
            shortlist = max(shortlist, limit)
            await cur.execute(
                "SELECT set_config('hnsw.ef_search', %s, true), set_config('hnsw.iterative_scan', %s, true)",
                (str(min(_MAX_EF_SEARCH, max(40, shortlist))), self.iterative_scan),
            )
            await cur.execute(
                "SELECT m.id FROM memories m"
                f" WHERE m.tenant_id = %s AND m.user_id = %s AND m.is_current{extra}"
                " ORDER BY m.embedding_short <=> %s LIMIT %s",
                (owner.tenant_id, owner.user_id, *fparams, np.asarray(query_short, dtype=np.float32), shortlist),
            )
            cand = [r["id"] for r in await cur.fetchall()]
            timings["vector_short"] = (time.perf_counter() - t0) * 1000
            t1 = time.perf_counter()
            rows = []
            if cand:
                await cur.execute(
                    f"SELECT {_COLS_M}, 1 - (m.embedding <=> %s) AS score FROM memories m"
                    " WHERE m.id = ANY(%s) AND m.tenant_id = %s AND m.user_id = %s AND m.is_current"
                    " ORDER BY m.embedding <=> %s, m.id LIMIT %s",
                    (q_full, cand, owner.tenant_id, owner.user_id, q_full, limit),
                )
                rows = await cur.fetchall()
            timings["vector_full"] = (time.perf_counter() - t1) * 1000
        hits = [ScoredMemory(memory_from_row(r, POSTGRES), float(r["score"])) for r in rows]
        return VectorSearchResult(hits=hits, candidates_short=len(cand), timings_ms=timings)

    async def list_memories(
        self, owner: Owner, *, include_history: bool = False, limit: int = 1000, after_id: str | None = None
    ) -> list[Memory]:
        current = "" if include_history else " AND is_current"
        return await self._select_memories(
            f"SELECT {_COLS} FROM memories WHERE tenant_id = %s AND user_id = %s AND id > %s{current}"
            " ORDER BY id LIMIT %s",
            (owner.tenant_id, owner.user_id, after_id or "", limit),
        )

    async def list_users(
        self, tenant_id: str, *, limit: int = 100, after_user_id: str | None = None
    ) -> list[UserSummary]:
        # Code point order ("C" collation), as SQLite and OpenSearch sort, whatever the database's collation.
        # A page aggregates the tenant's rows past the cursor (no index has that collation): an operator's
        # listing, not a request path.
        async with self.connection() as conn, conn.cursor() as cur:
            await cur.execute(
                "SELECT user_id, count(*) FILTER (WHERE is_current AND NOT deleted), max(created_at) FROM memories"
                ' WHERE tenant_id = %s AND user_id COLLATE "C" > %s'
                ' GROUP BY user_id ORDER BY user_id COLLATE "C" LIMIT %s',
                (tenant_id, after_user_id or "", limit),
            )
            return [UserSummary(u, int(n), last) for u, n, last in await cur.fetchall()]

    async def forget_user(self, owner: Owner) -> dict[str, int]:
        """Delete every row of the user in every table (memories, messages, jobs, outbox). With an
        outbox listener, the same transaction leaves one durable ``forget`` outbox item (so the
        OpenSearch side is completed later if it cannot be done now) and the listener runs it."""
        if self._outbox is None:
            counts, _ = await self._forget(owner, outbox=False)
            return counts
        counts, outbox_id = await self._forget(owner, outbox=True)
        assert outbox_id is not None
        counts.pop("outbox_pending", None)
        return counts | await self._outbox.after_forget(outbox_id)

    async def _forget(self, owner: Owner, *, outbox: bool) -> tuple[dict[str, int], int | None]:
        key = (owner.tenant_id, owner.user_id)
        outbox_id: int | None = None
        counts: dict[str, int] = {}
        async with self.connection() as conn, conn.transaction(), conn.cursor() as cur:
            for table in ("memories", "messages", "jobs", "outbox"):
                await cur.execute(
                    psql.SQL("DELETE FROM {} WHERE tenant_id = %s AND user_id = %s").format(psql.Identifier(table)), key
                )
                counts[table] = cur.rowcount
            if outbox:
                await cur.execute(
                    _INSERT_OUTBOX + " RETURNING id", ("forget", None, owner.tenant_id, owner.user_id, None)
                )
                row = await cur.fetchone()
                outbox_id = int(row[0]) if row else None
        counts["outbox_pending"] = counts.pop("outbox")
        return counts, outbox_id

    # -- bulk load (benchmarks, imports) ---------------------------------------------------------
    async def bulk_load(self, memories: Sequence[Memory], *, rebuild_index: bool = True) -> None:
        """Load many memories fast: drop the HNSW index, ``COPY`` the rows, rebuild the index.

        Meant for imports and benchmarks on a quiet database (searches fall back to exact scans
        while the index is missing); no outbox rows are written.
        """
        async with self.connection() as conn:
            await conn.execute("SET statement_timeout = 0")  # building HNSW over many rows takes minutes
            try:
                if rebuild_index:
                    await conn.execute("DROP INDEX IF EXISTS memories_short_hnsw")
                async with (
                    conn.transaction(),
                    conn.cursor() as cur,
                    cur.copy(f"COPY memories ({_COLS}) FROM STDIN (FORMAT BINARY)") as copy,
                ):
                    copy.set_types([_COPY_TYPES[c.kind] for c in MEMORY_RECORD])
                    for m in memories:
                        await copy.write_row(_memory_params(m))
                if rebuild_index:
                    await conn.execute("SET maintenance_work_mem = '512MB'")
                    await conn.execute(
                        "CREATE INDEX IF NOT EXISTS memories_short_hnsw ON memories USING hnsw"
                        " (embedding_short vector_cosine_ops) WITH (m = 16, ef_construction = 64) WHERE is_current"
                    )
                await conn.execute("ANALYZE memories")
            finally:
                await conn.execute("RESET maintenance_work_mem")
                await conn.execute(
                    "SELECT set_config('statement_timeout', %s, false)", (str(self.statement_timeout_ms),)
                )

    # -- outbox (dual store) ----------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def outbox_batch(self, limit: int, *, only_ids: Sequence[int] | None = None) -> AsyncIterator[OutboxBatch]:
        """Lock up to ``limit`` due outbox rows (oldest first, skipping rows other drains hold) for
        one transaction, with the current Postgres state of the memories they name."""
        async with self.connection() as conn, conn.transaction():
            async with conn.cursor(row_factory=dict_row) as cur:
                if only_ids is not None:
                    await cur.execute(
                        "SELECT * FROM outbox WHERE id = ANY(%s) ORDER BY id FOR UPDATE SKIP LOCKED", (list(only_ids),)
                    )
                else:
                    await cur.execute(
                        "SELECT * FROM outbox WHERE next_attempt_at <= now() ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED",
                        (limit,),
                    )
                items = [
                    OutboxItem(
                        id=r["id"], op=r["op"], memory_id=r["memory_id"], tenant_id=r["tenant_id"],
                        user_id=r["user_id"], version=r["version"], attempts=r["attempts"], created_at=r["created_at"],
                    )
                    for r in await cur.fetchall()
                ]  # fmt: skip
                ids = sorted({i.memory_id for i in items if i.memory_id})
                states: dict[str, Memory] = {}
                if ids:
                    await cur.execute(f"SELECT {_COLS_NO_VEC} FROM memories WHERE id = ANY(%s)", (ids,))
                    states = {r["id"]: memory_from_row(r, POSTGRES) for r in await cur.fetchall()}
            yield OutboxBatch(conn, items, states)

    async def outbox_size(self) -> int:
        """Rows waiting in the outbox (due or not)."""
        async with self.connection() as conn:
            cur = await conn.execute("SELECT count(*) FROM outbox")
            row = await cur.fetchone()
            return int(row[0]) if row else 0

    # -- reconcile support ------------------------------------------------------------------------
    async def iter_current_states(
        self, *, tenant_id: str | None = None, batch: int = 5000
    ) -> AsyncIterator[IndexState]:
        """Every current memory's (id, version, owner), streamed with a server-side cursor (operator path)."""
        where = " AND tenant_id = %s" if tenant_id is not None else ""
        params: tuple[Any, ...] = (tenant_id,) if tenant_id is not None else ()
        async with self.connection() as conn, conn.transaction(), conn.cursor(name="cognis_reconcile") as cur:
            cur.itersize = batch
            await cur.execute(f"SELECT id, version, tenant_id, user_id FROM memories WHERE is_current{where}", params)
            async for r in cur:
                yield IndexState(r[0], r[1], r[2], r[3])

    async def pending_outbox_memory_ids(self, *, tenant_id: str | None = None) -> set[str]:
        """Memory ids with outbox work still pending (reconcile does not count them as drift)."""
        where = " AND tenant_id = %s" if tenant_id is not None else ""
        async with self.connection() as conn:
            cur = await conn.execute(
                f"SELECT DISTINCT memory_id FROM outbox WHERE memory_id IS NOT NULL{where}",
                (tenant_id,) if tenant_id is not None else (),
            )
            return {r[0] for r in await cur.fetchall()}

    async def load_memories_unscoped(self, ids: Sequence[str]) -> list[Memory]:
        """Memories by id across owners, without vectors. Operator path (reconcile repair) only:
        request handling always goes through the owner-scoped methods."""
        if not ids:
            return []
        return await self._select_memories(f"SELECT {_COLS_NO_VEC} FROM memories WHERE id = ANY(%s)", (list(ids),))

    # -- jobs -------------------------------------------------------------------------------------
    async def _upsert_job(self, job: Job) -> None:
        async with self.connection() as conn:
            await conn.execute(_UPSERT_JOB, (*row_values(job_to_row(job, POSTGRES), JOB_COLUMNS), None))

    async def enqueue_job(self, job: Job) -> None:
        await self._upsert_job(job)

    async def save_job(self, job: Job) -> None:
        await self._upsert_job(job)

    async def claim_job(self, now: datetime, lease_s: float) -> Job | None:
        async with self.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                "UPDATE jobs SET status = 'running', attempts = attempts + 1, lease_until = %(lease)s,"
                " updated_at = %(now)s"
                " WHERE id = (SELECT id FROM jobs"
                "   WHERE (status IN ('queued', 'failed') AND next_attempt_at <= %(now)s)"
                "      OR (status = 'running' AND lease_until <= %(now)s)"
                "   ORDER BY next_attempt_at LIMIT 1 FOR UPDATE SKIP LOCKED)"
                " RETURNING *",
                {"now": now, "lease": now + timedelta(seconds=lease_s)},
            )
            row = await cur.fetchone()
            return job_from_row(row, POSTGRES) if row else None

    async def get_job(self, owner: Owner, job_id: str) -> Job | None:
        async with self.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                "SELECT * FROM jobs WHERE id = %s AND tenant_id = %s AND user_id = %s",
                (job_id, owner.tenant_id, owner.user_id),
            )
            row = await cur.fetchone()
            return job_from_row(row, POSTGRES) if row else None

    async def list_jobs(
        self, tenant_id: str, *, status: JobStatus | None = None, limit: int = 100, after_id: str | None = None
    ) -> list[Job]:
        where, params = "tenant_id = %s AND id > %s", [tenant_id, after_id or ""]
        if status is not None:
            where += " AND status = %s"
            params.append(status.value)
        async with self.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(f"SELECT * FROM jobs WHERE {where} ORDER BY id LIMIT %s", (*params, limit))
            return [job_from_row(r, POSTGRES) for r in await cur.fetchall()]

    # -- API keys ---------------------------------------------------------------------------------
    async def put_api_key(self, record: ApiKeyRecord) -> None:
        async with self.connection() as conn:
            await conn.execute(
                "INSERT INTO api_keys (key_hash, tenant_id, read_only, name) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (key_hash) DO UPDATE SET tenant_id = excluded.tenant_id,"
                " read_only = excluded.read_only, name = excluded.name",
                (record.key_hash, record.tenant_id, record.read_only, record.name),
            )

    async def get_api_key(self, key_hash: str) -> ApiKeyRecord | None:
        async with self.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                "SELECT key_hash, tenant_id, read_only, name FROM api_keys k WHERE key_hash = %s"
                " AND NOT EXISTS (SELECT 1 FROM api_key_revocations r WHERE r.key_hash = k.key_hash)",
                (key_hash,),
            )
            r = await cur.fetchone()
        if r is None:
            return None
        return ApiKeyRecord(key_hash=r["key_hash"], tenant_id=r["tenant_id"], read_only=r["read_only"], name=r["name"])

    async def revoke_api_key(self, key_hash: str) -> bool:
        async with self.connection() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO api_key_revocations (key_hash) VALUES (%s) ON CONFLICT (key_hash) DO NOTHING", (key_hash,)
            )
            cur = await conn.execute("DELETE FROM api_keys WHERE key_hash = %s", (key_hash,))
            return cur.rowcount > 0

    async def api_key_revoked(self, key_hash: str) -> bool:
        async with self.connection() as conn:
            cur = await conn.execute("SELECT 1 FROM api_key_revocations WHERE key_hash = %s", (key_hash,))
            return await cur.fetchone() is not None
