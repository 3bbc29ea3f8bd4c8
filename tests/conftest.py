"""Shared fixtures: offline models, real local servers, and an embedded-store service."""

from __future__ import annotations

import io
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest
import pytest_asyncio
from cognis_dev.fixtures import *  # noqa: F403 - session fixtures for PostgreSQL, Redis, OpenSearch, local LLMs


@pytest.fixture(scope="session")
def embedder():
    """The real offline default embedder: all-MiniLM-L6-v2 on ONNX Runtime, as the core install ships it."""
    from cognis_memory.config import Settings
    from cognis_memory.wiring import build_embedder

    return build_embedder(Settings())


class CapturedTelemetry:
    def __init__(self) -> None:
        from cognis_memory.telemetry.emitter import Telemetry

        self.logs, self.metrics = io.StringIO(), io.StringIO()
        self.telemetry = Telemetry(log_stream=self.logs, metrics_stream=self.metrics)

    def log_lines(self) -> list[dict]:
        import json

        return [json.loads(line) for line in self.logs.getvalue().splitlines() if line.strip()]

    def metric_blobs(self) -> list[dict]:
        import json

        return [json.loads(line) for line in self.metrics.getvalue().splitlines() if line.strip()]


@pytest.fixture
def no_cognis_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No COGNIS_* variable of the calling environment reaches the test's Settings."""
    for name in list(os.environ):
        if name.startswith("COGNIS_"):
            monkeypatch.delenv(name)


@pytest.fixture
def captured_telemetry() -> CapturedTelemetry:
    return CapturedTelemetry()


@pytest_asyncio.fixture
async def make_service(tmp_path, embedder, captured_telemetry):
    """Factory: an embedded-store MemoryService in tmp_path (started; closed after the test)."""
    from cognis_memory.config import Settings
    from cognis_memory.service import MemoryService
    from cognis_memory.stores.embedded import EmbeddedStore

    created: list[MemoryService] = []

    async def _make(*, llm=None, reranker=None, path=None, start=True, **settings_overrides):
        settings = Settings(data_dir=tmp_path, run_worker=False, **settings_overrides)
        store = EmbeddedStore(
            path or settings.embedded.resolved_sqlite_path, dim=embedder.dim, dim_short=settings.encoder.dim_short
        )
        svc = MemoryService(
            settings, store=store, embedder=embedder, llm=llm, reranker=reranker, telemetry=captured_telemetry.telemetry
        )
        if start:
            await svc.start()
        created.append(svc)
        return svc

    yield _make
    for svc in created:
        await svc.close()


# -- the integration marker, applied automatically --------------------------------------------------
#: Fixtures that start a real server (database, cache, search engine, or our own HTTP server).
SERVER_FIXTURES = frozenset(
    {"postgres_server", "redis_server", "opensearch_server", "any_store", "live_server", "real_server"}
    | {"local_llm", "local_llama_server"}
)
#: Fixtures that serve a real local LLM (docs/local-llm.md): their tests are also marked ``real_llm``.
LLM_FIXTURES = frozenset({"local_llm", "local_llama_server"})
#: Calls that start a server or a server process; a test module that makes one is an integration module.
SERVER_CALLS = ("start_or_skip(", "serve_in_thread(", "ServeProcess(", "subprocess.Popen(", "open_store(")
_module_starts_servers: dict[str, bool] = {}


def _starts_servers(path) -> bool:
    key = str(path)
    if key not in _module_starts_servers:
        text = path.read_text(encoding="utf-8") if path.suffix == ".py" else ""
        _module_starts_servers[key] = any(call in text for call in SERVER_CALLS)
    return _module_starts_servers[key]


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "real_llm: talks to a real local LLM server (docs/local-llm.md)")


def pytest_collection_modifyitems(config, items) -> None:
    """Mark every test that uses a server fixture or whose module starts servers as ``integration``,
    so that ``-m "not integration"`` runs only what needs nothing but Python; and the ones that use a
    local LLM as ``real_llm`` too (``-m "not real_llm"`` leaves them out)."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if SERVER_FIXTURES.intersection(fixtures) or _starts_servers(item.path):
            item.add_marker(pytest.mark.integration)
        if LLM_FIXTURES.intersection(fixtures):
            item.add_marker(pytest.mark.real_llm)
