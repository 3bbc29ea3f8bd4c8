"""Real processes for tests and load runs: a free port, waiting for a process to answer HTTP, stopping it,
and :class:`ServeProcess` (a real ``cognis-memory serve`` on 127.0.0.1)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import httpx
import pytest

from .local_servers._base import free_port

__all__ = ["REPO", "ServeProcess", "free_port", "stop", "wait_for_http"]

#: The repository root (this package is installed in editable mode from ``devtools/``).
REPO = Path(__file__).resolve().parents[2]


def wait_for_http(proc: subprocess.Popen, url: str, log: Path, *, timeout_s: float = 120, healthy: bool = True) -> None:
    """Wait until ``url`` answers (200 when ``healthy``, any status otherwise); fail the test with the
    process's log tail if it exits first or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            pytest.fail(f"{proc.args} exited with {proc.returncode}:\n{_tail(log)}")
        try:
            status = httpx.get(url, timeout=1).status_code
            if not healthy or status == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"{url} did not answer within {timeout_s:.0f} s:\n{_tail(log)}")
        time.sleep(0.2)


def stop(proc: subprocess.Popen, *, timeout_s: float = 30) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``timeout_s``; waits for the exit either way."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def _tail(log: Path) -> str:
    try:
        return log.read_text(encoding="utf-8", errors="replace")[-3000:]
    except OSError:
        return "(no log)"


class ServeProcess:
    """``python -m cognis_memory serve`` on 127.0.0.1 with the given COGNIS_* environment."""

    def __init__(
        self, env: dict[str, str], *, log_path: Path, port: int | None = None, start_timeout_s: float = 180
    ) -> None:
        self.port = port or free_port()
        self.env = env
        self.log_path = log_path
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ServeProcess:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
               "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "COGNIS_METRICS_ENABLED": "false",
               "COGNIS_LOG_LEVEL": "WARNING", **self.env}  # fmt: skip
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - open while the server runs
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cognis_memory", "serve", "--host", "127.0.0.1", "--port", str(self.port)],
            env=env, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            cwd=str(REPO),
        )  # fmt: skip
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.kill()
        raise RuntimeError(f"serve did not answer /health within {self.start_timeout_s}s:\n{self.log_tail()}")

    def kill(self) -> None:
        """SIGKILL of the server's whole process group (no shutdown of any kind)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        self._close_log()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self._close_log()

    def rss_mb(self) -> float | None:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():  # type: ignore[union-attr]
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except (OSError, AttributeError):
            return None
        return None

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"
