"""Helpers for tests that run the project's commands as real processes (``serve``, ``mcp``, demo.sh)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx
import pytest

from scripts.local_servers._base import free_port

__all__ = ["free_port", "stop", "wait_for_http"]


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
