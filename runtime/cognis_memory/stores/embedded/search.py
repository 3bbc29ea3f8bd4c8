"""The embedded store's searches: the per-user vector and keyword indexes, their loads and builds."""

from __future__ import annotations

import asyncio
import logging
import sys

import numpy as np

from ...domain import Owner
from ...search_filter import SearchFilter
from ..ann_index import build_prefix_ann
from ..filters import MASKED_RECORD, owner_token, sqlite_filter
from ..keyword_index import UserKeywordIndex, idf
from ..numpy_index import UserVectorIndex, column_block
from ..records import (
    SQLITE,
    memory_from_row,
)
from ..values import ScoredMemory, VectorSearchResult
from .base import MEMORY_COLUMNS_SQL, EmbeddedBase, SmallUser
from .keyword_query import fts_query_terms, quote

log = logging.getLogger(__name__)

#: Rows read per step when a user's vector or keyword index is loaded. Small steps keep the short-lived
#: buffers of a step (the rows' blobs and tuples: about 4 MB at 2,048 rows) from fragmenting the heap:
#: at 16,384 rows (about 33 MB a step) 35-40 MiB per 100k memories stayed resident after the load, even
#: after a heap trim (measured in docs/benchmarks.md, "Search cost at scale").
_LOAD_CHUNK = 2048

#: the columns the vector index's filters test (:data:`.filters.MASKED_RECORD`), as a vector index load selects
#: them after the id; the two times of the effective time, the vectors and the rowid follow, at these places
_MASKED_COLUMNS = ", ".join(c.name for c in MASKED_RECORD)
_EVENT_TIME, _MESSAGE_TIME, _EMBEDDING, _EMBEDDING_SHORT, _ROWID = range(1 + len(MASKED_RECORD), 6 + len(MASKED_RECORD))


class EmbeddedSearch(EmbeddedBase):
    """The embedded store's searches: the per-user vector and keyword indexes, their loads and builds."""

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
                f"SELECT id, {_MASKED_COLUMNS}, event_time, message_time, embedding, embedding_short, rowid"
                " FROM memories WHERE tenant_id = ? AND user_id = ? AND is_current = 1",
                params,
            )
            ev, msg = _EVENT_TIME, _MESSAGE_TIME
            while rows := cur.fetchmany(_LOAD_CHUNK):
                k = len(rows)
                idx.append_block(
                    [sys.intern(r[0]) for r in rows],  # one string per id, shared with the keyword index
                    np.frombuffer(b"".join(r[_EMBEDDING] for r in rows), dtype=np.float32).reshape(k, self.dim),
                    np.frombuffer(b"".join(r[_EMBEDDING_SHORT] for r in rows), dtype=np.float32).reshape(
                        k, self.dim_short
                    ),
                    {c.name: column_block(c, [r[i] for r in rows]) for i, c in enumerate(MASKED_RECORD, start=1)},
                    np.array(
                        [r[ev] if r[ev] is not None else r[msg] if r[msg] is not None else np.nan for r in rows],
                        dtype=np.float64,
                    ),
                    np.fromiter((r[_ROWID] for r in rows), dtype=np.int64, count=k),
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

    def _load_keyword_index(self, owner: Owner) -> UserKeywordIndex | SmallUser:
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
                return SmallUser(int(rows))
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

    def _keyword_index(self, owner: Owner) -> UserKeywordIndex | SmallUser | None:
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
        return self._keywords.get(owner, lambda: SmallUser(int(rows)))

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
        match = f'owner : "{owner_token(owner)}" AND content : ({" OR ".join(quote(t) for t in terms)})'
        extra, params = sqlite_filter(flt)
        if not extra and (indexed := self._indexed_keyword_search(owner, terms, limit)) is not None:
            return indexed
        columns = ", ".join("m." + c.strip() for c in MEMORY_COLUMNS_SQL.split(","))
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
