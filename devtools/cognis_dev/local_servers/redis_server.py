"""Redis from Debian's ``redis-server`` on 127.0.0.1, no persistence, in the foreground (Popen handle kept)."""

from __future__ import annotations

import os
import shutil
import socket
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ._base import LocalServer, ServerUnavailable

__all__ = ["RedisServer", "find_redis_server"]

INSTALL_HINT = "install it with: apt-get update && apt-get install -y redis-server"


def find_redis_server() -> Path:
    """``$COGNIS_REDIS_SERVER``, else ``redis-server`` on PATH, else /usr/bin/redis-server."""
    candidates = [os.environ.get("COGNIS_REDIS_SERVER"), shutil.which("redis-server"), "/usr/bin/redis-server"]
    for c in candidates:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return Path(c)
    raise ServerUnavailable(f"redis-server not found (looked at $COGNIS_REDIS_SERVER, PATH, /usr/bin): {INSTALL_HINT}")


def _ping(port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer(LocalServer):
    """A throw-away Redis on 127.0.0.1 (``--save '' --appendonly no``: data does not survive a restart).

    Args:
        port: TCP port (default: a free one, kept across ``restart()``).
        config: extra ``--name value`` options, e.g. ``{"maxmemory": "256mb"}``.
        binary: path to redis-server (default: :func:`find_redis_server`).
        base_dir, keep_dir, start_timeout, die_with_parent: see :class:`LocalServer`.

    ``url`` is ``redis://127.0.0.1:PORT/0``.
    """

    name = "redis"

    def __init__(
        self,
        port: int | None = None,
        *,
        config: Mapping[str, Any] | None = None,
        binary: str | os.PathLike[str] | None = None,
        base_dir: str | os.PathLike[str] | None = None,
        keep_dir: bool = False,
        start_timeout: float = 30.0,
        die_with_parent: bool = False,
    ) -> None:
        super().__init__(
            port, base_dir=base_dir, keep_dir=keep_dir, start_timeout=start_timeout, die_with_parent=die_with_parent
        )
        self.config = dict(config or {})
        self._binary = Path(binary) if binary else None

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _prepare(self) -> None:
        if self._binary is None:
            self._binary = find_redis_server()
        elif not self._binary.is_file():
            raise ServerUnavailable(f"redis-server not found at {self._binary}: {INSTALL_HINT}")

    def _command(self) -> Sequence[str]:
        assert self.dir is not None
        cmd = [
            str(self._binary),
            "--bind",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            "--supervised",
            "no",
            "--protected-mode",
            "yes",
            "--dir",
            str(self.dir),
            "--logfile",
            "",
            "--loglevel",
            "notice",
        ]
        for key, value in self.config.items():
            cmd += [f"--{key}", str(value)]
        return cmd

    def _wait_ready(self, deadline: float) -> None:
        while True:
            self._check_alive()
            if _ping(self.port):
                return
            if time.monotonic() > deadline:
                raise self._timeout("no +PONG")
            time.sleep(0.05)
