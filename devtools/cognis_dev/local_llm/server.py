""":class:`LocalLLMServer`: a real model behind an OpenAI-compatible HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..local_servers._base import LocalServer, ServerError
from .builds import build_llama_cpp_python, build_llama_server
from .cache import Log, log_stderr
from .models import CATALOGUE, SMALL_MODEL, fetch_model

__all__ = ["KINDS", "LocalLLMServer"]

#: The two servers: llama-cpp-python's ``llama_cpp.server`` (Python, FastAPI) and llama.cpp's ``llama-server`` (C++).
KINDS = ("llama-cpp-python", "llama-server")
DEFAULT_SEED = 1234


class LocalLLMServer(LocalServer):
    """A real GGUF model served over the OpenAI API on 127.0.0.1 (``kind`` picks the server).

    Args:
        model: a name from :data:`cognis_dev.local_llm.CATALOGUE` (default: the 0.5B model).
        kind: ``"llama-cpp-python"`` or ``"llama-server"``.
        port: TCP port (default: a free one).
        n_ctx: context length in tokens of one request (each slot's).
        parallel: requests answered side by side (``llama-server`` only: its ``--parallel`` slots, with
            ``n_ctx`` each; llama-cpp-python's server answers one at a time).
        threads: CPU threads for generation and prompt processing.
        seed: the sampling seed (fixed, so that runs repeat).
        extra_args: appended to the server's command line.
        omp_wait_policy: ``OMP_WAIT_POLICY`` of the server (both use ggml's OpenMP threads). ``"passive"``
            (default): idle threads sleep instead of spinning. On a 2-core machine that other processes
            also use, spinning threads starve each other: measured 1.2-2.5 tokens/s with 2 threads
            spinning against 10-12 passive (0.5B model, llama-server, load average 6-7). ``None``
            inherits the caller's environment (``$OMP_WAIT_POLICY`` also wins when set).
        base_dir, keep_dir, start_timeout, die_with_parent: see :class:`cognis_dev.local_servers.LocalServer`.

    ``start()`` first fetches the model and builds the server when they are not cached (that can take
    minutes the first time; ``start_timeout`` only counts from the launch), then waits until
    ``GET /v1/models`` answers 200. ``base_url`` ends in ``/v1``; send ``model`` as the request's model.
    """

    _stop_timeout = 15.0

    def __init__(
        self,
        model: str = SMALL_MODEL,
        kind: str = "llama-cpp-python",
        port: int | None = None,
        *,
        n_ctx: int = 4096,
        parallel: int = 1,
        threads: int = 2,
        seed: int = DEFAULT_SEED,
        extra_args: Sequence[str] = (),
        omp_wait_policy: str | None = "passive",
        base_dir: str | os.PathLike[str] | None = None,
        keep_dir: bool = False,
        start_timeout: float = 180.0,
        die_with_parent: bool = False,
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown server kind {kind!r}; known: {', '.join(KINDS)}")
        if parallel != 1 and kind != "llama-server":
            raise ValueError("parallel slots are a llama-server option")
        if model not in CATALOGUE:
            raise ValueError(f"unknown model {model!r}; known: {', '.join(sorted(CATALOGUE))}")
        super().__init__(
            port, base_dir=base_dir, keep_dir=keep_dir, start_timeout=start_timeout, die_with_parent=die_with_parent
        )
        self.name = kind  # the temp dir is /tmp/cognis-<kind>-XXXX, the log <kind>.log
        self.kind = kind
        self.model = model
        self.n_ctx, self.parallel = n_ctx, parallel
        self.threads = threads
        self.seed = seed
        self.extra_args = list(extra_args)
        self.omp_wait_policy = omp_wait_policy
        self.model_file: Path | None = None
        self.executable: Path | None = None
        self.ready_seconds: float | None = None

    # ------------------------------------------------------------------------------------------ urls
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, ``http://127.0.0.1:PORT/v1``."""
        return f"{self.url}/v1"

    # ------------------------------------------------------------------------------------------ life cycle
    def prepare_artifacts(self, log: Log = log_stderr) -> None:
        """Fetch the model and build the server if they are not cached yet (idempotent)."""
        self.model_file = fetch_model(self.model, log=log)
        if self.kind == "llama-cpp-python":
            self.executable = build_llama_cpp_python(log=log)
        else:
            self.executable = build_llama_server(log=log)

    def start(self) -> LocalLLMServer:
        if self.model_file is None or self.executable is None:
            self.prepare_artifacts()
        t0 = time.monotonic()
        super().start()
        self.ready_seconds = time.monotonic() - t0
        return self

    def __enter__(self) -> LocalLLMServer:
        return self.start()

    def command_line(self) -> list[str]:
        """The server's command line (after :meth:`prepare_artifacts`; the port must be known)."""
        assert self.model_file is not None and self.executable is not None
        if self.kind == "llama-cpp-python":
            cmd = [str(self.executable), "-m", "llama_cpp.server", "--model", str(self.model_file),
                   "--model_alias", self.model, "--host", "127.0.0.1", "--port", str(self.port),
                   "--n_ctx", str(self.n_ctx), "--n_threads", str(self.threads),
                   "--n_threads_batch", str(self.threads), "--seed", str(self.seed)]  # fmt: skip
        else:
            cmd = [str(self.executable), "--model", str(self.model_file), "--alias", self.model,
                   "--host", "127.0.0.1", "--port", str(self.port), "--ctx-size", str(self.n_ctx * self.parallel),
                   "--threads", str(self.threads), "--threads-batch", str(self.threads), "--seed", str(self.seed),
                   "--parallel", str(self.parallel), "--no-webui"]  # fmt: skip
        return cmd + self.extra_args

    def _command(self) -> Sequence[str]:
        return self.command_line()

    def _env(self) -> dict[str, str] | None:
        if self.omp_wait_policy is None or "OMP_WAIT_POLICY" in os.environ:
            return None  # inherit
        return {**os.environ, "OMP_WAIT_POLICY": self.omp_wait_policy}

    def _wait_ready(self, deadline: float) -> None:
        while True:
            self._check_alive()
            try:
                status, _ = self.request("GET", "/models", timeout=2)
                if status == 200:
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise self._timeout("GET /v1/models did not answer 200")
            time.sleep(0.2)

    # ------------------------------------------------------------------------------------------ requests
    def request(self, method: str, path: str, body: Any = None, *, timeout: float = 300) -> tuple[int, Any]:
        """One HTTP request to ``base_url + path``; returns (status, parsed JSON or text). HTTP errors are returned."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        text = raw.decode("utf-8", "replace")
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    def chat(self, messages: list[dict[str, Any]], **params: Any) -> dict[str, Any]:
        """``POST /v1/chat/completions`` (``model`` filled in); raises ServerError unless it answers 200."""
        status, body = self.request("POST", "/chat/completions", {"model": self.model, "messages": messages, **params})
        if status != 200 or not isinstance(body, dict):
            raise ServerError(f"{self.kind}: chat completion answered HTTP {status}: {str(body)[:500]}")
        return body

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<LocalLLMServer {self.kind} {self.model} port={self._port} {state}>"
