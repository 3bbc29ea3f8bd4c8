"""The embedded default store: one SQLite file, no server.

* WAL mode; one writer connection and one reader connection, each behind its own lock,
  used from worker threads (``asyncio.to_thread``), so the store is safe for one process
  with many threads and survives restarts.
* The schema is the ordered migrations of :mod:`.migrations.sqlite`, applied on open (each once,
  in its own ``BEGIN IMMEDIATE`` transaction, recorded in ``schema_version``).
* BM25 through an FTS5 table that holds *current* memories only. Each row also carries an
  opaque owner token (a hash of tenant and user) in an indexed column, and every keyword
  query requires that token, so the tenant/user filter is applied inside the FTS query.
  User text reaches FTS5 only as double-quoted terms, so no FTS5 syntax can be injected.
* Vectors are float32 blobs in the memories table, searched with numpy through a per-user
  in-memory index (:mod:`.numpy_index`) that is loaded by a query selecting the owner's current
  rows and kept in step with every write; from ``ann_min_rows`` rows on, an approximate prefix
  index (:mod:`.ann_index`, faiss HNSW built in the background) shortlists instead of the exact scan.
* Users with ``keyword_index_min_rows`` current memories or more get an in-memory BM25 index
  (:mod:`.keyword_index`) that answers unfiltered keyword searches with FTS5's own scores and
  order, touching only the query terms' postings; smaller users, and filtered searches, ask FTS5.
  The index is built in a background thread on the user's first keyword search (FTS5 answers
  until it is there, with the same answers), so the first search after a start is not held up.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sqlite3
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Settings
from ..domain import Category, Job, JobStatus, Memory, MemoryKind, Message, Owner, Scope
from ..errors import ConflictError, NotFoundError
from .ann_index import build_prefix_ann
from .filters import owner_token, sqlite_filter
from .keyword_index import FtsStatistics, FtsTokenizer, UserKeywordIndex, idf
from .migrations.sqlite import FTS_TOKENIZE, apply_migrations
from .numpy_index import IndexedRow, UserVectorIndex, category_code, kind_code, scope_code
from .owner_cache import OwnerCache
from .records import (
    JOB_COLUMNS,
    MEMORY_COLUMNS,
    MESSAGE_COLUMNS,
    SQLITE,
    SQLITE_WITHOUT_VECTORS,
    insert_statement,
    job_from_row,
    job_to_row,
    memory_from_row,
    memory_to_row,
    message_from_row,
    message_to_row,
    row_values,
)
from .roles import StoreBundle
from .values import ApiKeyRecord, ScoredMemory, SearchFilter, UserSummary, VectorSearchResult
from .vector_space import KEY as VECTOR_SPACE_KEY
from .vector_space import check as check_vector_space
from .version_chain import SQLITE_PARAM, chain_query

log = logging.getLogger(__name__)

#: Rows read per step when a user's vector or keyword index is loaded. Small steps keep the short-lived
#: buffers of a step (the rows' blobs and tuples: about 4 MB at 2,048 rows) from fragmenting the heap:
#: at 16,384 rows (about 33 MB a step) 35-40 MiB per 100k memories stayed resident after the load, even
#: after a heap trim (docs/benchmarks.md, "Search cost at scale", round 4).
_LOAD_CHUNK = 2048
#: how much lower the priority of a background index build is than the process's (a nice increment)
BACKGROUND_NICE = 10
_SCOPE_CODES = {s.value: scope_code(s) for s in Scope}
_CATEGORY_CODES = {c.value: category_code(c) for c in Category}
_KIND_CODES = {k.value: kind_code(k) for k in MemoryKind}

_MEMORY_COLUMNS = ", ".join(MEMORY_COLUMNS)
_CHAIN_SQL = chain_query(_MEMORY_COLUMNS, SQLITE_PARAM)
_INSERT_MEMORY = insert_statement("memories", MEMORY_COLUMNS, "?")
_INSERT_MESSAGE = insert_statement("messages", MESSAGE_COLUMNS, "?")
#: a job is written whole, with the queue's own lease column (a claim sets it)
_UPSERT_JOB = (
    insert_statement("jobs", (*JOB_COLUMNS, "lease_until"), "?")
    + " ON CONFLICT(id) DO UPDATE SET status = excluded.status, attempts = excluded.attempts,"
    " last_error = excluded.last_error, next_attempt_at = excluded.next_attempt_at,"
    " lease_until = excluded.lease_until, updated_at = excluded.updated_at, result = excluded.result"
)
_COLUMNS_WITHOUT_VECTORS = ", ".join(c for c in MEMORY_COLUMNS if c not in ("embedding", "embedding_short"))
_WORD = re.compile(r"\w+", re.UNICODE)
#: Words too common to help BM25 that would make an OR query match most of a user's rows.
STOP_WORDS = frozenset(
    "a an and are as at be been but by did do does for from had has have he her his how i if in into is it its "
    "me my of on or our she so than that the their them then there these they this to was we were what when "
    "where which who whom why will with would you your".split()
)


#: How long a connection waits for another one's lock (the busy timeout), seconds.
BUSY_TIMEOUT_S = 30.0


def connect(path: Path | str, *, busy_timeout_s: float = BUSY_TIMEOUT_S) -> sqlite3.Connection:
    """A connection to the store's file as the store uses it: autocommit, WAL, a busy timeout.

    Switching a new database to WAL takes the file's exclusive lock, and SQLite answers ``database is
    locked`` at once when another connection holds it (the busy timeout does not cover that pragma):
    several processes opening one new store at the same moment failed that way (6 openers, 300
    trials: 44 failures). The switch is retried until the busy timeout."""
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=busy_timeout_s)
    deadline = time.monotonic() + busy_timeout_s
    delay = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            break
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + delay > deadline:
                conn.close()
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.1)
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
    return conn


def fts_query_terms(text: str, limit: int = 32) -> list[str]:
    """Plain words of ``text`` for a keyword query: lower-cased, stop words dropped, de-duplicated."""
    seen: dict[str, None] = {}
    for w in _WORD.findall(text.lower()):
        if w not in STOP_WORDS and w not in seen:
            seen[w] = None
    terms = list(seen)
    if not terms:  # a query made only of stop words still deserves an answer
        terms = list(dict.fromkeys(_WORD.findall(text.lower())))
    return terms[:limit]


@dataclass(slots=True)
class _SmallUser:
    """A user with fewer current memories than ``keyword_index_min_rows``: FTS5 answers their keyword searches."""

    rows: int

    @property
    def n(self) -> int:
        return 0


class EmbeddedStore:
    """SQLite + FTS5 + numpy store: supplies every role of :mod:`cognis_memory.stores.roles` itself.

    ``keyword_index_min_rows``: current memories from which a user's unfiltered keyword searches use the
    in-memory BM25 index (0: never). ``ann_min_rows``: current memories from which a user's unfiltered
    vector searches shortlist with the approximate prefix index (0: never). ``max_cached_rows``: rows
    held in memory by each kind of per-user index, over all users (least recently used users are
    dropped). ``ann_threads``: threads that build an approximate index (default: every core).
    """

    name = "embedded"

    def roles(self) -> StoreBundle:
        return StoreBundle.of(self)

    def __init__(
        self,
        path: str | Path,
        *,
        dim: int,
        dim_short: int,
        max_cached_rows: int = 2_000_000,
        vector_space: str | None = None,
        keyword_index_min_rows: int = 10_000,
        ann_min_rows: int = 200_000,
        ann_threads: int | None = None,
    ) -> None:
        self.path = Path(path)
        self.dim, self.dim_short = dim, dim_short
        #: the embedding model's vector space, recorded on first open and checked after (None: no check)
        self.vector_space = vector_space
        self._writer: sqlite3.Connection | None = None
        self._reader: sqlite3.Connection | None = None
        self._wlock = threading.RLock()
        self._rlock = threading.Lock()
        self.keyword_index_min_rows, self.ann_min_rows = keyword_index_min_rows, ann_min_rows
        self.ann_threads = ann_threads or os.cpu_count() or 1
        self._vectors: OwnerCache[UserVectorIndex] = OwnerCache(lambda i: i.n, max_rows=max_cached_rows)
        self._keywords: OwnerCache[UserKeywordIndex | _SmallUser] = OwnerCache(lambda i: i.n, max_rows=max_cached_rows)
        self._tokenizer = FtsTokenizer(FTS_TOKENIZE)
        self._fts_stats = FtsStatistics("memories_fts")
        self._ann_available = True
        #: background index builds under way: keyword indexes by owner, and every build thread (ANN too)
        self._keyword_builds: set[Owner] = set()
        self._build_threads: list[threading.Thread] = []
        self._closed = False

    # -- lifecycle ----------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        conn = connect(self.path)
        conn.row_factory = sqlite3.Row
        return conn

    def _open_sync(self) -> None:
        if self.path.parent and str(self.path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = self._connect()
        try:
            apply_migrations(self._writer, where=f"the store at {self.path}")
            self._check_dims()
            self._check_vector_space()
        except BaseException:
            self._writer.close()
            self._writer = None
            raise
        self._reader = self._connect()

    def _check_vector_space(self) -> None:
        assert self._writer is not None
        row = self._writer.execute("SELECT value FROM store_settings WHERE key = ?", (VECTOR_SPACE_KEY,)).fetchone()
        if check_vector_space(f"the store at {self.path}", row[0] if row else None, self.vector_space):
            self._writer.execute(
                "INSERT OR IGNORE INTO store_settings(key, value) VALUES (?, ?)", (VECTOR_SPACE_KEY, self.vector_space)
            )

    def _check_dims(self) -> None:
        assert self._writer is not None
        row = self._writer.execute(
            "SELECT length(embedding), length(embedding_short) FROM memories WHERE embedding IS NOT NULL LIMIT 1"
        ).fetchone()
        if row and (row[0] != self.dim * 4 or row[1] != self.dim_short * 4):
            raise ValueError(
                f"embedding sizes: the store at {self.path} holds {row[0] // 4}/{row[1] // 4}-d vectors but the "
                f"service is configured for {self.dim}/{self.dim_short}; use another data_dir or re-import"
            )

    async def open(self) -> None:
        self._closed = False
        await asyncio.to_thread(self._open_sync)

    def _background(self, target: Any, name: str) -> None:
        def run() -> None:
            # background work yields the CPU to searches: the thread runs at a lower priority (Linux
            # schedules threads one by one; elsewhere this is skipped)
            try:
                os.setpriority(
                    os.PRIO_PROCESS,
                    threading.get_native_id(),
                    min(os.getpriority(os.PRIO_PROCESS, 0) + BACKGROUND_NICE, 19),
                )
            except (AttributeError, OSError):
                pass
            target()

        t = threading.Thread(target=run, name=name, daemon=True)
        with self._keywords.lock:
            self._build_threads = [b for b in self._build_threads if b.is_alive()]
            self._build_threads.append(t)
        t.start()

    def join_index_builds(self, timeout_s: float | None = None) -> bool:
        """Wait for the background index builds under way (keyword indexes, approximate prefix indexes);
        True when none is left running. For benchmarks and tests: searches never need to wait."""
        with self._keywords.lock:
            threads = list(self._build_threads)
        for t in threads:
            t.join(timeout_s)
        return not any(t.is_alive() for t in threads)

    async def close(self) -> None:
        self._closed = True

        def _close() -> None:
            with self._wlock, self._rlock:
                for conn in (self._writer, self._reader):
                    if conn is not None:
                        conn.close()
                self._writer = self._reader = None
            # Not under the reader lock: a search loading an index holds the index lock and then
            # takes the reader lock, so clearing inside it deadlocked a close racing a first search.
            self._vectors.clear()
            self._keywords.clear()
            self._fts_stats.forget_connections()

        await asyncio.to_thread(_close)

    async def health(self) -> dict[str, bool]:
        def _ping() -> bool:
            try:
                with self._rlock:
                    assert self._reader is not None
                    self._reader.execute("SELECT 1").fetchone()
                return True
            except Exception:
                return False

        return {"sqlite": await asyncio.to_thread(_ping)}

    # -- helpers ------------------------------------------------------------------------
    def _read(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[sqlite3.Row]:
        with self._rlock:
            assert self._reader is not None, "store is not open"
            return self._reader.execute(sql, params).fetchall()

    def _tx(self):
        """Context manager: an immediate write transaction on the writer connection."""
        store = self

        class _Tx:
            def __enter__(self_inner) -> sqlite3.Connection:
                store._wlock.acquire()
                assert store._writer is not None, "store is not open"
                store._writer.execute("BEGIN IMMEDIATE")
                return store._writer

            def __exit__(self_inner, exc_type, exc, tb) -> None:
                try:
                    assert store._writer is not None
                    store._writer.execute("ROLLBACK" if exc_type else "COMMIT")
                finally:
                    store._wlock.release()

        return _Tx()

    def _insert_memory(self, conn: sqlite3.Connection, m: Memory) -> tuple[int, int | None]:
        """Insert one memory row (and its FTS row when current); its rowid, and the FTS rowid if any."""
        row = conn.execute(_INSERT_MEMORY, row_values(memory_to_row(m, SQLITE), MEMORY_COLUMNS))
        assert row.lastrowid is not None
        if not m.is_current:
            return row.lastrowid, None
        fts = conn.execute(
            "INSERT INTO memories_fts (owner, content, memory_id) VALUES (?, ?, ?)",
            (owner_token(Owner(m.tenant_id, m.user_id)), m.content, m.id),
        )
        return row.lastrowid, fts.lastrowid

    def _index_add(self, memories: Sequence[Memory], rowids: Sequence[tuple[int, int | None]]) -> None:
        """Bring the loaded per-user indexes up to date with new current memories (call after the commit);
        ``rowids``: each memory's rowid and FTS rowid (:meth:`_insert_memory`)."""
        self._fts_stats.changed()
        by_owner: dict[Owner, list[tuple[Memory, int, int | None]]] = {}
        for m, (rowid, fts_rowid) in zip(memories, rowids, strict=True):
            if m.is_current:
                by_owner.setdefault(Owner(m.tenant_id, m.user_id), []).append((m, rowid, fts_rowid))
        with self._vectors.lock, self._keywords.lock:
            for owner, added in by_owner.items():
                idx = self._vectors.peek(owner)
                if idx is not None:  # not loaded yet: the loader will read it from SQLite
                    idx.add([IndexedRow.from_memory(m, rowid) for m, rowid, _ in added])
                self._vectors.written(owner)
                kw = self._keywords.peek(owner)
                if isinstance(kw, UserKeywordIndex):
                    kw.add([(m.id, fts_rowid, m.content) for m, _, fts_rowid in added if fts_rowid is not None])
                elif isinstance(kw, _SmallUser):
                    kw.rows += len(added)
                    if kw.rows >= self.keyword_index_min_rows:
                        self._keywords.drop(owner)  # large enough now: indexed on its next search
                self._keywords.written(owner)

    def _index_remove(self, owner: Owner, memory_id: str) -> None:
        self._fts_stats.changed()
        with self._vectors.lock, self._keywords.lock:
            idx = self._vectors.peek(owner)
            if idx is not None:
                idx.remove(memory_id)
            self._vectors.written(owner)
            kw = self._keywords.peek(owner)
            if isinstance(kw, UserKeywordIndex):
                kw.remove(memory_id)
            elif isinstance(kw, _SmallUser):
                kw.rows -= 1
            self._keywords.written(owner)

    # -- messages -----------------------------------------------------------------------
    def _save_messages(self, messages: Sequence[Message]) -> list[tuple[Message, bool]]:
        out: list[tuple[Message, bool]] = []
        with self._tx() as conn:
            for msg in messages:
                if msg.client_message_id is not None:
                    row = conn.execute(
                        "SELECT * FROM messages WHERE tenant_id = ? AND user_id = ? AND client_message_id = ?",
                        (msg.tenant_id, msg.user_id, msg.client_message_id),
                    ).fetchone()
                    if row is not None:
                        out.append((message_from_row(row, SQLITE), False))
                        continue
                conn.execute(_INSERT_MESSAGE, row_values(message_to_row(msg, SQLITE), MESSAGE_COLUMNS))
                out.append((msg, True))
        return out

    async def save_messages(self, messages: Sequence[Message]) -> list[tuple[Message, bool]]:
        return await asyncio.to_thread(self._save_messages, messages)

    async def get_messages(self, owner: Owner, ids: Sequence[str]) -> list[Message]:
        if not ids:
            return []
        q = ",".join("?" * len(ids))
        rows = await asyncio.to_thread(
            self._read,
            f"SELECT * FROM messages WHERE tenant_id = ? AND user_id = ? AND id IN ({q}) ORDER BY ts, id",
            (owner.tenant_id, owner.user_id, *ids),
        )
        return [message_from_row(r, SQLITE) for r in rows]

    # -- memories -----------------------------------------------------------------------
    def _insert_memories(self, memories: Sequence[Memory]) -> None:
        with self._tx() as conn:
            rowids = [self._insert_memory(conn, m) for m in memories]
        self._index_add(memories, rowids)

    async def insert_memories(self, memories: Sequence[Memory]) -> None:
        if memories:
            await asyncio.to_thread(self._insert_memories, list(memories))

    def _write_version(self, owner: Owner, previous_id: str, new: Memory) -> Memory:
        if (new.tenant_id, new.user_id) != (owner.tenant_id, owner.user_id):
            raise ValueError("new version must belong to the same owner")
        with self._tx() as conn:
            row = conn.execute(
                "SELECT is_current FROM memories WHERE id = ? AND tenant_id = ? AND user_id = ?",
                (previous_id, owner.tenant_id, owner.user_id),
            ).fetchone()
            if row is None:
                raise NotFoundError(f"memory {previous_id} not found")
            if not row["is_current"]:
                raise ConflictError(f"memory {previous_id} is not the current version")
            conn.execute(
                "UPDATE memories SET is_current = 0 WHERE id = ? AND tenant_id = ? AND user_id = ?",
                (previous_id, owner.tenant_id, owner.user_id),
            )
            conn.execute("DELETE FROM memories_fts WHERE memory_id = ?", (previous_id,))
            rowids = self._insert_memory(conn, new)
        with self._vectors.lock, self._keywords.lock:
            self._index_remove(owner, previous_id)
            self._index_add([new], [rowids])
        return new

    async def write_version(self, owner: Owner, previous_id: str, new: Memory) -> Memory:
        return await asyncio.to_thread(self._write_version, owner, previous_id, new)

    async def get_memory(self, owner: Owner, memory_id: str) -> Memory | None:
        rows = await asyncio.to_thread(
            self._read,
            f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE id = ? AND tenant_id = ? AND user_id = ?",
            (memory_id, owner.tenant_id, owner.user_id),
        )
        return memory_from_row(rows[0], SQLITE) if rows else None

    def _get_chain(self, owner: Owner, memory_id: str) -> list[Memory]:
        params = {"id": memory_id, "t": owner.tenant_id, "u": owner.user_id}
        return [memory_from_row(r, SQLITE) for r in self._read(_CHAIN_SQL, params)]

    async def get_chain(self, owner: Owner, memory_id: str) -> list[Memory]:
        return await asyncio.to_thread(self._get_chain, owner, memory_id)

    def _fetch(self, owner: Owner, ids: Sequence[str], *, vectors_from: UserVectorIndex | None = None) -> list[Memory]:
        """Memories by id, in the order of ``ids``. With ``vectors_from`` (the owner's loaded vector index: the
        hits of a search) the rows it holds are read by their rowids and their vectors come from its matrices
        instead of the rows' blobs (the same values up to float32 rounding in the prefix); a row the index no
        longer holds is read whole, by id."""
        if not ids:
            return []
        by_id = self._fetch_indexed(owner, ids, vectors_from) if vectors_from is not None else {}
        if missing := [i for i in ids if i not in by_id]:
            q = ",".join("?" * len(missing))
            rows = self._read(
                f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE tenant_id = ? AND user_id = ? AND id IN ({q})",
                (owner.tenant_id, owner.user_id, *missing),
            )
            by_id.update((r["id"], memory_from_row(r, SQLITE)) for r in rows)
        return [by_id[i] for i in ids if i in by_id]

    def _fetch_indexed(self, owner: Owner, ids: Sequence[str], idx: UserVectorIndex) -> dict[str, Memory]:
        """The memories of ``ids`` that ``idx`` holds with a known rowid, read by rowid (one B-tree lookup a
        row instead of two by id: the hits of a search), each checked to be the memory and the owner asked
        for; their vectors from the index."""
        with self._vectors.lock:
            held = [(i, row) for i in ids if (row := idx.row_of.get(i)) is not None and idx.rowid[row] >= 0]
            if not held:
                return {}
            at = np.fromiter((row for _, row in held), dtype=np.int64, count=len(held))
            rowids, full, short = idx.rowid[at], idx.full_vectors(at), idx.short[at]
        position = {int(rowid): j for j, rowid in enumerate(rowids)}
        rows = self._read(
            f"SELECT rowid AS row_id, {_COLUMNS_WITHOUT_VECTORS} FROM memories WHERE rowid IN"
            f" ({','.join('?' * len(position))})",
            list(position),
        )
        out: dict[str, Memory] = {}
        for r in rows:
            j = position[r["row_id"]]
            if r["id"] != held[j][0] or r["tenant_id"] != owner.tenant_id or r["user_id"] != owner.user_id:
                continue  # not the row the index knew (removed meanwhile): read by id
            m = memory_from_row(r, SQLITE_WITHOUT_VECTORS)
            m.embedding, m.embedding_short = full[j], short[j]
            out[m.id] = m
        return out

    async def fetch_memories(self, owner: Owner, ids: Sequence[str]) -> list[Memory]:
        return await asyncio.to_thread(self._fetch, owner, list(ids))

    def _load_index_rows(self, owner: Owner) -> UserVectorIndex:
        """The owner's current memories as a vector index, read in chunks straight into its matrices."""
        params = (owner.tenant_id, owner.user_id)
        with self._rlock:
            assert self._reader is not None, "store is not open"
            count = self._reader.execute(
                "SELECT count(*) FROM memories WHERE is_current = 1 AND tenant_id = ? AND user_id = ?", params
            ).fetchone()[0]
            idx = UserVectorIndex(self.dim, self.dim_short, capacity=max(int(count), 64))
            cur = self._reader.execute(
                "SELECT id, scope, category, kind, session_id, agent_id, event_time, message_time, embedding,"
                " embedding_short, rowid FROM memories WHERE tenant_id = ? AND user_id = ? AND is_current = 1",
                params,
            )
            while rows := cur.fetchmany(_LOAD_CHUNK):
                k = len(rows)
                idx.append_block(
                    [sys.intern(r[0]) for r in rows],  # one string per id, shared with the keyword index
                    np.frombuffer(b"".join(r[8] for r in rows), dtype=np.float32).reshape(k, self.dim),
                    np.frombuffer(b"".join(r[9] for r in rows), dtype=np.float32).reshape(k, self.dim_short),
                    np.fromiter((_SCOPE_CODES[r[1]] for r in rows), dtype=np.int8, count=k),
                    np.fromiter((_CATEGORY_CODES[r[2]] for r in rows), dtype=np.int8, count=k),
                    np.fromiter((_KIND_CODES[r[3]] for r in rows), dtype=np.int8, count=k),
                    np.array(
                        [r[6] if r[6] is not None else r[7] if r[7] is not None else np.nan for r in rows],
                        dtype=np.float64,
                    ),
                    [r[4] if r[4] is None else sys.intern(r[4]) for r in rows],  # a session's rows share one string
                    [r[5] if r[5] is None else sys.intern(r[5]) for r in rows],
                    np.fromiter((r[10] for r in rows), dtype=np.int64, count=k),
                )
        return idx

    def _start_ann(self, owner: Owner, idx: UserVectorIndex) -> None:
        """Build the approximate prefix index of a large user in the background (the exact scan answers
        meanwhile), then attach it, replaying the writes made during the build."""
        with self._vectors.lock:
            if (idx.ann is not None and not idx.ann.stale) or idx.ann_pending is not None or not self._ann_available:
                return
            keys, vectors = idx.snapshot_for_ann()

        def build() -> None:
            ann = None
            try:
                ann = build_prefix_ann(keys, vectors, threads=self.ann_threads)
            finally:
                with self._vectors.lock:
                    if ann is None:
                        self._ann_available = False
                        idx.ann_pending = None
                    elif self._vectors.peek(owner) is idx:
                        idx.attach_ann(ann)
                    else:
                        idx.ann_pending = None  # dropped meanwhile; its reload builds again

        self._background(build, "cognis-ann-build")

    def _vector_search(
        self, flt: SearchFilter, query: np.ndarray, query_short: np.ndarray | None, limit: int, shortlist: int
    ) -> VectorSearchResult:
        owner = flt.owner
        idx = self._vectors.get(owner, lambda: self._load_index_rows(owner))
        if self.ann_min_rows and idx.n >= self.ann_min_rows and (idx.ann is None or idx.ann.stale):
            self._start_ann(owner, idx)
        with self._vectors.lock:
            pairs, n_short, timings = idx.search(flt, query, query_short, limit, shortlist)
        if not pairs:
            return VectorSearchResult(hits=[], candidates_short=n_short, timings_ms=timings)
        memories = {m.id: m for m in self._fetch(owner, [p[0] for p in pairs], vectors_from=idx)}
        hits = [ScoredMemory(memories[i], s) for i, s in pairs if i in memories and memories[i].is_current]
        return VectorSearchResult(hits=hits, candidates_short=n_short, timings_ms=timings)

    async def vector_search(
        self,
        flt: SearchFilter,
        query: np.ndarray,
        query_short: np.ndarray | None,
        *,
        limit: int,
        shortlist: int,
    ) -> VectorSearchResult:
        return await asyncio.to_thread(self._vector_search, flt, query, query_short, limit, shortlist)

    def _load_keyword_index(self, owner: Owner) -> UserKeywordIndex | _SmallUser:
        """The owner's keyword index, or a note that the owner is too small for one (FTS5 is cheap there).
        Read through a connection of its own: a build runs beside searches, and a statement left open
        on the shared reader would hold every search on the snapshot of its start."""
        if self._closed or self._reader is None:
            raise RuntimeError("store is not open")
        conn = self._connect()
        try:
            rows = conn.execute(
                "SELECT count(*) FROM memories WHERE is_current = 1 AND tenant_id = ? AND user_id = ?",
                (owner.tenant_id, owner.user_id),
            ).fetchone()[0]
            if rows < self.keyword_index_min_rows:
                return _SmallUser(int(rows))
            idx = UserKeywordIndex(self._tokenizer)
            cur = conn.execute(
                "SELECT rowid, memory_id, content FROM memories_fts WHERE memories_fts MATCH ? ORDER BY rowid",
                (f'owner : "{owner_token(owner)}"',),
            )
            # in chunks: the texts of a step are freed before the next one is read
            while rows := cur.fetchmany(_LOAD_CHUNK):
                idx.add([(r[1], int(r[0]), r[2]) for r in rows])
                del rows
        finally:
            conn.close()
        idx.compact()
        return idx

    def _start_keyword_build(self, owner: Owner) -> None:
        """Build a large owner's keyword index in a background thread; FTS5 answers the owner's keyword
        searches meanwhile (the same answers). A write that lands during the build makes the cache
        load it again (:meth:`OwnerCache.get`)."""
        with self._keywords.lock:
            if owner in self._keyword_builds:
                return
            self._keyword_builds.add(owner)

        def build() -> None:
            try:
                self._keywords.get(owner, lambda: self._load_keyword_index(owner))
                if self._closed:
                    self._keywords.drop(owner)
            except Exception:
                if not self._closed:  # a store closed under the build is not an error
                    log.exception("building the keyword index of a user failed; FTS5 answers its searches")
            finally:
                with self._keywords.lock:
                    self._keyword_builds.discard(owner)

        self._background(build, "cognis-keyword-build")

    def _keyword_index(self, owner: Owner) -> UserKeywordIndex | _SmallUser | None:
        """The owner's loaded keyword index (or its small-user note); None while a large owner's index
        is built in the background."""
        idx = self._keywords.loaded(owner)
        if idx is not None:
            return idx
        with self._keywords.lock:
            if owner in self._keyword_builds:
                return None
        rows = self._read(
            "SELECT count(*) FROM memories WHERE is_current = 1 AND tenant_id = ? AND user_id = ?",
            (owner.tenant_id, owner.user_id),
        )[0][0]
        if rows >= self.keyword_index_min_rows:
            self._start_keyword_build(owner)
            return None
        # a write between the count and this entry leaves the count a little short: the threshold is
        # then crossed a few writes late, which changes no answer
        return self._keywords.get(owner, lambda: _SmallUser(int(rows)))

    def _indexed_keyword_search(self, owner: Owner, terms: list[str], limit: int) -> list[ScoredMemory] | None:
        """An unfiltered keyword search through the owner's in-memory index; None when FTS5 must answer
        (a small user, a large user whose index is still being built, or a query word that FTS5 reads
        as a phrase)."""
        if not self.keyword_index_min_rows:
            return None
        idx = self._keyword_index(owner)
        if not isinstance(idx, UserKeywordIndex):
            return None
        tokens = self._tokenizer.single_tokens(terms)
        if tokens is None:
            return None
        with self._rlock:
            assert self._reader is not None, "store is not open"
            totals = self._fts_stats.totals(self._reader)
            df = self._fts_stats.doc_freq(self._reader, tokens)
        if totals.rows == 0:
            return []
        idfs = [idf(totals.rows, df[t]) for t in tokens]
        with self._keywords.lock:
            pairs = idx.search(tokens, idfs, totals.tokens / totals.rows, limit)
        if not pairs:
            return []
        memories = {m.id: m for m in self._fetch(owner, [p[0] for p in pairs], vectors_from=self._vectors.peek(owner))}
        return [ScoredMemory(memories[i], s) for i, s in pairs if i in memories and memories[i].is_current]

    def _keyword_search(self, flt: SearchFilter, text: str, limit: int) -> list[ScoredMemory]:
        terms = fts_query_terms(text)
        if not terms:
            return []
        owner = flt.owner
        match = f'owner : "{owner_token(owner)}" AND content : ({" OR ".join(_quote(t) for t in terms)})'
        extra, params = sqlite_filter(flt)
        if not extra and (indexed := self._indexed_keyword_search(owner, terms, limit)) is not None:
            return indexed
        columns = ", ".join("m." + c.strip() for c in _MEMORY_COLUMNS.split(","))
        if not extra:
            # Rank inside FTS first and read only the top rows: joining before the ORDER BY made SQLite
            # read every matching memories row (vector blobs included) before sorting. The FTS table
            # holds current rows only and the owner token confines it to this user; the join keeps
            # the owner and current checks all the same.
            sql = f"""
            WITH hits AS (
                SELECT memory_id, bm25(memories_fts, 0.0, 1.0) AS rank FROM memories_fts
                WHERE memories_fts MATCH ? ORDER BY rank LIMIT ?
            )
            SELECT {columns}, hits.rank AS rank FROM hits JOIN memories m ON m.id = hits.memory_id
            WHERE m.tenant_id = ? AND m.user_id = ? AND m.is_current = 1
            ORDER BY hits.rank
            """
            rows = self._read(sql, (match, limit, owner.tenant_id, owner.user_id))
            return [ScoredMemory(memory_from_row(r, SQLITE), -float(r["rank"])) for r in rows]
        sql = f"""
        SELECT {columns}, bm25(memories_fts, 0.0, 1.0) AS rank
        FROM memories_fts f JOIN memories m ON m.id = f.memory_id
        WHERE memories_fts MATCH ? AND m.tenant_id = ? AND m.user_id = ? AND m.is_current = 1{extra}
        ORDER BY rank LIMIT ?
        """
        rows = self._read(sql, (match, owner.tenant_id, owner.user_id, *params, limit))
        return [ScoredMemory(memory_from_row(r, SQLITE), -float(r["rank"])) for r in rows]

    async def keyword_search(self, flt: SearchFilter, text: str, *, limit: int) -> list[ScoredMemory]:
        return await asyncio.to_thread(self._keyword_search, flt, text, limit)

    async def list_memories(
        self, owner: Owner, *, include_history: bool = False, limit: int = 1000, after_id: str | None = None
    ) -> list[Memory]:
        current = "" if include_history else " AND is_current = 1"
        rows = await asyncio.to_thread(
            self._read,
            f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE tenant_id = ? AND user_id = ? AND id > ?{current}"
            " ORDER BY id LIMIT ?",
            (owner.tenant_id, owner.user_id, after_id or "", limit),
        )
        return [memory_from_row(r, SQLITE) for r in rows]

    async def list_users(
        self, tenant_id: str, *, limit: int = 100, after_user_id: str | None = None
    ) -> list[UserSummary]:
        rows = await asyncio.to_thread(
            self._read,
            "SELECT user_id, SUM(is_current = 1 AND deleted = 0) AS current, MAX(created_at) AS last FROM memories"
            " WHERE tenant_id = ? AND user_id > ? GROUP BY user_id ORDER BY user_id LIMIT ?",
            (tenant_id, after_user_id or "", limit),
        )
        return [UserSummary(r["user_id"], int(r["current"]), SQLITE.time(r["last"])) for r in rows]  # type: ignore[arg-type]

    def _forget_user(self, owner: Owner) -> dict[str, int]:
        with self._tx() as conn:
            fts = conn.execute("DELETE FROM memories_fts WHERE owner = ?", (owner_token(owner),)).rowcount
            counts = {
                "memories": conn.execute(
                    "DELETE FROM memories WHERE tenant_id = ? AND user_id = ?", (owner.tenant_id, owner.user_id)
                ).rowcount,
                "messages": conn.execute(
                    "DELETE FROM messages WHERE tenant_id = ? AND user_id = ?", (owner.tenant_id, owner.user_id)
                ).rowcount,
                "jobs": conn.execute(
                    "DELETE FROM jobs WHERE tenant_id = ? AND user_id = ?", (owner.tenant_id, owner.user_id)
                ).rowcount,
                "index_documents": fts,
            }
        self._fts_stats.changed()
        self._vectors.drop(owner)
        self._keywords.drop(owner)
        return counts

    async def forget_user(self, owner: Owner) -> dict[str, int]:
        return await asyncio.to_thread(self._forget_user, owner)

    # -- jobs ---------------------------------------------------------------------------
    def _upsert_job(self, job: Job, lease_until: float | None = None) -> None:
        with self._tx() as conn:
            conn.execute(_UPSERT_JOB, (*row_values(job_to_row(job, SQLITE), JOB_COLUMNS), lease_until))

    async def enqueue_job(self, job: Job) -> None:
        await asyncio.to_thread(self._upsert_job, job)

    async def save_job(self, job: Job) -> None:
        await asyncio.to_thread(self._upsert_job, job)

    def _claim_job(self, now: datetime, lease_s: float) -> Job | None:
        t = now.timestamp()
        with self._tx() as conn:
            row = conn.execute(
                "SELECT id FROM jobs WHERE (status IN ('queued', 'failed') AND next_attempt_at <= ?)"
                " OR (status = 'running' AND lease_until <= ?) ORDER BY next_attempt_at LIMIT 1",
                (t, t),
            ).fetchone()
            if row is None:
                return None
            claimed = conn.execute(
                "UPDATE jobs SET status = 'running', attempts = attempts + 1, lease_until = ?, updated_at = ?"
                " WHERE id = ? RETURNING *",
                (t + lease_s, t, row["id"]),
            ).fetchone()
            return job_from_row(claimed, SQLITE)

    async def claim_job(self, now: datetime, lease_s: float) -> Job | None:
        return await asyncio.to_thread(self._claim_job, now, lease_s)

    async def get_job(self, owner: Owner, job_id: str) -> Job | None:
        rows = await asyncio.to_thread(
            self._read,
            "SELECT * FROM jobs WHERE id = ? AND tenant_id = ? AND user_id = ?",
            (job_id, owner.tenant_id, owner.user_id),
        )
        return job_from_row(rows[0], SQLITE) if rows else None

    async def list_jobs(
        self, tenant_id: str, *, status: JobStatus | None = None, limit: int = 100, after_id: str | None = None
    ) -> list[Job]:
        where, params = "tenant_id = ? AND id > ?", [tenant_id, after_id or ""]
        if status is not None:
            where += " AND status = ?"
            params.append(status.value)
        sql = f"SELECT * FROM jobs WHERE {where} ORDER BY id LIMIT ?"
        rows = await asyncio.to_thread(self._read, sql, (*params, limit))
        return [job_from_row(r, SQLITE) for r in rows]

    # -- API keys -----------------------------------------------------------------------
    def _put_api_key(self, record: ApiKeyRecord) -> None:
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO api_keys (key_hash, tenant_id, read_only, name, created_at) VALUES (?,?,?,?,?)"
                " ON CONFLICT(key_hash) DO UPDATE SET tenant_id = excluded.tenant_id,"
                " read_only = excluded.read_only, name = excluded.name",
                (record.key_hash, record.tenant_id, int(record.read_only), record.name, datetime.now(UTC).timestamp()),
            )

    async def put_api_key(self, record: ApiKeyRecord) -> None:
        await asyncio.to_thread(self._put_api_key, record)

    async def get_api_key(self, key_hash: str) -> ApiKeyRecord | None:
        rows = await asyncio.to_thread(
            self._read,
            "SELECT * FROM api_keys k WHERE key_hash = ?"
            " AND NOT EXISTS (SELECT 1 FROM api_key_revocations r WHERE r.key_hash = k.key_hash)",
            (key_hash,),
        )
        if not rows:
            return None
        r = rows[0]
        return ApiKeyRecord(
            key_hash=r["key_hash"], tenant_id=r["tenant_id"], read_only=bool(r["read_only"]), name=r["name"]
        )

    def _revoke_api_key(self, key_hash: str) -> bool:
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO api_key_revocations (key_hash, revoked_at) VALUES (?, ?) ON CONFLICT(key_hash) DO NOTHING",
                (key_hash, datetime.now(UTC).timestamp()),
            )
            return conn.execute("DELETE FROM api_keys WHERE key_hash = ?", (key_hash,)).rowcount > 0

    async def revoke_api_key(self, key_hash: str) -> bool:
        return await asyncio.to_thread(self._revoke_api_key, key_hash)

    async def api_key_revoked(self, key_hash: str) -> bool:
        rows = await asyncio.to_thread(self._read, "SELECT 1 FROM api_key_revocations WHERE key_hash = ?", (key_hash,))
        return bool(rows)


def _quote(term: str) -> str:
    """An FTS5 string literal: the term in double quotes, inner quotes doubled."""
    return '"' + term.replace('"', '""') + '"'


def from_settings(settings: Settings, *, dim: int, dim_short: int) -> StoreBundle:
    """The embedded store at ``resolved_sqlite_path`` (registry entry ``embedded``)."""
    return EmbeddedStore(
        settings.embedded.resolved_sqlite_path,
        dim=dim,
        dim_short=dim_short,
        vector_space=settings.embedder.vector_space,
        keyword_index_min_rows=settings.embedded.keyword_index_min_memories,
        ann_min_rows=settings.embedded.ann_min_memories,
    ).roles()
