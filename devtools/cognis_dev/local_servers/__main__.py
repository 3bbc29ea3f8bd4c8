"""CLI: start/stop the local real servers and write an env file for the app and the tests.

    python -m cognis_dev.local_servers up [--pg] [--redis] [--opensearch] --env-file PATH [--detach]
    python -m cognis_dev.local_servers down --env-file PATH
    python -m cognis_dev.local_servers build-opensearch [--force]

``up`` without a server flag starts all three. By default it stays in the foreground until Ctrl-C
or SIGTERM (or ``down`` from another shell), then stops everything. With ``--detach`` it returns once
the servers are ready and leaves them running; ``down`` stops them from the pids in the env file.
The env file is shell-sourceable KEY=VALUE lines:

    COGNIS_POSTGRES_DSN=postgresql://postgres@127.0.0.1:PORT/cognis
    COGNIS_REDIS_URL=redis://127.0.0.1:PORT/0
    COGNIS_OPENSEARCH_URL=http://127.0.0.1:PORT
    COGNIS_<NAME>_PID / COGNIS_<NAME>_DIR / COGNIS_<NAME>_LOG, COGNIS_LOCAL_SERVERS_PID (the `up` process)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

from ._base import LocalServer, ServerError
from .opensearch_server import OpenSearchServer, build_opensearch_node
from .postgres_server import PostgresServer
from .redis_server import RedisServer

_KINDS = {
    # key: (env prefix, graceful stop signal)
    "postgres": ("COGNIS_POSTGRES", signal.SIGINT),
    "redis": ("COGNIS_REDIS", signal.SIGTERM),
    "opensearch": ("COGNIS_OPENSEARCH", signal.SIGTERM),
}


def _log(msg: str) -> None:
    print(f"[local-servers] {msg}", file=sys.stderr, flush=True)


def _write_env(path: Path, servers: dict[str, LocalServer], owner_pid: int | None) -> None:
    lines = [
        f"# Written by `python -m cognis_dev.local_servers up` at {time.strftime('%Y-%m-%d %H:%M:%S')}.",
        f"# Stop with: python -m cognis_dev.local_servers down --env-file {path}",
    ]

    def put(key: str, value: object) -> None:
        lines.append(f"{key}={shlex.quote(str(value))}")

    for kind, server in servers.items():
        prefix = _KINDS[kind][0]
        if kind == "postgres":
            assert isinstance(server, PostgresServer)
            put("COGNIS_POSTGRES_DSN", server.dsn)
        else:
            put(f"{prefix}_URL", server.url)  # type: ignore[attr-defined]
        put(f"{prefix}_PORT", server.port)
        put(f"{prefix}_PID", server.pid)
        put(f"{prefix}_DIR", server.dir)
        put(f"{prefix}_LOG", server.log_path)
    if owner_pid:
        put("COGNIS_LOCAL_SERVERS_PID", owner_pid)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, path)


def _read_env(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, raw = line.partition("=")
        parts = shlex.split(raw)
        values[key.strip()] = parts[0] if parts else ""
    return values


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is not alive for our purposes.
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def _pid_belongs_to(pid: int, directory: str) -> bool:
    """Guard against pid reuse: our servers run with their cwd inside their own temp directory."""
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return False
    return cwd == directory or cwd.startswith(directory.rstrip("/") + "/")


def _stop_pid(kind: str, pid: int, directory: str, timeout: float = 60.0) -> None:
    if not _pid_alive(pid):
        return
    if directory and not _pid_belongs_to(pid, directory):
        _log(f"{kind}: pid {pid} does not run in {directory}; not touching it")
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, _KINDS[kind][1])
    deadline = time.monotonic() + timeout
    while _pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)  # the servers lead their own process group


def cmd_up(args: argparse.Namespace) -> int:
    wanted = [k for k, flag in (("postgres", args.pg), ("redis", args.redis), ("opensearch", args.opensearch)) if flag]
    if not wanted:
        wanted = ["postgres", "redis", "opensearch"]
    env_file = Path(args.env_file).resolve()
    if env_file.exists():
        old = _read_env(env_file)
        live = [
            k
            for k in _KINDS
            if old.get(f"{_KINDS[k][0]}_PID", "").isdigit() and _pid_alive(int(old[f"{_KINDS[k][0]}_PID"]))
        ]
        if live:
            _log(f"{env_file} already describes running servers ({', '.join(live)}): run `down` first")
            return 1
    servers: dict[str, LocalServer] = {}
    common = {"base_dir": args.base_dir}
    try:
        for kind in wanted:
            t0 = time.monotonic()
            if kind == "postgres":
                server: LocalServer = PostgresServer(args.pg_port, **common)
            elif kind == "redis":
                server = RedisServer(args.redis_port, **common)
            else:
                server = OpenSearchServer(args.opensearch_port, heap=args.opensearch_heap, **common)
            servers[kind] = server
            server.start()
            _log(f"{kind} ready in {time.monotonic() - t0:.1f}s on port {server.port} (pid {server.pid})")
    except ServerError as e:
        _log(f"failed: {e}")
        for s in servers.values():
            s.stop()
        return 1

    _write_env(env_file, servers, None if args.detach else os.getpid())
    print(env_file.read_text(), end="")
    if args.detach:
        for s in servers.values():
            s.detach()
        _log(f"detached; stop with: python -m cognis_dev.local_servers down --env-file {env_file}")
        return 0

    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    _log("running; Ctrl-C (or `down`) stops them")
    try:
        while not stop.is_set():
            for kind, s in servers.items():
                if not s.running:
                    _log(f"{kind} exited unexpectedly; log tail:\n{s.log_tail(20)}")
                    stop.set()
            stop.wait(1.0)
    finally:
        for kind, s in reversed(list(servers.items())):
            s.stop()
            _log(f"{kind} stopped")
        with contextlib.suppress(FileNotFoundError):
            env_file.unlink()
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    env_file = Path(args.env_file).resolve()
    if not env_file.exists():
        _log(f"{env_file} does not exist: nothing to stop")
        return 0
    values = _read_env(env_file)
    owner = values.get("COGNIS_LOCAL_SERVERS_PID", "")
    if owner.isdigit() and int(owner) != os.getpid() and _pid_alive(int(owner)):
        # A foreground `up`: ask it to stop its servers, then double-check below.
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(owner), signal.SIGTERM)
        deadline = time.monotonic() + 90
        while _pid_alive(int(owner)) and time.monotonic() < deadline:
            time.sleep(0.2)
    for kind, (prefix, _sig) in _KINDS.items():
        pid, directory = values.get(f"{prefix}_PID", ""), values.get(f"{prefix}_DIR", "")
        if pid.isdigit():
            _stop_pid(kind, int(pid), directory)
        if directory and Path(directory).name.startswith("cognis-") and Path(directory).is_dir():
            shutil.rmtree(directory, ignore_errors=True)
        if pid or directory:
            _log(f"{kind} stopped")
    with contextlib.suppress(FileNotFoundError):
        env_file.unlink()
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    cp = build_opensearch_node(force=args.force)
    _log(f"OpenSearch launcher ready in {time.monotonic() - t0:.1f}s; classpath: {cp}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cognis_dev.local_servers",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start servers and write an env file")
    up.add_argument("--pg", "--postgres", dest="pg", action="store_true", help="PostgreSQL 18 + pgvector")
    up.add_argument("--redis", action="store_true", help="Redis")
    up.add_argument("--opensearch", action="store_true", help="OpenSearch 2.19 + k-NN")
    up.add_argument("--env-file", required=True)
    up.add_argument("--detach", action="store_true", help="return once ready and leave the servers running")
    up.add_argument("--base-dir", default=None, help="parent of the temporary server directories")
    up.add_argument("--pg-port", type=int, default=None)
    up.add_argument("--redis-port", type=int, default=None)
    up.add_argument("--opensearch-port", type=int, default=None)
    up.add_argument("--opensearch-heap", default=None, help="JVM heap, e.g. 512m (default) or 1g")
    up.set_defaults(func=cmd_up)
    down = sub.add_parser("down", help="stop the servers described by an env file")
    down.add_argument("--env-file", required=True)
    down.set_defaults(func=cmd_down)
    build = sub.add_parser("build-opensearch", help="mvn -q -B package in scripts/opensearch-node if stale")
    build.add_argument("--force", action="store_true")
    build.set_defaults(func=cmd_build)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except ServerError as e:
        _log(str(e))
        return 1


if __name__ == "__main__":
    sys.exit(main())
