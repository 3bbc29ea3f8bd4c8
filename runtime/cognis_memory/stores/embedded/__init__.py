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

Modules by role: :mod:`.connection` (the file's connections), :mod:`.keyword_query` (text to an FTS5
query), :mod:`.base` (shared state, open and close, reads, transactions), :mod:`.messages`,
:mod:`.memories`, :mod:`.search`, :mod:`.jobs`, :mod:`.api_keys`, and :mod:`.store`, whose
:class:`EmbeddedStore` is all of them.
"""

from .connection import BUSY_TIMEOUT_S, connect
from .keyword_query import STOP_WORDS, fts_query_terms
from .store import EmbeddedStore, from_settings

__all__ = ["BUSY_TIMEOUT_S", "STOP_WORDS", "EmbeddedStore", "connect", "fts_query_terms", "from_settings"]
