"""The dual store's bulk load (imports, benchmarks) against the real PostgreSQL and OpenSearch when
OpenSearch answers the load's closing refresh more slowly than the service's per-request timeout.

At 100k memories on this machine that refresh took longer than the default ``opensearch_timeout_s``
(5 s), and the load failed although OpenSearch finished the work. Here the refresh is made slow the
way the network sees it: a TCP relay in front of the real OpenSearch holds every ``_refresh`` request
for ``HOLD_S`` before passing it on, longer than the client's 1 s timeout; every other request passes
at once. OpenSearch does all the work; only its answer to the refresh arrives late, as at 100k.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import numpy as np
import pytest
import pytest_asyncio
from cognis_dev.databases import create_database

from cognis_memory.search_filter import SearchFilter
from cognis_memory.stores.dual import DualStore
from cognis_memory.stores.opensearch import OpenSearchKeywordIndex
from cognis_memory.stores.postgres import PostgresStore
from tests.stores.helpers import DIM, DIM_SHORT, make_memory, new_owner, new_prefix, os_client

pytestmark = pytest.mark.integration

#: The service's request timeout in this test, and how long the relay holds a refresh (longer).
CLIENT_TIMEOUT_S, HOLD_S = 1.0, 3.0


class SlowRefreshRelay:
    """127.0.0.1 relay to ``upstream`` that holds any client data containing ``/_refresh`` for ``hold_s``."""

    def __init__(self, upstream: str, hold_s: float) -> None:
        host, port = upstream.removeprefix("http://").rstrip("/").split(":")
        self.upstream, self.hold_s = (host, int(port)), hold_s
        self.held = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, *, hold: bool) -> None:
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                while data := await src.read(65536):
                    if hold and b"/_refresh" in data:
                        self.held += 1
                        await asyncio.sleep(self.hold_s)
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer, hold=True), pipe(up_reader, writer, hold=False))


@pytest_asyncio.fixture
async def relay(opensearch_server) -> AsyncIterator[tuple[SlowRefreshRelay, str]]:
    r = SlowRefreshRelay(opensearch_server.url, HOLD_S)
    url = await r.start()
    try:
        yield r, url
    finally:
        await r.close()


async def test_bulk_load_outlasts_the_request_timeout_of_a_slow_refresh(
    postgres_server, relay: tuple[SlowRefreshRelay, str], rng: np.random.Generator
) -> None:
    proxy, url = relay
    keyword = OpenSearchKeywordIndex(
        os_client(url, timeout=CLIENT_TIMEOUT_S),
        index_prefix=new_prefix(),
        replicas=0,
        write_timeout_s=CLIENT_TIMEOUT_S,
    )
    store = DualStore(PostgresStore(create_database(postgres_server.dsn), dim=DIM, dim_short=DIM_SHORT), keyword)
    await store.open()
    try:
        owner = new_owner()
        memories = [make_memory(owner, f"note {i} about the harbour lighthouse", rng) for i in range(300)]
        memories.append(make_memory(owner, "I bought a quince tree", rng))
        await store.bulk_load(memories)
        assert proxy.held == 1, "the load's refresh did not go through the relay"
        # Searchable as soon as the load returns: its refresh was waited for, not given up.
        hits = await store.roles().keywords.keyword_search(SearchFilter(owner), "quince", limit=5)
        assert [h.memory.id for h in hits] == [memories[-1].id]
        assert await keyword.count(tenant_id=owner.tenant_id) == len(memories)
        # The service's own requests keep their short timeout: a refresh outside a bulk load is given up.
        with pytest.raises(Exception, match="(?i)timeout|timed out"):
            await keyword.refresh_now()
    finally:
        await store.close()
