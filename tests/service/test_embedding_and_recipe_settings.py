"""Settings that adapt the service to another embedding model: a query instruction
(``embedding_query_prefix``) and retrieval knobs on top of every recipe (``recipe_overrides``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from pydantic import ValidationError

from cognis_memory.config import Settings
from cognis_memory.service import MemoryService, MessageBody
from cognis_memory.stores.embedded import EmbeddedStore

T, U = "acme", "dana"


class RecordingEmbedder:
    """The real embedder, remembering every text it was asked to embed."""

    def __init__(self, inner) -> None:
        self.inner, self.dim, self.name = inner, inner.dim, inner.name
        self.seen: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.seen.extend(texts)
        return self.inner.embed(texts)


async def _service(tmp_path, embedder, **settings) -> MemoryService:
    s = Settings(data_dir=tmp_path, run_worker=False, **settings)
    store = EmbeddedStore(s.embedded.resolved_sqlite_path, dim=embedder.dim, dim_short=s.encoder.dim_short)
    svc = MemoryService(s, store=store, embedder=embedder)
    await svc.start()
    return svc


async def test_the_query_instruction_goes_before_queries_and_never_before_messages(tmp_path, embedder) -> None:
    recording = RecordingEmbedder(embedder)
    svc = await _service(tmp_path, recording, embedding_query_prefix="query: ")
    try:
        await svc.add_messages(T, U, [MessageBody(content="I live in Porto, in a tiny flat.", speaker="user")])
        assert "user: I live in Porto, in a tiny flat." in recording.seen  # its search text: speaker, then content
        assert not any(t.startswith("query: ") for t in recording.seen)
        res = await svc.search(T, U, "where do I live?")
        assert res.hits and "Porto" in res.hits[0].memory.content
        assert recording.seen[-1] == "query: where do I live?"
        assert "where do I live?" not in recording.seen
        n = len(recording.seen)
        await svc.search(T, U, "where do I live?", recipe="rrf")
        assert len(recording.seen) == n  # the query cache holds the instructed query's vector
    finally:
        await svc.close()


async def test_recipe_overrides_apply_to_the_service_recipe_and_to_a_requested_one(tmp_path, embedder) -> None:
    """``use_vector: false`` on top of every recipe leaves keyword search alone: a paraphrase without a
    shared word is found by the plain service and not by the overridden one, whichever recipe is asked."""
    plain = await _service(tmp_path / "plain", embedder)
    keywords_only = await _service(tmp_path / "bm25", embedder, recipe_overrides={"use_vector": False})
    try:
        for svc in (plain, keywords_only):
            await svc.add_messages(T, U, [MessageBody(content="I adore felines of every kind.", speaker="user")])
        assert keywords_only.retrieval_config.use_vector is False
        assert keywords_only.recipe("rrf").use_vector is False and plain.recipe("rrf").use_vector is True
        for recipe in (None, "rrf"):
            assert (await plain.search(T, U, "cats", recipe=recipe)).hits
            assert not (await keywords_only.search(T, U, "cats", recipe=recipe)).hits
    finally:
        await plain.close()
        await keywords_only.close()


def test_recipe_overrides_are_read_from_the_environment_as_json(monkeypatch) -> None:
    monkeypatch.setenv("COGNIS_RECIPE_OVERRIDES", '{"state_similarity": 0.75, "context": false}')
    assert Settings().retrieval.recipe_overrides == {"state_similarity": 0.75, "context": False}


@pytest.mark.parametrize(
    ("overrides", "named"),
    [({"no_such_knob": 1}, "no_such_knob"), ({"state_similarity": 1.5}, "state_similarity"),
     ({"state_head": 1}, "state_head")],
)  # fmt: skip
def test_an_unknown_knob_or_a_value_out_of_range_stops_the_service_naming_it(overrides, named) -> None:
    with pytest.raises(ValidationError) as exc:
        Settings(recipe_overrides=overrides)
    assert "recipe_overrides" in str(exc.value) and named in str(exc.value)
