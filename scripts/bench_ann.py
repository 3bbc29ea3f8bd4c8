"""Approximate nearest-neighbour libraries for the prefix stage, measured on one user's N memories (issue 23).

The vector stage shortlists ``--shortlist`` candidates by the prefix vector (128 of 384 dimensions,
inner product of unit vectors) and rescores them with the full vectors. Above some size an exact
prefix scan stops being cheap; this script measures, for each candidate index over the prefix
vectors, the build time, the CPU time of a search (shortlist + the full-vector rescoring), its
resident memory and the recall@10 of the final top 10 against the exact scan's top 10 (the same
two stages with an exact prefix scan), on the synthetic vectors of ``bench_common.SyntheticVectors``
(real all-MiniLM-L6-v2 embeddings of a synthetic vocabulary, mixed with seeded noise) and real
query embeddings of synthetic questions.

Candidates: ``exact`` (numpy), ``usearch`` (HNSW, float32 and int8 vectors), ``faiss-hnsw``
(``IndexHNSWFlat``, inner product) and ``faiss-ivf`` (``IndexIVFFlat``), ``hnswlib`` when it is
installed (it has no wheel for this platform, so it is measured only where it was built), and
``runtime``: the index the embedded store builds (``stores/ann_index.py``). Each is skipped when
its library is missing.

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/bench_ann.py --n 200000
    HF_HUB_OFFLINE=1 .venv/bin/python scripts/bench_ann.py --n 1000000 --candidates exact,usearch

The last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from cognis_dev import bench_common as bc


def _rescore(full: np.ndarray, q: np.ndarray, cand: np.ndarray, k: int) -> list[int]:
    cand = cand[cand >= 0]
    s = full[cand] @ q
    top = np.argsort(-s, kind="stable")[:k]
    return [int(c) for c in cand[top]]


def _exact_short(short: np.ndarray, qs: np.ndarray, shortlist: int) -> np.ndarray:
    s = short @ qs
    return np.argpartition(-s, shortlist - 1)[:shortlist]


class Candidate:
    """One index over the prefix vectors: ``build`` then ``shortlist``."""

    name = ""

    def build(self, short: np.ndarray, threads: int) -> None: ...

    def shortlist(self, qs: np.ndarray, k: int) -> np.ndarray: ...


class Exact(Candidate):
    name = "exact"

    def build(self, short: np.ndarray, threads: int) -> None:
        self.short = short

    def shortlist(self, qs: np.ndarray, k: int) -> np.ndarray:
        return _exact_short(self.short, qs, k)


class USearch(Candidate):
    def __init__(self, dtype: str, connectivity: int, expansion_add: int, expansion_search: int) -> None:
        self.dtype, self.m, self.ea, self.es = dtype, connectivity, expansion_add, expansion_search
        self.name = f"usearch-{dtype}-M{connectivity}-ef{expansion_search}"

    def build(self, short: np.ndarray, threads: int) -> None:
        from usearch.index import Index

        self.index = Index(
            ndim=short.shape[1], metric="ip", dtype=self.dtype, connectivity=self.m,
            expansion_add=self.ea, expansion_search=self.es,
        )  # fmt: skip
        self.index.add(np.arange(short.shape[0], dtype=np.uint64), short, threads=threads)

    def shortlist(self, qs: np.ndarray, k: int) -> np.ndarray:
        return self.index.search(qs, k, threads=1).keys.astype(np.int64)


class FaissHNSW(Candidate):
    def __init__(self, m: int, ef_construction: int, ef_search: int) -> None:
        self.m, self.efc, self.efs = m, ef_construction, ef_search
        self.name = f"faiss-hnsw-M{m}-ef{ef_search}"

    def build(self, short: np.ndarray, threads: int) -> None:
        import faiss

        faiss.omp_set_num_threads(threads)
        self.index = faiss.IndexHNSWFlat(short.shape[1], self.m, faiss.METRIC_INNER_PRODUCT)
        self.index.hnsw.efConstruction = self.efc
        self.index.add(short)
        self.index.hnsw.efSearch = self.efs
        faiss.omp_set_num_threads(1)

    def shortlist(self, qs: np.ndarray, k: int) -> np.ndarray:
        return self.index.search(qs[None, :], k)[1][0]


class FaissIVF(Candidate):
    def __init__(self, nlist: int, nprobe: int) -> None:
        self.nlist, self.nprobe = nlist, nprobe
        self.name = f"faiss-ivf{nlist}-probe{nprobe}"

    def build(self, short: np.ndarray, threads: int) -> None:
        import faiss

        faiss.omp_set_num_threads(threads)
        q = faiss.IndexFlatIP(short.shape[1])
        self.index = faiss.IndexIVFFlat(q, short.shape[1], self.nlist, faiss.METRIC_INNER_PRODUCT)
        rng = np.random.default_rng(0)
        sample = short[rng.choice(short.shape[0], min(short.shape[0], 50 * self.nlist), replace=False)]
        self.index.train(sample)
        self.index.add(short)
        self.index.nprobe = self.nprobe
        faiss.omp_set_num_threads(1)

    def shortlist(self, qs: np.ndarray, k: int) -> np.ndarray:
        return self.index.search(qs[None, :], k)[1][0]


class Hnswlib(Candidate):
    def __init__(self, m: int, ef_construction: int, ef_search: int) -> None:
        self.m, self.efc, self.efs = m, ef_construction, ef_search
        self.name = f"hnswlib-M{m}-ef{ef_search}"

    def build(self, short: np.ndarray, threads: int) -> None:
        import hnswlib

        self.index = hnswlib.Index(space="ip", dim=short.shape[1])
        self.index.init_index(max_elements=short.shape[0], ef_construction=self.efc, M=self.m)
        self.index.add_items(short, np.arange(short.shape[0]), num_threads=threads)
        self.index.set_ef(self.efs)

    def shortlist(self, qs: np.ndarray, k: int) -> np.ndarray:
        return self.index.knn_query(qs[None, :], k=k, num_threads=1)[0][0].astype(np.int64)


class Runtime(Candidate):
    """What the embedded store builds (``stores/ann_index.py``), searched as the store searches it."""

    name = "runtime (faiss HNSW, M16, efC128, ef1024)"

    def build(self, short: np.ndarray, threads: int) -> None:
        from cognis_memory.stores.ann_index import build_prefix_ann

        index = build_prefix_ann(np.arange(short.shape[0], dtype=np.int64), short, threads=threads)
        assert index is not None, "faiss is not installed"
        self.index = index

    def shortlist(self, qs: np.ndarray, k: int) -> np.ndarray:
        return self.index.search(qs, k)


def candidates(names: list[str], shortlist: int) -> list[Candidate]:
    ef = max(shortlist, 64)
    table: dict[str, list[Candidate]] = {
        "exact": [Exact()],
        "usearch": [USearch("f32", 16, 128, ef), USearch("i8", 16, 128, ef)],
        "faiss-hnsw": [FaissHNSW(16, 128, ef)],
        "faiss-ivf": [FaissIVF(1024, 16)],
        "hnswlib": [Hnswlib(16, 128, ef)],
        "runtime": [Runtime()],
    }
    libraries = {
        "usearch": "usearch",
        "faiss-hnsw": "faiss",
        "faiss-ivf": "faiss",
        "hnswlib": "hnswlib",
        "runtime": "faiss",
    }
    out: list[Candidate] = []
    for n in names:
        if n in libraries:
            try:
                importlib.import_module(libraries[n])
            except ImportError:
                print(f"{n}: library not installed, skipped", file=sys.stderr)
                continue
        out.extend(table[n])
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    from cognis_memory.config import Settings
    from cognis_memory.encoding.encoder import normalise_rows
    from cognis_memory.wiring import build_embedder

    embedder = build_embedder(Settings())
    synth = bc.SyntheticVectors(embedder, vocab=args.vocab)
    d = args.dim_short
    full = np.empty((args.n, embedder.dim), dtype=np.float32)
    for start in range(0, args.n, 100_000):
        _, raw = synth.batch(start, min(100_000, args.n - start))
        full[start : start + raw.shape[0]] = normalise_rows(raw)
    short = normalise_rows(full[:, :d]).astype(np.float32)
    queries = bc.synthetic_queries(args.queries, seed=3)
    qfull = normalise_rows(embedder.embed(queries)).astype(np.float32)
    qshort = normalise_rows(qfull[:, :d]).astype(np.float32)
    exact_top = [
        _rescore(full, qf, _exact_short(short, qs, args.shortlist), 10) for qf, qs in zip(qfull, qshort, strict=True)
    ]
    rows = []
    for c in candidates(args.candidates.split(","), args.shortlist):
        gc.collect()
        rss0 = bc.rss_mib()
        t0, c0 = time.perf_counter(), time.process_time()
        c.build(short, args.threads)
        build_s, build_cpu = time.perf_counter() - t0, time.process_time() - c0
        rss = bc.rss_mib() - rss0
        cpu, recall = [], []
        for qf, qs, ex in zip(qfull, qshort, exact_top, strict=True):
            c0 = time.process_time()
            top = _rescore(full, qf, c.shortlist(qs, args.shortlist), 10)
            cpu.append((time.process_time() - c0) * 1000)
            recall.append(len(set(top) & set(ex)) / 10)
        row = {"candidate": c.name, "n": args.n, "build_s": round(build_s, 1), "build_cpu_s": round(build_cpu, 1),
               "index_mib": round(rss, 1), **bc.latency_summary(cpu, prefix="cpu_"),
               "recall@10": round(float(np.mean(recall)), 4)}  # fmt: skip
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
        del c
    table = bc.fmt_table(
        ["candidate", "N", "build s", "build CPU s", "index MiB", "search CPU p50 ms", "p95", "recall@10 vs exact"],
        [[r["candidate"], r["n"], r["build_s"], r["build_cpu_s"], r["index_mib"], r["cpu_p50_ms"], r["cpu_p95_ms"],
          r["recall@10"]] for r in rows],
    )  # fmt: skip
    print(table)
    out = Path(args.out)
    bc.write_json(out / f"ann-{args.n}.json", {"benchmark": "ann", "machine": bc.machine_info(), "rows": rows,
                                              "table_markdown": table})  # fmt: skip
    return {"out": str(out / f"ann-{args.n}.json"), "rows": rows}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=200_000, help="memories of the one user")
    p.add_argument("--candidates", default="exact,usearch,faiss-hnsw,faiss-ivf,hnswlib,runtime")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--shortlist", type=int, default=200)
    p.add_argument("--dim-short", type=int, default=128)
    p.add_argument("--threads", type=int, default=2, help="threads for building an index")
    p.add_argument("--vocab", type=int, default=3000)
    p.add_argument("--out", default=str(bc.REPO / "bench-results"))
    args = p.parse_args(argv)
    print(json.dumps(run(args), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
