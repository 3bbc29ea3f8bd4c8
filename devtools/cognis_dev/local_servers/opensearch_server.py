"""OpenSearch 2.19 (+ k-NN, lucene engine) in a plain JVM, launched from ``scripts/opensearch-node``.

The launcher (``dev.cognis.opensearch.LocalNode``) is built with ``mvn -q -B package``, which puts
the Maven Central jars in ``target/lib`` and the unpacked k-NN plugin zip in ``target/knn``. The
build runs only when ``target/`` is missing or older than the POM or the Java sources.

No native k-NN engine (faiss, nmslib) is available: every ``knn_vector`` mapping must use
``"engine": "lucene"``. Indices get 0 replicas by default (``cluster.default_number_of_replicas``).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ._base import LocalServer, ServerStartError, ServerUnavailable, free_port

__all__ = ["OpenSearchServer", "build_opensearch_node", "find_java", "NODE_DIR"]

NODE_DIR = Path(__file__).resolve().parents[3] / "scripts" / "opensearch-node"  # devtools/ is installed editable
MAIN_CLASS = "dev.cognis.opensearch.LocalNode"
_STAMP = ".cognis-build-stamp"
JAVA_HINT = "install a JDK 17: apt-get install -y openjdk-17-jdk-headless (or set JAVA_HOME)"
MAVEN_HINT = "install Maven: apt-get install -y maven"


def find_java() -> Path:
    """``$COGNIS_JAVA``, ``$JAVA_HOME/bin/java``, the Debian JDK 17, or ``java`` on PATH (must be >= 17)."""
    candidates = [
        os.environ.get("COGNIS_JAVA"),
        os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else None,
        "/usr/lib/jvm/java-17-openjdk-amd64/bin/java",
        shutil.which("java"),
    ]
    for c in candidates:
        if not c or not Path(c).is_file():
            continue
        try:
            out = subprocess.run([c, "-version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        m = re.search(rb'version "(\d+)', out)
        if m and int(m.group(1)) >= 17:
            return Path(c)
    raise ServerUnavailable(f"no Java >= 17 found: {JAVA_HINT}")


def _sources(node_dir: Path) -> list[Path]:
    files = [node_dir / "pom.xml"]
    src = node_dir / "src"
    if src.is_dir():
        files += [p for p in src.rglob("*") if p.is_file()]
    return files


def _build_is_current(node_dir: Path) -> bool:
    """target/ holds a complete build that is newer than pom.xml and every file under src/."""
    target = node_dir / "target"
    if not (target / "classes" / "dev" / "cognis" / "opensearch" / "LocalNode.class").exists():
        return False
    if not list((target / "lib").glob("opensearch-2.*.jar")) or not list((target / "knn").glob("opensearch-knn-*.jar")):
        return False
    # Our stamp after a build run from here; else the jar that `mvn package` writes (a build run by hand
    # or by CI). A failed copy/unpack step is caught by the checks above.
    marker = target / _STAMP
    if not marker.exists():
        jars = list(target.glob("opensearch-node-*.jar"))
        if not jars:
            return False
        marker = jars[0]
    built = marker.stat().st_mtime
    return all(p.stat().st_mtime <= built for p in _sources(node_dir))


def classpath(node_dir: Path = NODE_DIR) -> str:
    target = node_dir / "target"
    return os.pathsep.join([str(target / "classes"), str(target / "lib" / "*"), str(target / "knn" / "*")])


def build_opensearch_node(node_dir: Path = NODE_DIR, *, force: bool = False, timeout: float = 1200) -> str:
    """Run ``mvn -q -B package`` in ``node_dir`` if ``target/`` is missing or stale; return the classpath.

    A file lock serialises concurrent callers (e.g. pytest-xdist workers).
    """
    node_dir = Path(node_dir).resolve()
    if not (node_dir / "pom.xml").is_file():
        raise ServerUnavailable(f"{node_dir}/pom.xml not found")
    if not force and _build_is_current(node_dir):
        return classpath(node_dir)
    mvn = os.environ.get("COGNIS_MVN") or shutil.which("mvn")
    if not mvn:
        raise ServerUnavailable(f"the OpenSearch launcher is not built and mvn is missing: {MAVEN_HINT}")
    java = find_java()
    digest = hashlib.sha256(str(node_dir).encode()).hexdigest()[:12]
    with open(f"/tmp/cognis-opensearch-node-{digest}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not force and _build_is_current(node_dir):
            return classpath(node_dir)
        env = dict(os.environ)
        env.setdefault("JAVA_HOME", str(java.resolve().parent.parent))
        started = time.monotonic()
        try:
            res = subprocess.run(
                [mvn, "-q", "-B", "package"],
                cwd=str(node_dir),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as e:
            raise ServerStartError(f"mvn -q -B package in {node_dir} timed out after {timeout}s") from e
        if res.returncode != 0:
            out = res.stdout.decode("utf-8", "replace")[-8000:]
            raise ServerStartError(f"mvn -q -B package failed in {node_dir} (exit {res.returncode}):\n{out}")
        (node_dir / "target" / _STAMP).write_text(f"built in {time.monotonic() - started:.1f}s\n")
    if not _build_is_current(node_dir):
        raise ServerStartError(f"mvn package in {node_dir} finished but target/ is incomplete")
    return classpath(node_dir)


class OpenSearchServer(LocalServer):
    """A throw-away single-node OpenSearch 2.19 with k-NN (lucene engine) on 127.0.0.1.

    Args:
        port: HTTP port (default: a free one); ``transport_port`` likewise. Both kept across ``restart()``.
        heap: JVM heap, used for -Xms and -Xmx (default ``$COGNIS_OPENSEARCH_HEAP`` or ``512m``).
        settings: extra node settings, passed as ``-Ekey=value``.
        jvm_options: extra JVM flags.
        build: build the launcher with Maven when ``target/`` is missing or stale (default True).
        node_dir: the Maven project (default ``scripts/opensearch-node``).
        base_dir, keep_dir, start_timeout (default 180 s), die_with_parent: see :class:`LocalServer`.

    ``url`` is ``http://127.0.0.1:PORT`` (no TLS, no authentication).
    """

    name = "opensearch"
    _stop_timeout = 60.0

    def __init__(
        self,
        port: int | None = None,
        *,
        transport_port: int | None = None,
        heap: str | None = None,
        settings: Mapping[str, Any] | None = None,
        jvm_options: Sequence[str] = (),
        build: bool = True,
        node_dir: str | os.PathLike[str] | None = None,
        base_dir: str | os.PathLike[str] | None = None,
        keep_dir: bool = False,
        start_timeout: float = 180.0,
        die_with_parent: bool = False,
    ) -> None:
        super().__init__(
            port, base_dir=base_dir, keep_dir=keep_dir, start_timeout=start_timeout, die_with_parent=die_with_parent
        )
        self._requested_transport_port = transport_port
        self.transport_port: int | None = transport_port
        self.heap = heap or os.environ.get("COGNIS_OPENSEARCH_HEAP") or "512m"
        self.settings = dict(settings or {})
        self.jvm_options = list(jvm_options)
        self.build = build
        self.node_dir = Path(node_dir).resolve() if node_dir else NODE_DIR
        self._java: Path | None = None
        self._classpath: str | None = None
        self.ready_seconds: float | None = None  # time from launch to ready, last start

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _allocate_ports(self) -> None:
        if self._port is None:
            self._port = free_port()
        if self._requested_transport_port is None:
            self.transport_port = free_port()
            while self.transport_port == self._port:
                self.transport_port = free_port()

    def _cleanup_dir(self) -> None:
        super()._cleanup_dir()
        if self.dir is None and self._requested_transport_port is None:
            self.transport_port = None

    def _prepare(self) -> None:
        self._java = find_java()
        if self.build:
            self._classpath = build_opensearch_node(self.node_dir)
        else:
            target = self.node_dir / "target"
            if not (target / "lib").is_dir() or not list((target / "knn").glob("opensearch-knn-*.jar")):
                raise ServerUnavailable(
                    f"the OpenSearch launcher is not built: cd {self.node_dir} && mvn -q -B package"
                )
            self._classpath = classpath(self.node_dir)
        assert self.dir is not None
        (self.dir / "home").mkdir()
        (self.dir / "tmp").mkdir()

    def _command(self) -> Sequence[str]:
        assert self.dir is not None and self._java is not None and self._classpath is not None
        cmd = [
            str(self._java),
            f"-Xms{self.heap}",
            f"-Xmx{self.heap}",
            "-Xss1m",
            "-Djava.awt.headless=true",
            "-Dfile.encoding=UTF-8",
            "-Djava.locale.providers=SPI,COMPAT",
            "-Djava.io.tmpdir=" + str(self.dir / "tmp"),
            "-Dlog4j.shutdownHookEnabled=false",
            "-Dlog4j2.disable.jmx=true",
            "-XX:-OmitStackTraceInFastThrow",
            *self.jvm_options,
            "-cp",
            self._classpath,
            MAIN_CLASS,
            "--home",
            str(self.dir / "home"),
            "--http-port",
            str(self.port),
            "--transport-port",
            str(self.transport_port),
        ]
        for key, value in self.settings.items():
            cmd.append(f"-E{key}={value}")
        return cmd

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        for var in ("JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "OPENSEARCH_JAVA_OPTS"):
            env.pop(var, None)
        return env

    # ----------------------------------------------------------------------------- HTTP
    def request(self, method: str, path: str, body: Any = None, timeout: float = 30.0) -> Any:
        """A minimal JSON HTTP call (stdlib only); raises urllib.error.HTTPError on 4xx/5xx."""
        data = None
        headers = {"Accept": "application/json"}
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def version(self) -> str:
        return str(self.request("GET", "/")["version"]["number"])

    def _wait_ready(self, deadline: float) -> None:
        started = time.monotonic()
        answered = False
        while True:
            self._check_alive()
            try:
                if not answered:
                    info = self.request("GET", "/", timeout=2)
                    answered = bool(info and info.get("version"))
                if answered:
                    # The launcher persists cluster.default_number_of_replicas=0 right after start: wait
                    # for it so that no test creates an index with a replica that can never be assigned.
                    flat = self.request("GET", "/_cluster/settings?flat_settings=true", timeout=2)
                    if flat.get("persistent", {}).get("cluster.default_number_of_replicas") == "0":
                        self.request("GET", "/_cluster/health?wait_for_status=yellow&timeout=30s", timeout=35)
                        self.ready_seconds = time.monotonic() - started
                        return
            except (urllib.error.URLError, OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise self._timeout(f"GET {self.url}/ and the replica default were not both ready")
            time.sleep(0.2)
