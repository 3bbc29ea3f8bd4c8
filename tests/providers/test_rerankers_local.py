"""LocalCrossEncoderReranker against a real (tiny, randomly initialised) cross-encoder checkpoint."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from cognis_memory.errors import DependencyUnavailableError
from cognis_memory.providers.base import Reranker
from cognis_memory.providers.rerankers import LocalCrossEncoderReranker

QUERY = "where does alice work now"
DOCS = [
    "Alice works at a bakery in Lyon.",
    "Bob likes hiking.",
    "Alice moved to Berlin last spring and now works as a nurse at the Charite hospital.",
    "ok",
    "The weather was cold.",
]


@pytest.fixture(scope="module")
def reranker(tiny_cross_encoder_dir: Path) -> LocalCrossEncoderReranker:
    return LocalCrossEncoderReranker(tiny_cross_encoder_dir, batch_size=2, max_length=64)


async def test_is_a_reranker_with_one_score_per_document(reranker: LocalCrossEncoderReranker) -> None:
    assert isinstance(reranker, Reranker)
    assert reranker.name == f"local:{reranker.path.name}"
    scores = await reranker.rerank(QUERY, DOCS)
    assert isinstance(scores, list) and len(scores) == len(DOCS)
    assert all(type(s) is float for s in scores)
    # one-label checkpoints are passed through a sigmoid
    assert all(0.0 <= s <= 1.0 for s in scores)
    # the (random) model does tell documents apart: otherwise the order checks below prove nothing
    assert len({round(s, 6) for s in scores}) == len(DOCS)


async def test_empty_documents(reranker: LocalCrossEncoderReranker) -> None:
    assert await reranker.rerank(QUERY, []) == []


async def test_scores_are_deterministic(reranker: LocalCrossEncoderReranker) -> None:
    first = await reranker.rerank(QUERY, DOCS)
    second = await reranker.rerank(QUERY, DOCS)
    assert first == second


async def test_score_of_a_pair_does_not_depend_on_batch_position(reranker: LocalCrossEncoderReranker) -> None:
    together = np.array(await reranker.rerank(QUERY, DOCS))
    alone = np.array([(await reranker.rerank(QUERY, [doc]))[0] for doc in DOCS])
    reversed_ = np.array(await reranker.rerank(QUERY, list(reversed(DOCS))))[::-1]
    np.testing.assert_allclose(together, alone, atol=1e-5)
    np.testing.assert_allclose(together, reversed_, atol=1e-5)


async def test_the_query_matters(reranker: LocalCrossEncoderReranker) -> None:
    a = await reranker.rerank(QUERY, DOCS[:2])
    b = await reranker.rerank("completely different question about dinosaurs", DOCS[:2])
    assert a != b


async def test_long_documents_are_truncated_to_max_length(reranker: LocalCrossEncoderReranker) -> None:
    # the checkpoint has 128 positions: without truncation to max_length=64 this would fail
    long_doc = " ".join(["memory"] * 2000)
    scores = await reranker.rerank(QUERY, [long_doc, DOCS[0]])
    assert len(scores) == 2


async def test_concurrent_calls_give_the_sequential_answers(reranker: LocalCrossEncoderReranker) -> None:
    sequential = [await reranker.rerank(QUERY, DOCS[i:]) for i in range(len(DOCS))]
    concurrent = await asyncio.gather(*(reranker.rerank(QUERY, DOCS[i:]) for i in range(len(DOCS))))
    for seq, con in zip(sequential, concurrent, strict=True):
        np.testing.assert_allclose(seq, con, atol=1e-5)


class _SlowModel:
    """Stands in for the CrossEncoder to observe threading: sleeps and tracks overlap."""

    num_labels = 1

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.active = 0
        self.max_active = 0
        self._guard = threading.Lock()

    def predict(self, pairs: list[tuple[str, str]], **_: object) -> np.ndarray:
        with self._guard:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        time.sleep(self.delay)
        with self._guard:
            self.active -= 1
        return np.arange(len(pairs), dtype=np.float32)


async def test_prediction_runs_off_the_event_loop_one_at_a_time(tiny_cross_encoder_dir: Path) -> None:
    reranker = LocalCrossEncoderReranker(tiny_cross_encoder_dir, max_length=64)
    slow = _SlowModel(0.15)
    reranker._model = slow  # type: ignore[assignment]
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    try:
        results = await asyncio.gather(reranker.rerank("q", ["a", "b"]), reranker.rerank("q", ["c"]))
    finally:
        task.cancel()
    assert results == [[0.0, 1.0], [0.0]]
    assert slow.max_active == 1  # the lock serialises forward passes
    assert ticks >= 10  # the loop kept running during ~0.3 s of prediction


async def test_model_failure_is_dependency_unavailable(tiny_cross_encoder_dir: Path) -> None:
    reranker = LocalCrossEncoderReranker(tiny_cross_encoder_dir, max_length=64)

    class Broken:
        def predict(self, *_: object, **__: object) -> np.ndarray:
            raise RuntimeError("CUDA out of memory")

    reranker._model = Broken()  # type: ignore[assignment]
    with pytest.raises(DependencyUnavailableError) as info:
        await reranker.rerank("q", ["a"])
    assert info.value.dependency == "reranker"
    assert "out of memory" in str(info.value)


def test_missing_directory_names_the_setting(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="reranker_path") as info:
        LocalCrossEncoderReranker(tmp_path / "nope")
    assert str(tmp_path / "nope") in str(info.value)


def test_directory_without_a_model_names_the_setting(tmp_path: Path) -> None:
    (tmp_path / "readme.txt").write_text("not a model")
    with pytest.raises(ValueError, match="reranker_path"):
        LocalCrossEncoderReranker(tmp_path)


def test_multi_label_checkpoint_is_rejected(tmp_path: Path, tiny_cross_encoder_dir: Path) -> None:
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    config = BertConfig.from_pretrained(tiny_cross_encoder_dir)
    config.num_labels = 3
    BertForSequenceClassification(config).save_pretrained(tmp_path)
    AutoTokenizer.from_pretrained(tiny_cross_encoder_dir).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="3 labels"):
        LocalCrossEncoderReranker(tmp_path, max_length=64)
