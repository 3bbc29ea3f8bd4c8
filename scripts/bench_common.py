"""Helpers shared by the benchmark scripts (bench_locomo, bench_scale, bench_latency).

Nothing here reads benchmark data: the scripts pass their own inputs. Everything runs on
the real runtime (service, pipelines, embedded store, offline model); the only thing this
module adds is measurement (percentiles, telemetry capture, machine facts, HTTP server).
"""

from __future__ import annotations

import io
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parent.parent
if str(REPO / "runtime") not in sys.path:  # running from a checkout without an install
    sys.path.insert(0, str(REPO / "runtime"))

from cognis_memory.telemetry.emitter import Telemetry  # noqa: E402
from cognis_memory.telemetry.recorder import StageRecorder  # noqa: E402


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in [0, 100]); NaN for no values."""
    if not values:
        return float("nan")
    xs = sorted(values)
    if len(xs) == 1:
        return float(xs[0])
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo))


def latency_summary(values_ms: Sequence[float], prefix: str = "") -> dict[str, float]:
    return {
        f"{prefix}p50_ms": round(percentile(values_ms, 50), 2),
        f"{prefix}p95_ms": round(percentile(values_ms, 95), 2),
        f"{prefix}p99_ms": round(percentile(values_ms, 99), 2),
        f"{prefix}mean_ms": round(statistics.fmean(values_ms), 2) if values_ms else float("nan"),
        f"{prefix}n": len(values_ms),
    }


class RecordingTelemetry(Telemetry):
    """The service's real telemetry, with its log lines kept in memory instead of printed.

    ``records`` holds the JSON record of every request (stage durations included), which is
    how the benchmarks read the per-stage latency breakdown.
    """

    def __init__(self) -> None:
        self._sink = io.StringIO()
        super().__init__(metrics_enabled=False, log_stream=self._sink, metrics_stream=io.StringIO(), log_level="WARNING")
        self.records: list[dict[str, Any]] = []

    def log_request(self, event: str, rec: StageRecorder, *, request_id: str | None, **fields: Any) -> dict[str, Any]:
        record = super().log_request(event, rec, request_id=request_id, **fields)
        self.records.append(record)
        self._sink.seek(0)
        self._sink.truncate()
        return record

    def emit_request_metrics(self, **kwargs: Any) -> None:  # noqa: D102 - metrics are not needed here
        return None

    def take(self) -> list[dict[str, Any]]:
        out, self.records = self.records, []
        return out


def stage_means(records: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Mean milliseconds per stage over request records (a stage absent from a request counts 0)."""
    totals: dict[str, float] = {}
    for r in records:
        for k, v in r.get("stage_durations", {}).items():
            totals[k] = totals.get(k, 0.0) + float(v)
    n = max(len(records), 1)
    return {k: round(v / n, 3) for k, v in totals.items()}


def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        import psutil

        mem_gib = round(psutil.virtual_memory().total / 2**30, 1)
    except Exception:  # pragma: no cover
        pass
    commit = None
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=5
        ).stdout.strip() or None
    except Exception:  # pragma: no cover
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "ram_gib": mem_gib,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "commit": commit,
    }


def rss_mib() -> float:
    import psutil

    return round(psutil.Process().memory_info().rss / 2**20, 1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class UvicornThread:
    """A real uvicorn server on 127.0.0.1 serving ``app`` from a background thread.

    The app is the project's FastAPI app built on the *same* service object the in-process
    measurements use (``create_app(service, manage_lifecycle=False)``), so both paths see
    the same data; HTTP requests go through the real network stack on loopback.
    """

    def __init__(self, app: Any, port: int | None = None) -> None:
        import uvicorn

        self.port = port or free_port()
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", access_log=False, lifespan="off"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="bench-uvicorn", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> UvicornThread:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start within 30 s")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)


def write_json(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8")


def fmt_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured markdown table (also readable on a terminal)."""

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"
        return str(v)

    body = [[cell(v) for v in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(headers)]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    out = [line, sep]
    for r in body:
        out.append("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |")
    return "\n".join(out)
