"""A store remembers which embedding model's vectors it holds and will not open under another one.

Two models of the same width (all-MiniLM-L6-v2 and bge-small-en-v1.5, both 384-d) would otherwise
mix silently: the store would accept the other model's query vectors and answer nonsense."""

from __future__ import annotations

import pytest

from cognis_memory.config import Settings
from cognis_memory.providers import default_model
from cognis_memory.service import MemoryService, MessageBody
from cognis_memory.stores.vector_space import VectorSpaceMismatchError

from .conftest import STORE_KINDS, open_store
from .helpers import reopen


@pytest.mark.parametrize("kind", STORE_KINDS)
async def test_a_store_refuses_to_open_under_another_embedding_model(kind, request, tmp_path, embedder) -> None:
    first = await open_store(kind, request, tmp_path, embedder.dim, vector_space="model-a")
    await first.store.close()
    same = reopen(first, embedder.dim, vector_space="model-a")
    await same.store.open()  # the recorded model: opens
    await same.store.close()
    other = reopen(first, embedder.dim, vector_space="model-b")
    with pytest.raises(VectorSpaceMismatchError, match=r"embedding_model: .*'model-a'.*'model-b'") as exc:
        await other.store.open()
    assert isinstance(exc.value, ValueError) and (exc.value.recorded, exc.value.configured) == ("model-a", "model-b")
    again = reopen(first, embedder.dim, vector_space="model-a")
    await again.store.open()  # the refused open recorded nothing
    await again.store.close()
    unchecked = reopen(first, embedder.dim)
    await unchecked.store.open()  # a store object without a vector space checks nothing
    await unchecked.store.close()


async def test_the_service_refuses_a_store_of_another_model_naming_the_setting(tmp_path) -> None:
    """Built from settings: the default model writes, then another model file on the same store is refused
    at start, before any request; the default model opens it again."""
    base = {"data_dir": tmp_path, "run_worker": False}
    svc = MemoryService.from_settings(Settings(**base))
    await svc.start()
    await svc.add_messages("acme", "dana", [MessageBody(content="I live in Porto.", speaker="user")])
    await svc.close()
    other = Settings(**base, embedder_path=default_model.onnx_file(), embedder_tokenizer=default_model.tokenizer_file())
    assert other.embedder.vector_space != Settings(**base).embedder.vector_space == "all-MiniLM-L6-v2"
    with pytest.raises(ValueError, match="embedding_model: .*'all-MiniLM-L6-v2'"):
        await MemoryService.from_settings(other).start()
    svc = MemoryService.from_settings(Settings(**base))
    await svc.start()
    try:
        assert (await svc.search("acme", "dana", "where do I live?")).hits
    finally:
        await svc.close()
