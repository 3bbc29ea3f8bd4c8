"""An in-process cache of query vectors, bounded per tenant and in total (least recently used out).

Searches repeat (agents recall the same things turn after turn), and a query's embedding is
most of a search's CPU. Entries belong to a tenant and are keyed by user and by what the
model sees of the query (:meth:`~cognis_memory.encoding.encoder.MatryoshkaEncoder.input_key`),
so one tenant's queries never answer another's, a tenant filling its share (``per_tenant``)
evicts only its own entries, and forgetting a user drops that user's queries. When the total
(``total``) is reached, the least recently used tenant gives up its oldest entry. Thread-safe;
a size of 0 turns the cache off.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np


class QueryVectorCache:
    def __init__(self, *, per_tenant: int = 1024, total: int = 16384) -> None:
        self.per_tenant = per_tenant
        self.total = total
        self._tenants: OrderedDict[str, OrderedDict[tuple[str, str], np.ndarray]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._size

    def get(self, tenant_id: str, user_id: str, key: str) -> np.ndarray | None:
        with self._lock:
            entries = self._tenants.get(tenant_id)
            if entries is None or (user_id, key) not in entries:
                return None
            self._tenants.move_to_end(tenant_id)
            entries.move_to_end((user_id, key))
            return entries[(user_id, key)]

    def put(self, tenant_id: str, user_id: str, key: str, vector: np.ndarray) -> None:
        if self.per_tenant <= 0 or self.total <= 0:
            return
        vector = np.array(vector, dtype=np.float32)  # a private, read-only copy
        vector.flags.writeable = False
        with self._lock:
            entries = self._tenants.get(tenant_id)
            if entries is not None and (user_id, key) in entries:
                entries[(user_id, key)] = vector
                entries.move_to_end((user_id, key))
                self._tenants.move_to_end(tenant_id)
                return
            if entries is not None and len(entries) >= self.per_tenant:
                entries.popitem(last=False)
                self._size -= 1
            while self._size >= self.total:
                self._evict_oldest()
            entries = self._tenants.setdefault(tenant_id, OrderedDict())
            self._tenants.move_to_end(tenant_id)
            entries[(user_id, key)] = vector
            self._size += 1

    def forget_user(self, tenant_id: str, user_id: str) -> int:
        """Drop every query of this user; returns how many entries went."""
        with self._lock:
            entries = self._tenants.get(tenant_id)
            if entries is None:
                return 0
            gone = [k for k in entries if k[0] == user_id]
            for k in gone:
                del entries[k]
            self._size -= len(gone)
            if not entries:
                del self._tenants[tenant_id]
            return len(gone)

    def _evict_oldest(self) -> None:
        tenant, entries = next(iter(self._tenants.items()))
        if entries:
            entries.popitem(last=False)
            self._size -= 1
        if not entries:
            del self._tenants[tenant]
