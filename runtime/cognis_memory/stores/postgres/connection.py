"""The PostgreSQL database of a store: settings, schema migration on open, the connection pool, health,
and the numpy <-> pgvector adapters every pooled connection registers.

Connection or pool failures surface as :class:`~cognis_memory.errors.DependencyUnavailableError`
(``"postgres"``) so the API can answer 503 rather than 500.
"""

from __future__ import annotations

import contextlib
import logging
import struct
from collections.abc import AsyncIterator, Callable
from typing import Any

import numpy as np
import psycopg
from psycopg.abc import Buffer
from psycopg.adapt import Dumper, Loader
from psycopg.pq import Format
from psycopg.types import TypeInfo
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ...errors import DependencyUnavailableError
from ..migrations.postgres import apply_migrations, check_schema_current
from ..vector_space import KEY as VECTOR_SPACE_KEY
from ..vector_space import check as check_vector_space

log = logging.getLogger(__name__)


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


class PostgresDatabase:
    """One PostgreSQL database: migrated (or checked) on :meth:`open`, then a pool of connections.

    ``dsn`` is a libpq connection string or URL, or a callable returning one (called for every new
    connection, so rotated credentials are picked up); ``dim``/``dim_short`` the vector sizes (part of
    the schema). ``migration_dsn`` (default: ``dsn``) is the schema owner's, used only by
    :meth:`open` to migrate; with it the pool runs as the least-privilege ``app_role``, which the
    migration creates and grants.
    """

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
        migration_dsn: str | Callable[[], str] | None = None,
        app_role: str | None = None,
        vector_space: str | None = None,
        migrate: bool = True,
    ) -> None:
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
        self._pool: AsyncConnectionPool | None = None

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
