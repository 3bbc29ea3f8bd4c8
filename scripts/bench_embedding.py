"""The embedding path before and after (issue #14): ingest, import, search and quality, side by side in one run.

Each configuration runs in its own Python process, so each has its own imports and threads:

* ``main`` (``--baseline-ref``, default ``main``): the runtime of that git ref, checked out
  into a temporary worktree and put first on ``PYTHONPATH``; today's torch path;
* ``torch``: this runtime with ``COGNIS_EMBEDDER=sentence-transformers``;
* ``onnx``: this runtime with its defaults (ONNX Runtime, the default int8 model).

``speed`` (the default) runs the workloads of every configuration in turn, round by round
(``--rounds``), so slow phases of a shared machine hit all configurations alike, and prints
one table with the median of the rounds and each configuration's ratio to the first:

* *session ingest*: LoCoMo turns posted one session per ``add_messages`` call (one user per
  conversation, ``--conversations``), messages/s;
* *concurrent ingest*: the same with one task per conversation at once (requests batched
  together by the embedding queue), messages/s;
* *search*: the LoCoMo questions of those users (default recipe), p50/p95 ms; and the same
  questions again (repeated queries: the query cache);
* *import*: ``cognis-memory import`` of a ``--import-messages`` JSONL file (LoCoMo turns, one
  user per conversation and copy), a real CLI process, messages/s;
* *scale*: with ``--scale N``, searches on one user with N stored memories (synthetic vectors,
  real query embeddings), p50/p95 ms.

``quality`` runs LoCoMo evidence recall@10 (all conversations, default recipe, via
scripts/bench_locomo.py's loaders) and the LongMemEval dev set (turn recall@10 of the
``has_answer`` turns, session recall any@10, one user per question, ``question_date`` as now)
for each embedder given by ``--embedders`` (``name=path`` of an .onnx file, ``onnx`` for the
default, ``torch`` for sentence-transformers). ``models`` compares ONNX files with
sentence-transformers on LoCoMo turns: cosine, one-query latency, batch throughput, interleaved.

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/bench_embedding.py                      # speed, main vs torch vs onnx
    HF_HUB_OFFLINE=1 .venv/bin/python scripts/bench_embedding.py speed --rounds 1 --conversations 1 \
        --import-messages 500
    HF_HUB_OFFLINE=1 .venv/bin/python scripts/bench_embedding.py quality --embedders torch,onnx
    HF_HUB_OFFLINE=1 .venv/bin/python scripts/bench_embedding.py models --files fp32=/tmp/m/model-fp32.onnx

Benchmark data is read from ``../shared/data`` (never copied into the project). The last
stdout line is one JSON object; the full results go to ``--out`` (default ``bench-results/``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from cognis_dev import bench_common as bc

DATA = bc.REPO.parent / "shared" / "data"
LOCOMO = DATA / "locomo10.json"
LONGMEMEVAL = DATA / "longmemeval_s_dev100.json.gz"
TENANT = "bench"


# --------------------------------------------------------------------------------------
# data
def locomo_sessions(conversations: int | None) -> list[tuple[str, list[dict[str, Any]]]]:
    """(user, sessions) per LoCoMo conversation; a session is a list of message dicts (MessageBody fields)."""
    import bench_locomo as bl

    out = []
    for conv in bl.load_conversations(LOCOMO, conversations=conversations, questions=None):
        sessions = [
            [
                {"content": t.content, "speaker": t.speaker, "timestamp": s.time, "session_id": s.session_id,
                 "client_message_id": t.dia_id}
                for t in s.turns
            ]
            for s in conv.sessions
        ]  # fmt: skip
        out.append((conv.sample_id, sessions))
    return out


def locomo_questions(conversations: int | None) -> list[tuple[str, str, datetime]]:
    import bench_locomo as bl

    return [
        (conv.sample_id, q.text, conv.last_time)
        for conv in bl.load_conversations(LOCOMO, conversations=conversations, questions=None)
        for q in conv.questions
    ]


def write_import_file(path: Path, messages: int) -> None:
    """A JSONL file of LoCoMo turns: conversation copies as distinct users until ``messages`` lines."""
    written, copy = 0, 0
    with path.open("w", encoding="utf-8") as f:
        while written < messages:
            for user, sessions in locomo_sessions(None):
                for session in sessions:
                    for m in session:
                        if written >= messages:
                            return
                        row = {**m, "user_id": f"{user}-{copy}", "timestamp": m["timestamp"].isoformat()}
                        f.write(json.dumps(row) + "\n")
                        written += 1
            copy += 1


# --------------------------------------------------------------------------------------
# workloads (run in a child process, against whichever runtime is first on sys.path)
def _service(db: Path, **overrides: Any):
    from cognis_memory.config import Settings
    from cognis_memory.service import MemoryService

    settings = Settings(data_dir=db.parent, sqlite_path=db, run_worker=False, **overrides)
    return MemoryService.from_settings(settings, telemetry=bc.RecordingTelemetry())


async def _post_sessions(svc, user: str, sessions: list[list[dict[str, Any]]]) -> int:
    MessageBody = bc.message_body()  # a baseline runtime may be older (MessageIn)

    n = 0
    for session in sessions:
        res = await svc.add_messages(TENANT, user, [MessageBody(**m) for m in session])
        n += sum(res.created)
    return n


async def workload_service(args: argparse.Namespace) -> dict[str, Any]:
    """Session ingest, concurrent ingest and LoCoMo searches in one service."""
    convs = locomo_sessions(args.conversations)
    questions = locomo_questions(args.conversations)
    tmp = Path(tempfile.mkdtemp(prefix="bench-embedding-"))
    out: dict[str, Any] = {}
    try:
        svc = _service(tmp / "memory.db")
        await svc.start(run_worker=False)
        await _post_sessions(svc, "warm-up", [[{"content": "warm up the model", "speaker": "W"}]])
        t0 = time.perf_counter()
        n = 0
        for user, sessions in convs:
            n += await _post_sessions(svc, user, sessions)
        out["session_ingest_msg_s"] = round(n / (time.perf_counter() - t0), 1)

        t0 = time.perf_counter()
        counts = await asyncio.gather(*(_post_sessions(svc, f"{user}-c", sessions) for user, sessions in convs))
        out["concurrent_ingest_msg_s"] = round(sum(counts) / (time.perf_counter() - t0), 1)

        for phase in ("search", "search_repeat"):
            lat = []
            for user, text, now in questions:
                t0 = time.perf_counter()
                await svc.search(TENANT, user, text, now=now)
                lat.append((time.perf_counter() - t0) * 1000)
            out[phase] = bc.latency_summary(lat)
        await svc.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def workload_import(args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    """``cognis-memory import`` of the JSONL file as a real process; messages/s over its whole run."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-import-"))
    try:
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "cognis_memory", "import", args.import_file, "--tenant", TENANT, "--quiet",
             "--data-dir", str(tmp)],
            env={**env, "COGNIS_METRICS_ENABLED": "false", "COGNIS_LOG_LEVEL": "WARNING"},
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"import failed: {proc.stderr[-2000:]}")
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        return {"import_msg_s": round(result["created"] / seconds, 1), "import_seconds": round(seconds, 1)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


async def workload_scale(args: argparse.Namespace) -> dict[str, Any]:
    """Searches on one user holding ``--scale`` memories (synthetic vectors, real query embeddings)."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    try:
        svc = _service(tmp / "memory.db")
        await svc.start(run_worker=False)
        synth = bc.SyntheticVectors(svc.encoder.embedder, vocab=2000)
        await bc.bulk_load(svc, synth, [(TENANT, "big")], args.scale)
        queries = bc.synthetic_queries(args.scale_queries, seed=5)
        for q in queries[:3]:
            await svc.search(TENANT, "big", q)
        lat, cpu = [], []
        for q in queries:
            c0, t0 = time.process_time(), time.perf_counter()
            await svc.search(TENANT, "big", q)
            lat.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.process_time() - c0) * 1000)
        await svc.close()
        return {"scale_search": bc.latency_summary(lat), "scale_search_cpu": bc.latency_summary(cpu)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# --------------------------------------------------------------------------------------
# quality (child process)
class MemoEmbedder:
    """An embedder that embeds each distinct text once per process (the haystacks share sessions)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self._memo: dict[str, Any] = {}

    def embed(self, texts):
        import numpy as np

        missing = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if missing:
            for t, v in zip(missing, self.inner.embed(missing), strict=True):
                self._memo[t] = v
        return np.stack([self._memo[t] for t in texts]) if texts else self.inner.embed(texts)


def _lme_time(value: str) -> datetime:
    from datetime import UTC

    return datetime.strptime(value.split(" (")[0] + " " + value.split(") ")[1], "%Y/%m/%d %H:%M").replace(tzinfo=UTC)


async def quality_longmemeval(args: argparse.Namespace) -> dict[str, Any]:
    from cognis_memory.config import Settings
    from cognis_memory.service import MemoryService
    from cognis_memory.stores.embedded import EmbeddedStore
    from cognis_memory.wiring import build_embedder

    MessageBody = bc.message_body()  # a baseline runtime may be older (MessageIn)

    with gzip.open(LONGMEMEVAL, "rt", encoding="utf-8") as f:
        items = json.load(f)[args.lme_offset : args.lme_questions]
    tmp = Path(tempfile.mkdtemp(prefix="bench-lme-"))
    try:
        # LongMemEval has turns over the default 32 KB message limit; the model reads their start only.
        settings = Settings(data_dir=tmp, run_worker=False, embedding_workers=args.workers,
                            max_message_bytes=1 << 20)  # fmt: skip
        embedder = MemoEmbedder(build_embedder(settings))
        svc = MemoryService(
            settings, store=EmbeddedStore(getattr(settings, "embedded", settings).resolved_sqlite_path,
                                          dim=embedder.dim, dim_short=bc.setting(settings, "embedding_dim_short")),
            embedder=embedder, telemetry=bc.RecordingTelemetry(),
        )  # fmt: skip
        await svc.start(run_worker=False)
        sem = asyncio.Semaphore(args.workers)
        rows: list[dict[str, Any]] = []

        async def one(item: dict[str, Any]) -> None:
            async with sem:
                user = item["question_id"]
                where: dict[str, tuple[str, bool]] = {}  # message id -> (session id, has_answer)
                for sid, date, turns in zip(item["haystack_session_ids"], item["haystack_dates"],
                                            item["haystack_sessions"], strict=True):  # fmt: skip
                    msgs = [
                        MessageBody(content=t["content"], role=t["role"], speaker=t["role"], timestamp=_lme_time(date),
                                  session_id=sid, client_message_id=f"{sid}:{j}")
                        for j, t in enumerate(turns) if t["content"].strip()
                    ]  # fmt: skip
                    if not msgs:
                        continue
                    answers = [bool(t.get("has_answer")) for t in turns if t["content"].strip()]
                    res = await svc.add_messages(TENANT, user, msgs)
                    for m, has in zip(res.messages, answers, strict=True):
                        where[m.id] = (sid, has)
                evidence = sum(1 for _, has in where.values() if has)
                res = await svc.search(TENANT, user, item["question"], limit=10, now=_lme_time(item["question_date"]))
                found = {mid for h in res.hits for mid in h.memory.source_message_ids if mid in where}
                sessions = {where[mid][0] for mid in found}
                rows.append({
                    "question_id": user,
                    "type": item["question_type"],
                    "turn_recall@10": sum(1 for m in found if where[m][1]) / evidence if evidence else None,
                    "session_any@10": float(bool(sessions & set(item["answer_session_ids"]))),
                })  # fmt: skip
                if args.rows:  # one line per question as it finishes, so a partial run can be compared
                    with open(args.rows, "a", encoding="utf-8") as f:
                        f.write(json.dumps(rows[-1]) + "\n")

        await asyncio.gather(*(one(item) for item in items))
        await svc.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    turn = [r["turn_recall@10"] for r in rows if r["turn_recall@10"] is not None]
    return {
        "lme_questions": len(rows),
        "lme_turn_recall@10": round(statistics.fmean(turn), 4),
        "lme_session_any@10": round(statistics.fmean(r["session_any@10"] for r in rows), 4),
    }


async def quality_locomo(args: argparse.Namespace) -> dict[str, Any]:
    import bench_locomo as bl

    ns = argparse.Namespace(cross_encoder=None, dim_short=None, rotation=None, no_cache=True)
    convs = bl.load_conversations(LOCOMO, conversations=args.conversations, questions=None)
    tmp = Path(tempfile.mkdtemp(prefix="bench-locomo-q-"))
    try:
        svc = bl.build_service(tmp / "memory.db", ns)
        await svc.start(run_worker=False)
        await bl.ingest(svc, convs)
        summary, _ = await bl.evaluate_recipe(svc, convs, "default", "last-session")
        await svc.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"locomo_recall@10": summary["recall@10"], "locomo_recall@5": summary["recall@5"],
            "locomo_questions": summary["questions"]}  # fmt: skip


# --------------------------------------------------------------------------------------
# model files (child process)
def compare_models(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np

    from cognis_memory.providers import default_model
    from cognis_memory.providers.onnx_embedder import OnnxEmbedder
    from cognis_memory.providers.sentence_transformers_embedder import SentenceTransformerEmbedder

    texts = [m["content"] for _, sessions in locomo_sessions(None) for s in sessions for m in s][: args.texts]
    queries = [q for _, q, _ in locomo_questions(None)][: args.queries]
    from cognis_memory.encoding.encoder import limit_cpu_threads

    reference = SentenceTransformerEmbedder()
    limit_cpu_threads(1)  # as the service runs it (two spinning torch threads are many times slower here)
    candidates: dict[str, Any] = {"torch": reference}
    files = dict(f.split("=", 1) for f in args.files.split(",")) if args.files else {}
    files.setdefault("default", default_model.onnx_file())
    for name, path in files.items():
        candidates[name] = OnnxEmbedder(path, default_model.tokenizer_file(), name=name)
    ref_t, ref_q = reference.embed(texts), reference.embed(queries)
    rows: dict[str, dict[str, Any]] = {}
    for name, e in candidates.items():
        cos_t = (e.embed(texts) * ref_t).sum(1)
        cos_q = (e.embed(queries) * ref_q).sum(1)
        rows[name] = {"cos_min": round(float(min(cos_t.min(), cos_q.min())), 5),
                      "cos_mean": round(float(np.concatenate([cos_t, cos_q]).mean()), 5)}  # fmt: skip
    timings: dict[str, dict[str, list[float]]] = {n: {} for n in candidates}
    for _ in range(args.rounds):  # interleaved, so machine load hits every candidate alike
        for name, e in candidates.items():
            for label, calls, count in (("query", [[q] for q in queries[:50]], 50),
                                        ("batch32", [texts[i : i + 32] for i in range(0, 256, 32)], 256)):  # fmt: skip
                c0, t0 = time.process_time(), time.perf_counter()
                for call in calls:
                    e.embed(call)
                timings[name].setdefault(f"{label}_wall", []).append((time.perf_counter() - t0) / count)
                timings[name].setdefault(f"{label}_cpu", []).append((time.process_time() - c0) / count)
    for name, r in rows.items():
        t = {k: bc.percentile(v, 50) for k, v in timings[name].items()}
        r.update(query_ms=round(t["query_wall"] * 1000, 2), query_cpu_ms=round(t["query_cpu"] * 1000, 2),
                 batch32_texts_s=round(1 / t["batch32_wall"], 1),
                 batch32_texts_per_cpu_s=round(1 / t["batch32_cpu"], 1))  # fmt: skip
    return rows


# --------------------------------------------------------------------------------------
# orchestration
@contextlib.contextmanager
def baseline_checkout(ref: str):
    """A temporary git worktree of ``ref`` (its runtime is the 'before')."""
    path = Path(tempfile.mkdtemp(prefix="bench-baseline-")) / "src"
    subprocess.run(["git", "-C", str(bc.REPO), "worktree", "add", "--detach", str(path), ref], check=True,
                   capture_output=True)  # fmt: skip
    try:
        yield path
    finally:
        subprocess.run(["git", "-C", str(bc.REPO), "worktree", "remove", "--force", str(path)], check=False,
                       capture_output=True)  # fmt: skip
        shutil.rmtree(path.parent, ignore_errors=True)


def child_env(runtime: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COGNIS_")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               PYTHONPATH=os.pathsep.join([str(runtime), str(bc.REPO / "scripts")]), **extra)  # fmt: skip
    return env


def run_child(mode: str, env: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "_child", mode, "--conversations", str(args.conversations),
           "--scale", str(args.scale), "--scale-queries", str(args.scale_queries),
           "--lme-questions", str(args.lme_questions), "--workers", str(args.workers)]  # fmt: skip
    if getattr(args, "rows", None):
        cmd += ["--rows", args.rows]
    if getattr(args, "lme_offset", 0):
        cmd += ["--lme-offset", str(args.lme_offset)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{mode} failed ({env.get('PYTHONPATH')}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def speed(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-embedding-files-"))
    args.import_file = str(tmp / "import.jsonl")
    if args.import_messages and not args.scale_only:
        write_import_file(Path(args.import_file), args.import_messages)
    here = bc.REPO / "runtime"
    results: dict[str, list[dict[str, Any]]] = {}
    with baseline_checkout(args.baseline_ref) as base:
        configs = {
            args.baseline_ref: child_env(base / "runtime", {}),
            "torch": child_env(here, {"COGNIS_EMBEDDER": "sentence-transformers"}),
            "onnx": child_env(here, {}),
        }
        if args.configs:
            configs = {n: e for n, e in configs.items() if n in args.configs.split(",")}
        for r in range(args.rounds):
            for name, env in configs.items():
                row = run_child("service", env, args) if not args.scale_only else {}
                if args.scale:
                    row.update(run_child("scale", env, args))
                if args.import_messages and not args.scale_only:
                    row.update(workload_import(args, env))
                results.setdefault(name, []).append(row)
                print(f"round {r + 1} {name}: {json.dumps(row)}", file=sys.stderr, flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    table, summary = speed_table(results)
    print(table)
    payload = {"benchmark": "embedding-speed", "machine": bc.machine_info(), "rounds": results,
               "summary": summary, "table_markdown": table}  # fmt: skip
    bc.write_json(Path(args.out) / "embedding_speed.json", payload)
    return {"summary": summary, "out": str(Path(args.out) / "embedding_speed.json")}


METRICS = [
    ("session ingest, msg/s", ("session_ingest_msg_s",)),
    ("concurrent ingest, msg/s", ("concurrent_ingest_msg_s",)),
    ("search p50, ms", ("search", "p50_ms")),
    ("search p95, ms", ("search", "p95_ms")),
    ("repeated search p50, ms", ("search_repeat", "p50_ms")),
    ("repeated search p95, ms", ("search_repeat", "p95_ms")),
    ("import, msg/s", ("import_msg_s",)),
    ("search p50 at scale, ms", ("scale_search", "p50_ms")),
    ("search p95 at scale, ms", ("scale_search", "p95_ms")),
    ("search CPU ms p50 at scale", ("scale_search_cpu", "p50_ms")),
    ("search CPU ms p95 at scale", ("scale_search_cpu", "p95_ms")),
]


def _get(row: dict[str, Any], path: tuple[str, ...]) -> float | None:
    value: Any = row
    for k in path:
        if not isinstance(value, dict) or k not in value:
            return None
        value = value[k]
    return float(value)


def speed_table(results: dict[str, list[dict[str, Any]]]) -> tuple[str, dict[str, Any]]:
    names = list(results)
    summary: dict[str, Any] = {}
    rows = []
    for label, path in METRICS:
        medians = {}
        for n in names:
            vals = [v for v in (_get(r, path) for r in results[n]) if v is not None]
            medians[n] = bc.percentile(vals, 50) if vals else None
        if all(v is None for v in medians.values()):
            continue
        base = medians[names[0]]
        cells = []
        for n in names:
            v = medians[n]
            cells.append("-" if v is None else f"{v:.1f}")
        ratios = []
        for n in names[1:]:
            v = medians[n]
            if v is None or not base:
                ratios.append("-")
            else:
                ratios.append(f"{v / base:.2f}x")
        rows.append([label, *cells, *ratios])
        summary[label] = medians
    headers = ["metric", *names, *(f"{n} / {names[0]}" for n in names[1:])]
    return bc.fmt_table(headers, rows), summary


def quality(args: argparse.Namespace) -> dict[str, Any]:
    here = bc.REPO / "runtime"
    out: dict[str, Any] = {}
    for spec in args.embedders.split(","):
        name, _, path = spec.partition("=")
        extra = {"COGNIS_EMBEDDER": "sentence-transformers"} if name == "torch" else {}
        if path:
            from cognis_memory.providers import default_model

            extra.update(COGNIS_EMBEDDER_PATH=path, COGNIS_EMBEDDER_TOKENIZER=default_model.tokenizer_file())
        env = child_env(here, extra)
        row: dict[str, Any] = {}
        if not args.skip_locomo:
            row.update(run_child("locomo", env, args))
        if args.lme_questions:
            row.update(run_child("longmemeval", env, args))
        out[name] = row
        print(f"{name}: {json.dumps(row)}", file=sys.stderr, flush=True)
    names = list(out)
    keys = [k for k in ("locomo_recall@10", "lme_turn_recall@10", "lme_session_any@10") if k in out[names[0]]]
    table = bc.fmt_table(
        ["embedder", *keys, *(f"{k} - {names[0]} (points)" for k in keys)],
        [[n, *(out[n][k] for k in keys), *(round(100 * (out[n][k] - out[names[0]][k]), 2) for k in keys)]
         for n in names],
    )  # fmt: skip
    print(table)
    bc.write_json(Path(args.out) / "embedding_quality.json", {"benchmark": "embedding-quality", "results": out,
                                                              "table_markdown": table})  # fmt: skip
    return out


def child(args: argparse.Namespace) -> dict[str, Any]:
    if args.mode == "service":
        return asyncio.run(workload_service(args))
    if args.mode == "scale":
        return asyncio.run(workload_scale(args))
    if args.mode == "locomo":
        return asyncio.run(quality_locomo(args))
    if args.mode == "longmemeval":
        return asyncio.run(quality_longmemeval(args))
    raise SystemExit(f"unknown child mode {args.mode}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(bc.REPO / "bench-results"))
    sub = p.add_subparsers(dest="command")
    s = sub.add_parser("speed", help="before/after table (default)")
    s.add_argument("--baseline-ref", default="main", help="git ref whose runtime is 'before' (default: main)")
    s.add_argument("--rounds", type=int, default=3)
    s.add_argument("--conversations", type=int, default=2, help="LoCoMo conversations of the ingest/search workloads")
    s.add_argument("--import-messages", type=int, default=10_000, help="lines of the import file (0: no import)")
    s.add_argument("--scale", type=int, default=0, help="memories of the scale workload (0: skip)")
    s.add_argument("--scale-queries", type=int, default=200)
    s.add_argument("--scale-only", action="store_true", help="only the scale workload (with --scale)")
    s.add_argument("--configs", default="", help="only these configurations (comma-separated names)")
    q = sub.add_parser("quality", help="LoCoMo and LongMemEval recall per embedder")
    q.add_argument("--embedders", default="torch,onnx", help="torch, onnx, or name=/path/file.onnx, comma-separated")
    q.add_argument("--conversations", type=int, default=None, help="LoCoMo conversations (default: all)")
    q.add_argument("--lme-questions", type=int, default=100, help="LongMemEval questions (0: skip)")
    q.add_argument("--skip-locomo", action="store_true")
    q.add_argument("--workers", type=int, default=2, help="LongMemEval questions ingested at once")
    q.add_argument("--rows", default=None, help="append each LongMemEval question's scores to this JSONL file")
    q.add_argument("--lme-offset", type=int, default=0, help="skip the first N LongMemEval questions (split a run)")
    m = sub.add_parser("models", help="ONNX files vs sentence-transformers: cosine and speed")
    m.add_argument("--files", default="", help="name=/path/file.onnx, comma-separated (the default model is added)")
    m.add_argument("--texts", type=int, default=2000)
    m.add_argument("--queries", type=int, default=300)
    m.add_argument("--rounds", type=int, default=5)
    c = sub.add_parser("_child")
    c.add_argument("mode")
    c.add_argument("--rows", default=None)
    c.add_argument("--lme-offset", type=int, default=0)
    for a, d in (("--conversations", None), ("--scale", 0), ("--scale-queries", 200), ("--lme-questions", 100),
                 ("--workers", 2)):  # fmt: skip
        c.add_argument(a, type=lambda v: None if v == "None" else int(v), default=d)
    args = p.parse_args(argv)
    if args.command == "_child":
        print(json.dumps(child(args), default=str))
        return 0
    if args.command is None:
        args = p.parse_args(["speed", *(argv or sys.argv[1:])])
    for name in ("scale", "scale_queries", "lme_questions", "workers", "conversations", "rows", "lme_offset"):
        if not hasattr(args, name):
            setattr(args, name, {"scale": 0, "scale_queries": 200, "lme_questions": 0, "workers": 2,
                                 "lme_offset": 0}.get(name))  # fmt: skip
    if args.command == "speed":
        result = speed(args)
    elif args.command == "quality":
        result = quality(args)
    else:
        result = compare_models(args)
        print(bc.fmt_table(["model", "cos min", "cos mean", "1 query ms", "CPU ms", "32-text batches: texts/s",
                            "texts per CPU-s"],
                           [[n, r["cos_min"], r["cos_mean"], r["query_ms"], r["query_cpu_ms"], r["batch32_texts_s"],
                             r["batch32_texts_per_cpu_s"]] for n, r in result.items()]))  # fmt: skip
    print(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
