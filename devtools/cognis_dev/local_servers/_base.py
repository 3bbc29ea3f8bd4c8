"""Shared machinery for the local real servers: free ports, process groups, temp dirs, cleanup.

Only the standard library is used here so that the helpers work before the project is installed.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

__all__ = [
    "LocalServer",
    "ServerError",
    "ServerStartError",
    "ServerUnavailable",
    "free_port",
    "stop_all",
]

#: Where the temporary server directories go unless a base_dir is given.
DEFAULT_BASE_DIR_ENV = "COGNIS_LOCAL_SERVERS_DIR"


class ServerError(RuntimeError):
    """Base class of the errors raised by the local servers."""


class ServerUnavailable(ServerError):
    """A prerequisite (binary, JDK, Maven build, user) is missing: the message says how to get it."""


class ServerStartError(ServerError):
    """The server was launched but did not become ready; the message includes its log tail."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (the OS picks it; a race with other processes is possible)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_is_open(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def tail(path: Path | None, lines: int = 60) -> str:
    if path is None or not path.exists():
        return "(no log file)"
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            data = f.read().decode("utf-8", "replace")
    except OSError as e:  # pragma: no cover - diagnostics only
        return f"(cannot read {path}: {e})"
    return "\n".join(data.splitlines()[-lines:])


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except Exception:
        pass


# Every started server, so that an atexit hook can stop the ones a caller forgot.
_LIVE: weakref.WeakSet[LocalServer] = weakref.WeakSet()
_LIVE_LOCK = threading.Lock()


def stop_all() -> None:
    """Stop every server started by this process that is still running (also registered with atexit)."""
    with _LIVE_LOCK:
        servers = list(_LIVE)
    for server in servers:
        with contextlib.suppress(Exception):
            server.stop()


atexit.register(stop_all)


class LocalServer:
    """One real server process on 127.0.0.1 with its own temporary directory.

    Subclasses implement ``_prepare()`` (one-time setup of the directory), ``_command()``,
    ``_wait_ready(deadline)`` and may override ``_graceful_signal`` / ``_user``.

    Life cycle: ``start()`` picks a free port (unless one was given), creates the directory, prepares
    it and launches the process; ``stop()`` ends the process (graceful signal, then SIGKILL to the
    whole process group) and removes the directory (unless ``keep_dir``); it is safe to call twice.
    ``restart()`` stops and starts the process on the SAME port and directory; ``kill()`` simulates a
    crash (SIGKILL, directory kept) and a later ``start()`` relaunches on the same port and directory.
    """

    name = "server"
    _graceful_signal = signal.SIGTERM
    _stop_timeout = 30.0

    def __init__(
        self,
        port: int | None = None,
        *,
        base_dir: str | os.PathLike[str] | None = None,
        keep_dir: bool = False,
        start_timeout: float = 60.0,
        die_with_parent: bool = False,
    ) -> None:
        self._requested_port = port
        self._port: int | None = port
        self._base_dir = Path(base_dir) if base_dir else None
        self.keep_dir = keep_dir
        self.start_timeout = start_timeout
        self.die_with_parent = die_with_parent
        self.dir: Path | None = None
        self._prepared = False
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._lock = threading.RLock()
        self._detached = False

    # ----------------------------------------------------------------------------- properties
    @property
    def port(self) -> int:
        if self._port is None:
            raise ServerError(f"{self.name} has no port yet: call start() first")
        return self._port

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def log_path(self) -> Path | None:
        return self.dir / f"{self.name}.log" if self.dir else None

    def rss_bytes(self) -> int | None:
        """Resident memory of the main process (from /proc), or None when not running."""
        if self.pid is None:
            return None
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return None

    def log_tail(self, lines: int = 60) -> str:
        return tail(self.log_path, lines)

    # ----------------------------------------------------------------------------- subclass hooks
    def _prepare(self) -> None:
        """One-time setup of ``self.dir`` (e.g. initdb)."""

    def _command(self) -> Sequence[str]:
        raise NotImplementedError

    def _env(self) -> dict[str, str] | None:
        return None

    def _popen_user_kwargs(self) -> dict[str, Any]:
        return {}

    def _wait_ready(self, deadline: float) -> None:
        raise NotImplementedError

    def _allocate_ports(self) -> None:
        if self._port is None:
            self._port = free_port()

    def _after_ready(self) -> None:
        """Runs once after the first successful start (e.g. CREATE DATABASE)."""

    # ----------------------------------------------------------------------------- life cycle
    def _make_dir(self) -> Path:
        base = self._base_dir or (
            Path(os.environ[DEFAULT_BASE_DIR_ENV]) if os.environ.get(DEFAULT_BASE_DIR_ENV) else None
        )
        if base is not None:
            base.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f"cognis-{self.name}-", dir=str(base) if base else None))

    def start(self) -> LocalServer:
        with self._lock:
            if self.running:
                return self
            first = not self._prepared
            attempts = 3 if (first and self._requested_port is None) else 1
            last_error: Exception | None = None
            for attempt in range(attempts):
                try:
                    if not self._prepared:
                        self._allocate_ports()
                        self.dir = self._make_dir()
                        self._prepare()
                        self._prepared = True
                    self._launch()
                    if first:
                        self._after_ready()
                    with _LIVE_LOCK:
                        _LIVE.add(self)
                    return self
                except ServerUnavailable:
                    self._terminate(force=True)
                    self._cleanup_dir()
                    raise
                except Exception as e:
                    last_error = e
                    log = self.log_tail()
                    self._terminate(force=True)
                    if attempt + 1 < attempts and self._port_conflict(log):
                        # Another process took the port between free_port() and the bind: try new ports.
                        self._cleanup_dir()
                        self._port = None
                        continue
                    if first:
                        self._cleanup_dir()
                    if isinstance(e, ServerStartError):
                        raise
                    raise ServerStartError(f"{self.name} failed to start: {e}\n--- log tail ---\n{log}") from e
            raise ServerStartError(f"{self.name} failed to start: {last_error}")  # pragma: no cover

    @staticmethod
    def _port_conflict(log: str) -> bool:
        text = log.lower()
        return "address already in use" in text or "bindexception" in text or "could not bind" in text

    def _launch(self) -> None:
        assert self.dir is not None
        log_path = self.log_path
        assert log_path is not None
        self._log_file = open(log_path, "ab", buffering=0)  # noqa: SIM115 - open while the server runs
        preexec: Callable[[], None] | None = _die_with_parent if self.die_with_parent else None
        self._proc = subprocess.Popen(
            list(self._command()),
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            cwd=str(self.dir),
            env=self._env(),
            start_new_session=True,  # own process group: stop() can kill every child
            preexec_fn=preexec,
            close_fds=True,
            **self._popen_user_kwargs(),
        )
        self._wait_ready(time.monotonic() + self.start_timeout)

    def _check_alive(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            raise ServerStartError(
                f"{self.name} exited with code {self._proc.returncode} during start-up\n"
                f"--- log tail ({self.log_path}) ---\n{self.log_tail()}"
            )

    def _timeout(self, what: str) -> ServerStartError:
        return ServerStartError(
            f"{self.name} did not become ready within {self.start_timeout:.0f}s ({what})\n"
            f"--- log tail ({self.log_path}) ---\n{self.log_tail()}"
        )

    def _terminate(self, force: bool = False) -> None:
        """End the process (and its process group); keep the directory."""
        proc, self._proc = self._proc, None
        if proc is not None:
            pgid = proc.pid  # start_new_session=True: the leader's pid is the group id
            if proc.poll() is None and not force:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(proc.pid, self._graceful_signal)
                try:
                    proc.wait(timeout=self._stop_timeout)
                except subprocess.TimeoutExpired:
                    pass
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        if self._log_file is not None:
            with contextlib.suppress(OSError):
                self._log_file.close()
            self._log_file = None

    def _cleanup_dir(self) -> None:
        if self.dir is not None and not self.keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
            self._prepared = False
            if self._requested_port is None:
                self._port = None

    def stop(self) -> None:
        """Stop the server and remove its directory. Safe to call more than once."""
        with self._lock:
            try:
                self._terminate()
            finally:
                self._cleanup_dir()
                with _LIVE_LOCK:
                    _LIVE.discard(self)

    def restart(self) -> LocalServer:
        """Graceful stop, then start again on the same port with the same directory (data kept)."""
        with self._lock:
            if not self._prepared:
                return self.start()
            self._terminate()
            try:
                self._launch()
            except Exception:
                self._terminate(force=True)
                raise
            return self

    def kill(self) -> None:
        """Simulate a crash: SIGKILL the process group, keep the directory (``start()`` relaunches)."""
        with self._lock:
            self._terminate(force=True)

    def detach(self) -> None:
        """Forget the process without stopping it (used by the CLI's ``up --detach``)."""
        with self._lock:
            self._proc = None
            if self._log_file is not None:
                self._log_file.close()
                self._log_file = None
            self._detached = True
            with _LIVE_LOCK:
                _LIVE.discard(self)

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __del__(self) -> None:  # best effort; stop_all() at exit is the real fallback
        with contextlib.suppress(Exception):
            if self._proc is not None and not self._detached:
                self._terminate(force=True)

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<{type(self).__name__} port={self._port} {state} dir={self.dir}>"


def run_checked(cmd: Sequence[str], *, what: str, timeout: float = 120, **kwargs: Any) -> str:
    """Run a short command, return its output, raise ServerStartError with the output on failure."""
    try:
        res = subprocess.run(
            list(cmd),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=timeout,
            **kwargs,
        )
    except subprocess.TimeoutExpired as e:
        raise ServerStartError(f"{what} timed out after {timeout}s: {' '.join(cmd)}") from e
    out = res.stdout.decode("utf-8", "replace")
    if res.returncode != 0:
        raise ServerStartError(f"{what} failed (exit {res.returncode}): {' '.join(cmd)}\n{out}")
    return out
