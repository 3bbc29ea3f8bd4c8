"""Fit a variance rotation for the two-stage vector search's prefix, and save it as .npy.

Models that were not trained Matryoshka-style (all-MiniLM-L6-v2 among them) spread their
signal over all dimensions, so the first ``embedding_dim_short`` dimensions are a weak
shortlist. An orthogonal rotation onto the principal axes of representative vectors
(:func:`cognis_memory.encoding.encoder.fit_variance_rotation`) puts the most variance in
the first dimensions; cosine similarity of the full vectors is unchanged.

Sample texts come from a text file (one per line), a JSON/JSONL file of messages
(``content`` or ``text`` fields), or the current memories of an embedded store. Use texts
like the ones the service will hold, and at least a few thousand of them.

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/fit_rotation.py --texts sample.jsonl --out rotation.npy
    HF_HUB_OFFLINE=1 .venv/bin/python scripts/fit_rotation.py --store .cognis/memory.db --out rotation.npy

Then set ``COGNIS_EMBEDDING_ROTATION_PATH=rotation.npy`` and re-import: stored vectors must
be produced with the same rotation as queries. The last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import sys
from pathlib import Path

import numpy as np
from cognis_dev import bench_common as bc  # noqa: F401 - sets the offline environment and the import path

from cognis_memory.config import Settings
from cognis_memory.encoding.encoder import fit_variance_rotation


def read_texts(path: Path) -> list[str]:
    raw = path.read_text(encoding="utf-8")
    if path.suffix in (".json", ".jsonl"):
        items = json.loads(raw) if path.suffix == ".json" else [json.loads(x) for x in raw.splitlines() if x.strip()]
        if isinstance(items, dict):
            items = items.get("messages", [])
        return [str(i.get("content") or i.get("text") or "") for i in items if isinstance(i, dict)]
    return [line.strip() for line in raw.splitlines() if line.strip()]


def store_vectors(db: Path, limit: int, seed: int) -> np.ndarray:
    """Full vectors of current memories of an embedded store (read-only)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT embedding FROM memories WHERE is_current = 1 AND embedding IS NOT NULL").fetchall()
    finally:
        conn.close()
    random.Random(seed).shuffle(rows)
    return np.stack([np.frombuffer(r[0], dtype=np.float32) for r in rows[:limit]])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--texts", type=Path, help="text file (one per line) or JSON/JSONL messages")
    src.add_argument(
        "--store", type=Path, help="an embedded store's SQLite file (its stored vectors must be unrotated)"
    )
    p.add_argument("--sample", type=int, default=20_000, help="at most this many texts or vectors")
    p.add_argument("--out", type=Path, required=True, help="where to write the .npy rotation")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    if args.texts:
        texts = [t for t in read_texts(args.texts) if t.strip()]
        random.Random(args.seed).shuffle(texts)
        texts = texts[: args.sample]
        if len(texts) < 100:
            raise SystemExit(f"--texts: {len(texts)} texts is too few to fit a rotation (use thousands)")
        from cognis_memory.wiring import build_embedder

        vectors = build_embedder(Settings()).embed(texts)
    else:
        vectors = store_vectors(args.store, args.sample, args.seed)
    rotation = fit_variance_rotation(vectors)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.save(args.out, rotation)
    centred = vectors - vectors.mean(axis=0)
    total = float((centred**2).sum())
    rotated = centred @ rotation
    share = {
        d: round(float((rotated[:, :d] ** 2).sum()) / total, 4) for d in (32, 64, 96, 128, 192) if d <= vectors.shape[1]
    }
    raw = {d: round(float((centred[:, :d] ** 2).sum()) / total, 4) for d in share}
    print(json.dumps({"out": str(args.out), "vectors": int(vectors.shape[0]), "dim": int(vectors.shape[1]),
                      "variance_in_prefix_rotated": share, "variance_in_prefix_raw": raw}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
