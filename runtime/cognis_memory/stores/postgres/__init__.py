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

Modules by role: :mod:`.connection` (the database: migration, pool, pgvector adapters),
:mod:`.messages`, :mod:`.memories` (versions, chains, forget, bulk load, the outbox writes),
:mod:`.vectors`, :mod:`.jobs`, :mod:`.api_keys`; :mod:`.store` composes them. The outbox *reader*
is the dual store's (:mod:`cognis_memory.stores.dual.outbox`).
"""

from .api_keys import PostgresApiKeys
from .connection import PostgresDatabase, register_vector_types
from .jobs import PostgresJobs
from .memories import OutboxListener, PostgresMemories
from .messages import PostgresMessages
from .store import PostgresStore
from .vectors import PostgresVectorSearch

__all__ = [
    "OutboxListener",
    "PostgresApiKeys",
    "PostgresDatabase",
    "PostgresJobs",
    "PostgresMemories",
    "PostgresMessages",
    "PostgresStore",
    "PostgresVectorSearch",
    "register_vector_types",
]
