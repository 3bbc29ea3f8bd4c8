"""PostgreSQL's vector-search role (pgvector).

Two-stage vector search in one SQL statement: an HNSW shortlist of ``shortlist`` rows on the short
vector with every filter in the ``WHERE`` clause (a subquery), with ``hnsw.iterative_scan =
relaxed_order`` and ``hnsw.ef_search >= shortlist`` set locally (without the iterative scan a selective
filter such as one user's rows can return far fewer rows than asked), then exact full-vector rescoring
of that shortlist by the outer query, on the rows the shortlist already read. One statement instead of
a shortlist query and a second query by id: one round trip less, and no second lookup of the shortlisted
rows. Without a short query
vector the search is one exact full-vector stage. Scores are cosine similarities (1 - cosine distance).

Timings: ``vector_short`` is the statement (both stages run in the server), ``vector_full`` the
conversion of the returned rows.
"""

from __future__ import annotations

import time

import numpy as np
from psycopg.rows import dict_row

from ...search_filter import SearchFilter
from ..filters import postgres_filter
from ..records import MEMORY_COLUMNS, POSTGRES, memory_from_row
from ..values import ScoredMemory, VectorSearchResult
from .connection import PostgresDatabase

_COLS_M = ", ".join(f"m.{c}" for c in MEMORY_COLUMNS)
_COLS_S = ", ".join(f"s.{c}" for c in MEMORY_COLUMNS)
#: pgvector accepts ef_search up to 1000.
_MAX_EF_SEARCH = 1000


class PostgresVectorSearch:
    """The :class:`~cognis_memory.stores.roles.VectorSearch` of a PostgreSQL database. ``iterative_scan`` is
    the pgvector ``hnsw.iterative_scan`` mode of the shortlist stage (``"relaxed_order"``,
    ``"strict_order"`` or ``"off"`` — off exists for tests that show why it matters)."""

    def __init__(self, db: PostgresDatabase, *, iterative_scan: str = "relaxed_order") -> None:
        if iterative_scan not in {"relaxed_order", "strict_order", "off"}:
            raise ValueError(f"iterative_scan: unknown mode {iterative_scan!r}")
        self.db = db
        self.iterative_scan = iterative_scan

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
        async with (
            self.db.connection() as conn,
            conn.transaction(),
            conn.cursor(row_factory=dict_row, binary=True) as cur,
        ):
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
            # The full-vector distance is computed by the outer query, on the shortlist only: in the subquery
            # it would be computed (and each full vector read from TOAST) for every row the subquery sorts, which
            # is all of the owner's rows when the planner scans the owner's index instead of HNSW (a small user
            # among many). The window count is taken over the whole shortlist, before the outer LIMIT.
            await cur.execute(
                f"SELECT {_COLS_S}, 1 - (s.embedding <=> %s) AS score, count(*) OVER () AS shortlisted FROM ("
                f"SELECT {_COLS_M} FROM memories m"
                f" WHERE m.tenant_id = %s AND m.user_id = %s AND m.is_current{extra}"
                " ORDER BY m.embedding_short <=> %s LIMIT %s"
                ") s ORDER BY s.embedding <=> %s, s.id LIMIT %s",
                (q_full, owner.tenant_id, owner.user_id, *fparams, np.asarray(query_short, dtype=np.float32),
                 shortlist, q_full, limit),
            )  # fmt: skip
            rows = await cur.fetchall()
            timings["vector_short"] = (time.perf_counter() - t0) * 1000
        t1 = time.perf_counter()
        hits = [ScoredMemory(memory_from_row(r, POSTGRES), float(r["score"])) for r in rows]
        timings["vector_full"] = (time.perf_counter() - t1) * 1000
        return VectorSearchResult(hits=hits, candidates_short=int(rows[0]["shortlisted"]) if rows else 0,
                                  timings_ms=timings)  # fmt: skip
