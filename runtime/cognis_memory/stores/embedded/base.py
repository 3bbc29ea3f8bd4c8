"""What every role of the embedded store shares: the SQLite connections and their locks, the per-user
indexes, opening and closing, reads and transactions, and reading hits back (:class:`EmbeddedBase`)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...domain import Memory, Owner
from ...search_text import search_text
from ..filters import owner_token
from ..keyword_index import FtsStatistics, FtsTokenizer, UserKeywordIndex
from ..migrations.sqlite import FTS_TOKENIZE, add_record_columns, apply_migrations
from ..numpy_index import IndexedRow, UserVectorIndex
from ..owner_cache import OwnerCache
from ..records import (
    MEMORY_COLUMNS,
    SQLITE,
    SQLITE_WITHOUT_VECTORS,
    insert_statement,
    memory_from_row,
    memory_to_row,
    row_values,
)
from ..vector_space import KEY as VECTOR_SPACE_KEY
from ..vector_space import check as check_vector_space
from .connection import connect

#: how much lower the priority of a background index build is than the process's (a nice increment)
BACKGROUND_NICE = 10
#: the memory columns as an SQL select list (every role that reads whole memories selects these)
MEMORY_COLUMNS_SQL = ", ".join(MEMORY_COLUMNS)
_INSERT_MEMORY = insert_statement("memories", MEMORY_COLUMNS, "?")
_COLUMNS_WITHOUT_VECTORS = ", ".join(c for c in MEMORY_COLUMNS if c not in ("embedding", "embedding_short"))


@dataclass(slots=True)
class SmallUser:
    """A user with fewer current memories than ``keyword_index_min_rows``: FTS5 answers their keyword searches."""

    rows: int

    @property
    def n(self) -> int:
        return 0


class EmbeddedBase:
    """The store's state and what its roles share; each role is a subclass in its own module and
    :class:`~.store.EmbeddedStore` is all of them. A role uses its own members and these of the base,
    never another role's (``tests/stores/test_embedded_roles.py`` keeps this list true):

    * :mod:`.messages`: ``_read``, ``_tx``
    * :mod:`.jobs`: ``_read``, ``_tx``
    * :mod:`.api_keys`: ``_read``, ``_tx``
    * :mod:`.memories`: ``_read``, ``_tx``, ``_fetch``, ``_insert_memory``, ``_index_add``, ``_index_remove``,
      ``_vectors``, ``_keywords``, ``_fts_stats``
    * :mod:`.search`: ``_read``, ``_fetch``, ``_connect``, ``_reader``, ``_rlock``, ``_background``, ``_closed``,
      ``_vectors``, ``_keywords``, ``_keyword_builds``, ``_fts_stats``, ``_tokenizer``, ``_ann_available``

    ``_read`` runs a query on the reader connection (``_reader`` under ``_rlock``; ``_connect`` opens another),
    ``_tx`` is a write transaction; ``_insert_memory`` writes a memory's row and FTS row, ``_index_add`` and
    ``_index_remove`` keep the loaded per-user indexes (``_vectors``, ``_keywords``) in step after a commit,
    ``_fetch`` reads memories by id; ``_fts_stats`` and ``_tokenizer`` are FTS5's statistics and tokenizer;
    ``_background`` starts an index build (``_keyword_builds``: the keyword builds under way),
    ``_ann_available`` turns off once an approximate index build fails, ``_closed`` is set by :meth:`close`."""

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
        self._keywords: OwnerCache[UserKeywordIndex | SmallUser] = OwnerCache(lambda i: i.n, max_rows=max_cached_rows)
        self._tokenizer = FtsTokenizer(FTS_TOKENIZE)
        self._fts_stats = FtsStatistics("memories_fts")
        self._ann_available = True
        #: background index builds under way: keyword indexes by owner, and every build thread (ANN too)
        self._keyword_builds: set[Owner] = set()
        self._build_threads: list[threading.Thread] = []
        self._closed = False

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
            add_record_columns(self._writer, where=f"the store at {self.path}")
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
            (owner_token(Owner(m.tenant_id, m.user_id)), search_text(m), m.id),
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
                    kw.add([(m.id, fts_rowid, search_text(m)) for m, _, fts_rowid in added if fts_rowid is not None])
                elif isinstance(kw, SmallUser):
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
            elif isinstance(kw, SmallUser):
                kw.rows -= 1
            self._keywords.written(owner)

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
                f"SELECT {MEMORY_COLUMNS_SQL} FROM memories WHERE tenant_id = ? AND user_id = ? AND id IN ({q})",
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
