"""Helpers shared by the benchmark scripts (``scripts/bench_*.py``, ``scripts/load_test.py``):
``from cognis_dev import bench_common as bc``.

Nothing here reads benchmark data: the scripts pass their own inputs. Everything runs on
the real runtime (service, pipelines, embedded store, offline model); the only thing this
module adds is measurement (percentiles, telemetry capture, machine facts, HTTP server).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

#: The repository root (this package is installed in editable mode from ``devtools/``).
REPO = Path(__file__).resolve().parents[2]

from cognis_memory.telemetry.emitter import Telemetry  # noqa: E402
from cognis_memory.telemetry.recorder import StageRecorder  # noqa: E402


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in [0, 100]); NaN for no values."""
    if not values:
        return float("nan")
    xs = sorted(values)
    if len(xs) == 1:
        return float(xs[0])
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo))


def latency_summary(values_ms: Sequence[float], prefix: str = "") -> dict[str, float]:
    return {
        f"{prefix}p50_ms": round(percentile(values_ms, 50), 2),
        f"{prefix}p95_ms": round(percentile(values_ms, 95), 2),
        f"{prefix}p99_ms": round(percentile(values_ms, 99), 2),
        f"{prefix}mean_ms": round(statistics.fmean(values_ms), 2) if values_ms else float("nan"),
        f"{prefix}n": len(values_ms),
    }


class RecordingTelemetry(Telemetry):
    """The service's real telemetry, with its log lines kept in memory instead of printed.

    ``records`` holds the JSON record of every request (stage durations included), which is
    how the benchmarks read the per-stage latency breakdown.
    """

    def __init__(self) -> None:
        self._sink = io.StringIO()
        super().__init__(
            metrics_enabled=False, log_stream=self._sink, metrics_stream=io.StringIO(), log_level="WARNING"
        )
        self.records: list[dict[str, Any]] = []

    def log_request(self, event: str, rec: StageRecorder, *, request_id: str | None, **fields: Any) -> dict[str, Any]:
        record = super().log_request(event, rec, request_id=request_id, **fields)
        self.records.append(record)
        self._sink.seek(0)
        self._sink.truncate()
        return record

    def emit_request_metrics(self, **kwargs: Any) -> None:
        return None

    def take(self) -> list[dict[str, Any]]:
        out, self.records = self.records, []
        return out


def stage_means(records: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Mean milliseconds per stage over request records (a stage absent from a request counts 0)."""
    totals: dict[str, float] = {}
    for r in records:
        for k, v in r.get("stage_durations", {}).items():
            totals[k] = totals.get(k, 0.0) + float(v)
    n = max(len(records), 1)
    return {k: round(v / n, 3) for k, v in totals.items()}


def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        import psutil

        mem_gib = round(psutil.virtual_memory().total / 2**30, 1)
    except Exception:  # pragma: no cover
        pass
    commit = None
    try:
        commit = (
            subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=5
            ).stdout.strip()
            or None
        )
    except Exception:  # pragma: no cover
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "ram_gib": mem_gib,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "commit": commit,
    }


def rss_mib() -> float:
    import psutil

    return round(psutil.Process().memory_info().rss / 2**20, 1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class UvicornThread:
    """A real uvicorn server on 127.0.0.1 serving ``app`` from a background thread.

    The app is the project's FastAPI app built on the *same* service object the in-process
    measurements use (``create_app(service, manage_lifecycle=False)``), so both paths see
    the same data; HTTP requests go through the real network stack on loopback.
    """

    def __init__(self, app: Any, port: int | None = None) -> None:
        import uvicorn

        self.port = port or free_port()
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", access_log=False, lifespan="off"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="bench-uvicorn", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> UvicornThread:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start within 30 s")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)


# --------------------------------------------------------------------------------------
# embedding cache and the service the quality benchmarks share
def default_cache_dir() -> Path:
    """Where benchmark caches live: ``COGNIS_BENCH_CACHE``, else ``~/.cache/cognis-memory-bench`` (never the repo)."""
    return Path(os.environ.get("COGNIS_BENCH_CACHE") or Path.home() / ".cache" / "cognis-memory-bench")


class CachingEmbedder:
    """An :class:`~cognis_memory.providers.base.Embedder` that keeps the vectors of every text it
    embedded in a SQLite file keyed by the SHA-256 of the text (one file per model name).

    The quality benchmarks embed tens of thousands of benchmark turns; with the cache, a
    re-run or a recipe ablation that needs a fresh store costs only the store writes. The
    vectors are the wrapped model's, so results are identical with and without the cache.
    """

    def __init__(self, inner: Any, cache_dir: Path | None = None) -> None:
        import sqlite3

        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        directory = cache_dir or default_cache_dir()
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"embeddings-{inner.name}-{inner.dim}.sqlite"
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=120)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS vec (key BLOB PRIMARY KEY, v BLOB NOT NULL)")
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def warm(self, texts: Sequence[str], *, batch: int = 64, progress: bool = False) -> int:
        """Embed the texts not cached yet, longest first in batches of similar length (far less padding
        than the ingest's per-request batches); returns how many were embedded."""
        import hashlib

        unique = {hashlib.sha256(t.encode("utf-8", "surrogatepass")).digest(): t for t in texts}
        keys = list(unique)
        have: set[bytes] = set()
        with self._lock:
            for i in range(0, len(keys), 500):
                chunk = keys[i : i + 500]
                have.update(k for (k,) in self._db.execute(
                    f"SELECT key FROM vec WHERE key IN ({','.join('?' * len(chunk))})", chunk))  # fmt: skip
        todo = sorted((unique[k] for k in keys if k not in have), key=len, reverse=True)
        t0 = time.perf_counter()
        for i in range(0, len(todo), batch):
            self.embed(todo[i : i + batch])
            if progress and (i // batch) % 20 == 0:
                print(f"  embedded {i + batch}/{len(todo)} texts ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
        return len(todo)

    def embed(self, texts: Sequence[str]) -> Any:
        import hashlib

        import numpy as np

        keys = [hashlib.sha256(t.encode("utf-8", "surrogatepass")).digest() for t in texts]
        found: dict[bytes, Any] = {}
        with self._lock:
            for i in range(0, len(keys), 500):
                chunk = keys[i : i + 500]
                rows = self._db.execute(
                    f"SELECT key, v FROM vec WHERE key IN ({','.join('?' * len(chunk))})", chunk
                ).fetchall()
                found.update((k, np.frombuffer(v, dtype=np.float32)) for k, v in rows)
        missing = [i for i, k in enumerate(keys) if k not in found]
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        if missing:
            vectors = self.inner.embed([texts[i] for i in missing])
            with self._lock:
                self._db.executemany(
                    "INSERT OR REPLACE INTO vec (key, v) VALUES (?, ?)",
                    [
                        (keys[i], np.asarray(v, dtype=np.float32).tobytes())
                        for i, v in zip(missing, vectors, strict=True)
                    ],  # fmt: skip
                )
            found.update((keys[i], np.asarray(v, dtype=np.float32)) for i, v in zip(missing, vectors, strict=True))
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)


def _flat_field(settings_cls: Any, flat: str) -> Any:
    """Where the setting of flat name ``flat`` lives in the runtime on the path: its ``FlatField`` (nested
    settings), ``flat`` itself when the runtime is older (before nested settings every setting was a field of
    ``Settings``), None when it has no such setting."""
    flat_fields = getattr(settings_cls, "flat_fields", None)
    if flat_fields is None:
        return flat if flat in settings_cls.model_fields else None
    return next((f for f in flat_fields() if f.flat == flat), None)


def has_setting(name: str) -> bool:
    """Whether the runtime on the path has the setting of flat name ``name`` (a baseline runtime may be older)."""
    from cognis_memory.config import Settings

    return _flat_field(Settings, name) is not None


def setting(settings: Any, flat: str) -> Any:
    """The value of the setting of flat name ``flat`` (``embedding_dim_short``) in ``settings`` of the runtime on
    the path, whether its settings are nested (``settings.encoder.dim_short``) or flat (a baseline runtime from
    before nested settings, run with the benchmarks' --compare-with / --baseline-ref)."""
    field = _flat_field(type(settings), flat)
    if field is None:
        raise AttributeError(f"no setting {flat!r}")
    if isinstance(field, str):
        return getattr(settings, field)
    return getattr(settings if field.component is None else getattr(settings, field.component), field.name)


def message_body() -> Any:
    """The class a submitted message is built with in the runtime on the path: ``MessageBody``, or
    ``MessageIn`` in a baseline runtime from before it (the same fields, given by name), run
    with the benchmarks' --compare-with / --baseline-ref or by an older checkout's script."""
    import cognis_memory.service as service

    return getattr(service, "MessageBody", None) or service.MessageIn


def quality_service(db_path: Path, *, cache: bool = True, extraction_llm: Any = None, **settings: Any) -> Any:
    """A :class:`MemoryService` on an embedded store at ``db_path`` for the quality benchmarks:
    the configured embedder (wrapped in :class:`CachingEmbedder` unless ``cache`` is false),
    no worker, telemetry kept in memory. ``settings`` override :class:`Settings` fields; ``extraction_llm``, an
    object of the LLM protocol, replaces the configured one (an oracle, say)."""
    from cognis_memory.config import Settings
    from cognis_memory.service import MemoryService
    from cognis_memory.wiring import build_embedder, build_llm, build_reranker, build_store

    s = Settings(**{"data_dir": db_path.parent, "sqlite_path": db_path, "run_worker": False, **settings})
    embedder = build_embedder(s)
    if cache:
        embedder = CachingEmbedder(embedder)
    return MemoryService(
        s,
        store=build_store(s, dim=s.encoder.dim_full or embedder.dim, dim_short=s.encoder.dim_short),
        embedder=embedder,
        llm=extraction_llm if extraction_llm is not None else build_llm(s),
        reranker=build_reranker(s),
        telemetry=RecordingTelemetry(),
    )


async def wait_until_searchable(svc: Any, *, timeout_s: float = 300.0) -> None:
    """Until every write is in the keyword index: the dual store's outbox reaches OpenSearch a moment after
    an add returns, and a quality run that searched at once would score its first questions on part of
    the data. Other stores index inside the write and return at once."""
    from cognis_memory.stores.dual import DualStore

    backend = svc.stores.backend
    if not isinstance(backend, DualStore):
        return
    deadline = time.monotonic() + timeout_s
    while (waiting := await backend.outbox_size()) > 0:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{waiting} outbox rows still not in OpenSearch after {timeout_s:.0f} s")
        await asyncio.sleep(0.05)


def selected_recipes(arg: str | None, *, reranker: bool = False) -> list[str]:
    """The recipes named by a ``--recipes`` value (default: every recipe); the reranker-only recipes only
    when a reranker is configured. Unknown names stop the script naming them."""
    from cognis_memory.retrieval.recipes import RECIPES, RERANKER_RECIPES

    recipes = [r.strip() for r in arg.split(",")] if arg else list(RECIPES)
    unknown = [r for r in recipes if r not in RECIPES]
    if unknown:
        raise SystemExit(f"--recipes: unknown {unknown}; known: {', '.join(RECIPES)}")
    return recipes if reranker else [r for r in recipes if r not in RERANKER_RECIPES]


def add_quality_args(p: Any) -> None:
    """The options every quality benchmark shares (recipes, cache, per-question output, output directory)."""
    p.add_argument("--recipes", default=None, help="comma-separated recipe names (default: every recipe)")
    p.add_argument("--no-cache", action="store_true", help="do not use the on-disk embedding cache")
    p.add_argument("--per-question", action="store_true", help="also write per-question scores")
    p.add_argument("--out", default=str(REPO / "bench-results"), help="output directory (default: %(default)s)")


def write_json(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8")


def fmt_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured markdown table (also readable on a terminal)."""

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"
        return str(v)

    body = [[cell(v) for v in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(headers)]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    out = [line, sep]
    for r in body:
        out.append("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |")
    return "\n".join(out)


# --------------------------------------------------------------------------------------
# synthetic conversations (deterministic, seeded) for the latency and scale benchmarks
_NAMES = ["Alex", "Sam", "Jordan", "Riley", "Morgan", "Casey", "Taylor", "Jamie", "Avery", "Quinn", "Robin", "Drew"]
_ACTS = [
    "started learning",
    "finished reading",
    "went hiking near",
    "cooked",
    "bought",
    "signed up for",
    "visited",
    "painted",
    "fixed",
    "planned a trip to",
    "wrote about",
    "talked to my sister about",
    "took a class on",
    "adopted",
    "sold",
    "lost",
    "found",
    "ran a race in",
    "volunteered at",
    "booked",
    "cancelled",
    "tried",
]
_OBJS = [
    "the guitar",
    "a pottery course",
    "Lisbon",
    "the old bike",
    "a vegan lasagna",
    "the camping gear",
    "a new job",
    "the marathon",
    "a puppy",
    "the garden",
    "a photography workshop",
    "Kyoto",
    "the bakery downtown",
    "a sci-fi novel",
    "the climbing gym",
    "a budget spreadsheet",
    "the piano",
    "a road trip",
    "the dentist",
    "a chess club",
    "the farmers market",
    "a watercolor set",
    "the museum",
    "a startup idea",
    "the lake house",
    "a yoga retreat",
    "the concert",
    "a sourdough starter",
    "the community garden",
    "a Spanish course",
]
_TIMES = ["yesterday", "last week", "two weeks ago", "last month", "this morning", "on Saturday", "in March", "today"]
_FEEL = ["and it was great", "and I loved it", "but it was stressful", "and I want to do it again", "with my kids",
         "with friends", "on my own", "after work", "for the first time", "again"]  # fmt: skip


def synthetic_sentences(n: int, seed: int = 7) -> list[str]:
    """``n`` distinct synthetic conversation turns ("Name: I <did> <thing> <when> <how>.")."""
    import random

    rng = random.Random(seed)
    out: dict[str, None] = {}
    while len(out) < n:
        s = f"{rng.choice(_NAMES)}: I {rng.choice(_ACTS)} {rng.choice(_OBJS)} {rng.choice(_TIMES)} {rng.choice(_FEEL)}."
        out[s] = None
    return list(out)


def synthetic_queries(n: int, seed: int = 11) -> list[str]:
    import random

    rng = random.Random(seed)
    forms = [
        "What did I say about {o}?",
        "When did I go to {o}?",
        "Do I like {o}?",
        "Tell me about {o} {t}",
        "what happened with {o}",
        "Who did I {a} {o} with?",
    ]
    return [
        rng.choice(forms).format(o=rng.choice(_OBJS), t=rng.choice(_TIMES), a=rng.choice(_ACTS).split()[0])
        for _ in range(n)
    ]


class SyntheticVectors:
    """Real model embeddings of a limited vocabulary of synthetic sentences, reused at scale.

    Embedding a million distinct sentences with all-MiniLM-L6-v2 on two shared cores would
    take hours, so ``vocab`` sentences are embedded once (cached as .npy under
    ``cache_dir``) and memory ``i`` gets sentence ``i % vocab``'s text with the vector
    ``normalise(e[a] + 0.5 * e[b] + 0.05 * noise)`` (``a = i % vocab``, ``b`` seeded random):
    every vector is distinct and lies near the span of real embeddings, so vector search
    sees a realistic, non-degenerate distribution. The text of memory ``i`` is sentence
    ``a`` (its BM25 side is real text).
    """

    def __init__(self, embedder: Any, vocab: int = 3000, seed: int = 7, cache_dir: Path | None = None) -> None:
        import numpy as np

        self.sentences = synthetic_sentences(vocab, seed)
        cache_dir = cache_dir or (REPO / "bench-results" / "cache")
        cache_dir.mkdir(parents=True, exist_ok=True)
        path = cache_dir / f"synthetic-{getattr(embedder, 'name', 'model')}-{vocab}-{seed}.npy"
        if path.exists():
            self.vectors = np.load(path)
        else:
            self.vectors = np.concatenate(
                [embedder.embed(self.sentences[i : i + 256]) for i in range(0, vocab, 256)]
            ).astype(np.float32)
            np.save(path, self.vectors)
        self.seed = seed

    def batch(self, start: int, count: int) -> tuple[list[str], Any]:
        """Texts and raw (unit) vectors of memories ``start .. start + count - 1``."""
        import numpy as np

        v = len(self.sentences)
        idx = np.arange(start, start + count)
        rng = np.random.default_rng(self.seed * 1_000_003 + start)
        a = idx % v
        b = rng.integers(0, v, size=count)
        x = self.vectors[a] + 0.5 * self.vectors[b] + 0.05 * rng.standard_normal((count, self.vectors.shape[1]))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        return [self.sentences[i] for i in a], x.astype(np.float32)


async def bulk_load(
    svc: Any,
    synth: SyntheticVectors,
    owners: Sequence[tuple[str, str]],
    total: int,
    *,
    batch: int = 2000,
    start_time: Any = None,
    insert: Any = None,
) -> dict[str, Any]:
    """Insert ``total`` raw memories spread round-robin over ``owners`` through the store API.

    ``insert`` (an async callable taking one batch of memories) replaces the store's
    ``insert_memories``: a benchmark of a server store collects the batches for its store's
    one-shot ``bulk_load`` (which rebuilds the vector index, so it is called once, not per batch).

    Vectors come from :class:`SyntheticVectors` and go through the service's own
    :class:`MatryoshkaEncoder.split` (so a configured rotation and prefix size apply); the
    store writes records, FTS rows and vector blobs exactly as for ingested messages.
    """
    from datetime import UTC, datetime, timedelta

    from cognis_memory.domain import Category, Memory, MemoryKind

    t0 = time.perf_counter()
    base = start_time or datetime(2024, 1, 1, tzinfo=UTC)
    cats = list(Category)
    done = 0
    while done < total:
        n = min(batch, total - done)
        texts, raw = synth.batch(done, n)
        full, short = svc.encoder.split(raw)
        mems = []
        for j in range(n):
            i = done + j
            tenant, user = owners[i % len(owners)]
            mems.append(
                Memory(
                    tenant_id=tenant,
                    user_id=user,
                    content=texts[j],
                    category=cats[i % len(cats)],
                    kind=MemoryKind.RAW,
                    speaker=texts[j].split(":", 1)[0],
                    session_id=f"s{i // 40}",
                    message_time=base + timedelta(minutes=i),
                    embedding=full[j],
                    embedding_short=short[j],
                )
            )
        await (insert or svc.stores.memories.insert_memories)(mems)
        done += n
    seconds = time.perf_counter() - t0
    return {"memories": total, "seconds": round(seconds, 1), "memories_per_s": round(total / seconds, 1)}


def add_llm_args(p: Any, url_group: Any = None) -> None:
    """The options naming an extraction LLM, shared by the quality benchmarks that ingest with one:
    ``--llm-url`` (in ``url_group`` when given, e.g. exclusive with an oracle), ``--replay``, ``--record``,
    ``--llm-model``, ``--structured-output``, ``--llm-timeout`` and ``--llm-max-tokens``."""
    (url_group or p).add_argument(
        "--llm-url", default=None, help="an OpenAI-compatible endpoint: ingest with LLM extraction"
    )
    p.add_argument(
        "--replay",
        default=None,
        help="extract with the answers recorded by an earlier --record run "
        "(with --llm-url, calls it does not hold are asked of that endpoint)",
    )
    p.add_argument("--record", default=None, help="write every LLM call and its answer to this file (JSON lines)")
    p.add_argument("--llm-model", default="gpt-4o-mini", help="model name at --llm-url (default: %(default)s)")
    p.add_argument(
        "--structured-output",
        default="auto",
        choices=["auto", "json_schema", "json_object", "prompt"],
        help="how JSON is asked for at --llm-url (COGNIS_LLM_STRUCTURED_OUTPUT; default: %(default)s)",
    )
    p.add_argument("--llm-timeout", type=float, default=300.0, help="LLM call timeout, s (default: %(default)s)")
    p.add_argument("--llm-max-tokens", type=int, default=1024, help="answer token limit (default: %(default)s)")


def extraction_llm(args: Any, llm: Any = None) -> Any:
    """The extraction LLM the options of :func:`add_llm_args` name: ``llm`` (an oracle, a test's object) or
    the model at ``--llm-url``, answered from ``--replay`` first and recorded to ``--record``; None: no LLM."""
    from cognis_memory.config import Settings
    from cognis_memory.wiring import build_llm

    from .llm_recording import RecordingLLM, ReplayLLM

    if llm is None and args.llm_url:
        llm = build_llm(Settings(llm="openai", openai_base_url=args.llm_url, openai_model=args.llm_model,
                                 llm_structured_output=args.structured_output, llm_timeout_s=args.llm_timeout,
                                 llm_max_tokens=args.llm_max_tokens))  # fmt: skip
    if args.replay:  # with --llm-url: calls the recording does not hold go to the live model
        llm = ReplayLLM(Path(args.replay), fallback=llm)
    if args.record and llm is not None:
        llm = RecordingLLM(llm, Path(args.record))
    return llm
