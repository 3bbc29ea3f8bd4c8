"""Retrieval quality on LoCoMo: evidence recall@k of every named recipe, in one run.

Each conversation of ``locomo10.json`` (evaluation only, CC BY-NC 4.0: never copied into
the project) is ingested through the real service as its own user (tenant ``bench``,
user = ``sample_id``): one raw message per turn, ``content`` = the turn's text plus
`` [image: <caption>]`` when the turn shared an image, ``speaker`` = the turn's speaker,
``timestamp`` = the session's date and time, ``session_id`` = ``session_N`` and
``client_message_id`` = the turn's ``dia_id`` (so a re-run on the same ``--db`` is a no-op).

Every question of categories 1-4 is then a search confined to that user, with ``now`` =
the conversation's last session time (the questions are asked after the conversation; a
relative expression in a question resolves against that moment). Results map back to turn
ids only through ``memory.source_message_ids`` and the ingest response (message id ->
dia_id); never by text.

Scores per question: evidence recall@k (fraction of its evidence turns among the turns of
the top k results), hit@k (any evidence turn in the top k), MRR (first evidence hit in the
top 20). Every recipe in ``cognis_memory.retrieval.recipes.RECIPES`` runs over the same
ingested data (the cross-encoder recipes only when ``--cross-encoder DIR`` or
``COGNIS_RERANKER_PATH`` names a local cross-encoder).

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/bench_locomo.py             # all 10 conversations
    HF_HUB_OFFLINE=1 .venv/bin/python scripts/bench_locomo.py --conversations 1 --questions 10

The last stdout line is one JSON object (the default recipe's figures plus a per-recipe
summary); the full results go to ``--out`` (default ``bench-results/``) as JSON and PNG.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cognis_dev import bench_common as bc

from cognis_memory.retrieval.recipes import RECIPE_DESCRIPTIONS, RECIPES
from cognis_memory.service import MemoryService, MessageBody

KS = (1, 5, 10, 20)
CATEGORIES = (1, 2, 3, 4)
TENANT = "bench"
DEFAULT_DATA = bc.REPO.parent / "shared" / "data" / "locomo10.json"


# --------------------------------------------------------------------------------------
# data
@dataclass
class Turn:
    dia_id: str
    speaker: str
    content: str


@dataclass
class Session:
    session_id: str
    time: datetime
    turns: list[Turn]


@dataclass
class Question:
    text: str
    category: int
    evidence: list[str]  # raw ids as given (split), before matching


@dataclass
class Conversation:
    sample_id: str
    sessions: list[Session]
    questions: list[Question]
    dia_to_msg: dict[str, str] = field(default_factory=dict)  # filled by ingest
    msg_to_dia: dict[str, str] = field(default_factory=dict)

    @property
    def last_time(self) -> datetime:
        return max(s.time for s in self.sessions)

    @property
    def turn_ids(self) -> set[str]:
        return {t.dia_id for s in self.sessions for t in s.turns}


def parse_session_time(value: str) -> datetime:
    """'7:05 pm on 3 June, 2023' -> an aware UTC datetime (also accepts a few spacing variants)."""
    cleaned = re.sub(r"\s+", " ", value.strip()).replace(" ,", ",")
    for fmt in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%I:%M %p on %B %d, %Y", "%I:%M%p on %d %B, %Y"):
        try:
            return datetime.strptime(cleaned, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise ValueError(f"unrecognised session date/time {value!r}")


def turn_content(turn: dict[str, Any], *, captions: bool = True) -> str:
    """The message text: the turn's text plus ``[image: caption]`` when it shared an image."""
    text = str(turn.get("text", "")).strip()
    caption = str(turn.get("blip_caption") or "").strip()
    if captions and caption:
        return f"{text} [image: {caption}]" if text else f"[image: {caption}]"
    return text


_SPLIT = re.compile(r"[;,\s]+")
_DIA = re.compile(r"^D(\d+):(\d+)$")


def split_evidence(entries: list[Any]) -> list[str]:
    """Evidence ids: entries holding several ids are split on ';', ',' or whitespace; a
    zero-padded turn number ('D3:07') is read as 'D3:7'. Unmatchable ids are kept here and
    dropped when matching."""
    out: list[str] = []
    for e in entries or []:
        for part in _SPLIT.split(str(e)):
            if not part:
                continue
            m = _DIA.match(part)
            out.append(f"D{int(m.group(1))}:{int(m.group(2))}" if m else part)
    return list(dict.fromkeys(out))


def load_conversations(
    path: Path,
    *,
    conversations: int | None,
    questions: int | None,
    captions: bool = True,
    max_sessions: int | None = None,
) -> list[Conversation]:
    raw = json.loads(path.read_text(encoding="utf-8"))
    out: list[Conversation] = []
    for item in raw[: conversations or None]:
        conv = item["conversation"]
        sessions: list[Session] = []
        n = 1
        while (f"session_{n}" in conv or f"session_{n}_date_time" in conv) and (
            max_sessions is None or n <= max_sessions
        ):
            turns = conv.get(f"session_{n}") or []
            if turns:
                sessions.append(
                    Session(
                        session_id=f"session_{n}",
                        time=parse_session_time(conv[f"session_{n}_date_time"]),
                        turns=[
                            Turn(str(t["dia_id"]), str(t["speaker"]), turn_content(t, captions=captions))
                            for t in turns
                            if turn_content(t, captions=captions)
                        ],
                    )
                )
            n += 1
        qs = [
            Question(str(q["question"]), int(q["category"]), split_evidence(q.get("evidence", [])))
            for q in item.get("qa", [])
            if int(q.get("category", 0)) in CATEGORIES
        ]
        out.append(Conversation(str(item["sample_id"]), sessions, qs[: questions or None]))
    return out


# --------------------------------------------------------------------------------------
# scoring
def score_question(ranked_dias: list[set[str]], evidence: set[str]) -> dict[str, float]:
    """recall@k, hit@k and reciprocal rank for one question (``ranked_dias``: turn ids per result)."""
    row: dict[str, float] = {}
    for k in KS:
        found: set[str] = set().union(*ranked_dias[:k]) if ranked_dias[:k] else set()
        got = len(evidence & found)
        row[f"recall@{k}"] = got / len(evidence)
        row[f"hit@{k}"] = 1.0 if got else 0.0
    rr = 0.0
    for rank, dias in enumerate(ranked_dias[: max(KS)], start=1):
        if dias & evidence:
            rr = 1.0 / rank
            break
    row["mrr"] = rr
    return row


def aggregate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [f"recall@{k}" for k in KS] + [f"hit@{k}" for k in KS] + ["mrr"]

    def mean(rs: list[dict[str, Any]]) -> dict[str, float]:
        return {k: round(sum(r[k] for r in rs) / len(rs), 4) if rs else float("nan") for k in keys}

    out: dict[str, Any] = mean(rows)
    out["questions"] = len(rows)
    out["per_category"] = {
        str(c): {
            **mean([r for r in rows if r["category"] == c]),
            "questions": sum(1 for r in rows if r["category"] == c),
        }
        for c in CATEGORIES
        if any(r["category"] == c for r in rows)
    }
    return out


# --------------------------------------------------------------------------------------
# run
def build_service(db_path: Path, args: argparse.Namespace) -> MemoryService:
    overrides: dict[str, Any] = {}
    if args.cross_encoder:
        overrides.update(reranker="local", reranker_path=str(args.cross_encoder), reranker_timeout_ms=60_000)
    if args.dim_short:
        overrides["embedding_dim_short"] = args.dim_short
    if args.rotation:
        if not bc.has_setting("embedding_rotation_path"):
            raise SystemExit("--rotation: this runtime has no embedding_rotation_path setting")
        overrides["embedding_rotation_path"] = str(args.rotation)
    return bc.quality_service(db_path, cache=not args.no_cache, **overrides)


async def ingest(svc: MemoryService, convs: list[Conversation]) -> dict[str, Any]:
    total, created, t0 = 0, 0, time.perf_counter()
    for conv in convs:
        for s in conv.sessions:
            msgs = [
                MessageBody(
                    content=t.content,
                    speaker=t.speaker,
                    timestamp=s.time,
                    session_id=s.session_id,
                    client_message_id=t.dia_id,
                )
                for t in s.turns
            ]
            res = await svc.add_messages(TENANT, conv.sample_id, msgs)
            # IngestResult.messages is in input order (stored or pre-existing message per input)
            for t, m in zip(s.turns, res.messages, strict=True):
                conv.dia_to_msg[t.dia_id] = m.id
                conv.msg_to_dia[m.id] = t.dia_id
            total += len(msgs)
            created += sum(res.created)
    seconds = time.perf_counter() - t0
    assert isinstance(svc.telemetry, bc.RecordingTelemetry)
    svc.telemetry.take()
    return {
        "messages": total,
        "created": created,
        "seconds": round(seconds, 2),
        "messages_per_s": round(created / seconds, 1) if created else None,
    }


async def evaluate_recipe(
    svc: MemoryService, convs: list[Conversation], recipe: str, now_mode: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    rows: list[dict[str, Any]] = []
    latencies: list[float] = []
    assert isinstance(svc.telemetry, bc.RecordingTelemetry)
    svc.telemetry.take()
    degraded = 0
    for conv in convs:
        turn_ids = conv.turn_ids
        now = conv.last_time if now_mode == "last-session" else None
        for qi, q in enumerate(conv.questions):
            evidence = {e for e in q.evidence if e in turn_ids}
            if not evidence:
                continue
            t0 = time.perf_counter()
            res = await svc.search(TENANT, conv.sample_id, q.text, limit=max(KS), recipe=recipe, now=now)
            latencies.append((time.perf_counter() - t0) * 1000)
            degraded += bool(res.degraded)
            ranked = [
                {conv.msg_to_dia[m] for m in h.memory.source_message_ids if m in conv.msg_to_dia} for h in res.hits
            ]
            row = score_question(ranked, evidence)
            row.update(sample_id=conv.sample_id, question=qi, category=q.category)
            rows.append(row)
    records = svc.telemetry.take()
    summary = aggregate(rows)
    summary.update(bc.latency_summary(latencies, prefix="search_"))
    summary["stage_means_ms"] = bc.stage_means(records)
    summary["degraded_answers"] = degraded
    return summary, rows


async def prefix_study(svc: MemoryService, convs: list[Conversation], args: argparse.Namespace) -> dict[str, Any]:
    """Two-stage vs exact vector search on real conversational text, per prefix size, +/- rotation.

    The turns of every other conversation (odd positions) are pooled into ONE index (a few
    thousand memories) and searched with their questions; the rotation is fitted on the
    vectors of the remaining conversations only (held out). ``--prefix-shortlist`` is the
    prefix shortlist size, kept at a small fraction of the pool as 200 is of 100k memories.
    Figures: overlap of the two-stage top 10 with the exact top 10, and evidence recall@10
    of both. Uses the embedded store's own ``UserVectorIndex``.
    """
    import numpy as np

    from cognis_memory.domain import Owner
    from cognis_memory.encoding.encoder import MatryoshkaEncoder, fit_variance_rotation
    from cognis_memory.stores.numpy_index import UserVectorIndex
    from cognis_memory.stores.values import SearchFilter

    fit_vecs, pool_vecs, pool_dias, queries = [], [], [], []
    for i, conv in enumerate(convs):
        mems = await svc.stores.memories.list_memories(Owner(TENANT, conv.sample_id), limit=100_000)
        vecs = np.stack([m.embedding for m in mems])
        if i % 2 == 0:
            fit_vecs.append(vecs)
            continue
        pool_vecs.append(vecs)
        pool_dias += [f"{conv.sample_id}/{conv.msg_to_dia.get(m.source_message_ids[0], '?')}" for m in mems]
        turn_ids = conv.turn_ids
        for q in conv.questions:
            ev = {f"{conv.sample_id}/{e}" for e in q.evidence if e in turn_ids}
            if ev:
                queries.append((q.text, ev))
    if not fit_vecs or not pool_vecs:
        return {"skipped": "needs at least two conversations"}
    raw = np.concatenate(pool_vecs)
    rotation = fit_variance_rotation(np.concatenate(fit_vecs))
    qraw = svc.encoder.embedder.embed([t for t, _ in queries])
    n, dim = raw.shape
    flt = SearchFilter(owner=Owner(TENANT, "pool"))
    rows = []
    for rotated in (False, True):
        rot = rotation if rotated else None
        full, _ = MatryoshkaEncoder(svc.encoder.embedder, dim_short=dim, rotation=rot).split(raw)
        qfull, _ = MatryoshkaEncoder(svc.encoder.embedder, dim_short=dim, rotation=rot).split(qraw)
        exact_top: list[list[int]] = []
        for d in [int(x) for x in args.prefix_sizes.split(",")]:
            enc = MatryoshkaEncoder(svc.encoder.embedder, dim_short=d, rotation=rot)
            _, short = enc.split(raw)
            _, qshort = enc.split(qraw)
            idx = UserVectorIndex.of_vectors([str(i) for i in range(n)], full, short)
            if not exact_top:
                for qv in qfull:
                    exact_top.append([int(p[0]) for p in idx.search(flt, qv, None, 10, n)[0]])
                rec = np.mean(
                    [
                        len({pool_dias[j] for j in top} & ev) / len(ev)
                        for top, (_, ev) in zip(exact_top, queries, strict=True)
                    ]
                )
                rows.append(
                    {
                        "rotation": rotated,
                        "prefix": dim,
                        "mode": "full",
                        "overlap@10": 1.0,
                        "recall@10": round(float(rec), 4),
                    }
                )
            overlaps, recalls = [], []
            for qv, qs, ex, (_, ev) in zip(qfull, qshort, exact_top, queries, strict=True):
                top = [int(p[0]) for p in idx.search(flt, qv, qs, 10, args.prefix_shortlist)[0]]
                overlaps.append(len(set(top) & set(ex)) / max(len(ex), 1))
                recalls.append(len({pool_dias[j] for j in top} & ev) / len(ev))
            rows.append({"rotation": rotated, "prefix": d, "mode": "two_stage", "overlap@10": round(float(np.mean(overlaps)), 4),
                         "recall@10": round(float(np.mean(recalls)), 4)})  # fmt: skip
    return {"pool_memories": n, "queries": len(queries), "shortlist": args.prefix_shortlist, "rows": rows}


def plot(results: dict[str, Any], out_dir: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    names = list(results)
    colors = plt.get_cmap("tab20")(range(20))
    styles = ["-", "--", "-.", ":"]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(14, 6), gridspec_kw={"width_ratios": [1.2, 1]})
    for i, name in enumerate(names):
        r = results[name]
        ax.plot(KS, [r[f"recall@{k}"] for k in KS], styles[i % 4], marker="o", color=colors[i % 20], label=name,
                linewidth=3 if name == "default" else 1.3)  # fmt: skip
    ax.set_xlabel("k (results)")
    ax.set_ylabel("evidence recall@k")
    ax.set_xticks(KS)
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.set_title("LoCoMo categories 1-4: evidence recall@k per recipe")
    ax.legend(fontsize=7, loc="lower right", ncol=2)
    order = sorted(names, key=lambda n: results[n]["recall@10"])
    vals = [results[n]["recall@10"] for n in order]
    bars = bx.barh(order, vals, color=[colors[names.index(n) % 20] for n in order])
    for b, v in zip(bars, vals, strict=True):
        bx.text(v + 0.005, b.get_y() + b.get_height() / 2, f"{v:.3f}", va="center", fontsize=7)
    bx.set_xlim(0, 1)
    bx.set_xlabel("evidence recall@10")
    bx.tick_params(axis="y", labelsize=8)
    bx.set_title("recall@10 by recipe")
    fig.tight_layout()
    p = out_dir / "locomo_recall.png"
    fig.savefig(p, dpi=100)
    plt.close(fig)
    paths.append(str(p))

    fig, ax = plt.subplots(figsize=(9, 5))
    names = list(results)
    stages: list[str] = []
    for r in results.values():
        for s in r["stage_means_ms"]:
            if s not in stages:
                stages.append(s)
    bottom = [0.0] * len(names)
    for i, s in enumerate(stages):
        vals = [results[n]["stage_means_ms"].get(s, 0.0) for n in names]
        ax.barh(names, vals, left=bottom, label=s.removesuffix("_ms"), color=colors[i % 20])
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    ax.set_xlabel("mean ms per search, summed over stages (BM25 and the vector side overlap in time)")
    ax.set_title("Per-stage latency by recipe (LoCoMo searches, embedded store)")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    p = out_dir / "locomo_stages.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    paths.append(str(p))
    return paths


async def run(args: argparse.Namespace) -> dict[str, Any]:
    data = Path(args.data)
    if not data.is_file():
        raise SystemExit(f"--data: no file at {data} (the LoCoMo file is not part of the project)")
    convs = load_conversations(
        data,
        conversations=args.conversations,
        questions=args.questions,
        captions=not args.no_captions,
        max_sessions=args.sessions,
    )
    tmp = None
    if args.db:
        db_path = Path(args.db)
    else:
        tmp = tempfile.mkdtemp(prefix="bench-locomo-")
        db_path = Path(tmp) / "memory.db"
    recipes = bc.selected_recipes(args.recipes, reranker=bool(args.cross_encoder))
    svc = build_service(db_path, args)
    try:
        await svc.start(run_worker=False)
        ingest_stats = await ingest(svc, convs)
        await bc.wait_until_searchable(svc)
        print(
            f"ingested {ingest_stats['messages']} turns of {len(convs)} conversations "
            f"({ingest_stats['created']} new) in {ingest_stats['seconds']} s",
            file=sys.stderr,
        )
        results: dict[str, Any] = {}
        per_question: dict[str, list[dict[str, Any]]] = {}
        study = await prefix_study(svc, convs, args) if args.prefix_study else None
        if study and "rows" in study:
            print(
                bc.fmt_table(
                    ["rotation", "prefix", "mode", "overlap@10", "evidence R@10"],
                    [[r["rotation"], r["prefix"], r["mode"], r["overlap@10"], r["recall@10"]] for r in study["rows"]],
                )
            )
            print(f"(pool of {study['pool_memories']} memories, {study['queries']} questions, shortlist "
                  f"{study['shortlist']})")  # fmt: skip
        for name in recipes:
            t0 = time.perf_counter()
            results[name], per_question[name] = await evaluate_recipe(svc, convs, name, args.now)
            r = results[name]
            print(
                f"  {name:28s} R@1 {r['recall@1']:.3f}  R@5 {r['recall@5']:.3f}  R@10 {r['recall@10']:.3f}  "
                f"R@20 {r['recall@20']:.3f}  MRR {r['mrr']:.3f}  p50 {r['search_p50_ms']:.1f} ms "
                f"({time.perf_counter() - t0:.0f} s)",
                file=sys.stderr,
            )
    finally:
        await svc.close()
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)

    n_questions = sum(len(c.questions) for c in convs)
    evaluated = next(iter(results.values()))["questions"] if results else 0
    headers = [
        "recipe",
        "R@1",
        "R@5",
        "R@10",
        "R@20",
        "hit@10",
        "MRR",
        *(f"cat{c} R@10" for c in CATEGORIES),
        "p50 ms",
        "p95 ms",
    ]
    rows = []
    for name, r in results.items():
        cats = [r["per_category"].get(str(c), {}).get("recall@10", float("nan")) for c in CATEGORIES]
        rows.append(
            [name, r["recall@1"], r["recall@5"], r["recall@10"], r["recall@20"], r["hit@10"], r["mrr"], *cats,
             r["search_p50_ms"], r["search_p95_ms"]]
        )  # fmt: skip
    table = bc.fmt_table(headers, rows)
    print(table)

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    main_recipe = "default" if "default" in results else (recipes[0] if recipes else None)
    payload = {
        "benchmark": "locomo",
        "data": str(data),
        "conversations": len(convs),
        "questions_total": n_questions,
        "questions_evaluated": evaluated,
        "questions_skipped_no_matching_evidence": n_questions - evaluated,
        "now": args.now,
        "captions": not args.no_captions,
        "ingest": ingest_stats,
        "machine": bc.machine_info(),
        "recipes": {
            n: {**r, "description": RECIPE_DESCRIPTIONS.get(n, ""), "config": RECIPES[n].model_dump()}
            for n, r in results.items()
        },
        "table_markdown": table,
        "prefix_study": study,
    }
    bc.write_json(out_dir / "locomo.json", payload)
    if args.per_question:
        bc.write_json(out_dir / "locomo_per_question.json", per_question)
    pngs = plot(results, out_dir) if results and not args.no_plot else []

    summary: dict[str, Any] = {}
    if main_recipe:
        r = results[main_recipe]
        summary = {
            "recipe": main_recipe,
            **{f"recall@{k}": r[f"recall@{k}"] for k in KS},
            **{f"hit@{k}": r[f"hit@{k}"] for k in KS},
            "mrr": r["mrr"],
            "per_category": {
                c: {k: v for k, v in pc.items() if k.startswith(("recall", "mrr", "questions"))}
                for c, pc in r["per_category"].items()
            },
            "search_p50_ms": r["search_p50_ms"],
            "search_p95_ms": r["search_p95_ms"],
            "search_p99_ms": r["search_p99_ms"],
            "config": RECIPES[main_recipe].model_dump(),
        }
    summary.update(
        questions=evaluated,
        skipped=n_questions - evaluated,
        ingest_messages_per_s=ingest_stats["messages_per_s"],
        recipes={n: {"recall@1": r["recall@1"], "recall@5": r["recall@5"], "recall@10": r["recall@10"],
                     "recall@20": r["recall@20"], "mrr": r["mrr"], "search_p50_ms": r["search_p50_ms"],
                     "search_p95_ms": r["search_p95_ms"]} for n, r in results.items()},
        out=str(out_dir / "locomo.json"),
        plots=pngs,
    )  # fmt: skip
    return summary


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=str(DEFAULT_DATA), help="path of locomo10.json (default: %(default)s)")
    p.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    p.add_argument(
        "--questions", type=int, default=None, help="only the first N questions (categories 1-4) per conversation"
    )
    p.add_argument(
        "--sessions",
        type=int,
        default=None,
        help="only the first N sessions of each conversation "
        "(questions whose evidence lies elsewhere are skipped; for smoke runs)",
    )
    p.add_argument("--recipes", default=None, help="comma-separated recipe names (default: every recipe)")
    p.add_argument(
        "--cross-encoder", default=os.environ.get("COGNIS_RERANKER_PATH"), help="local cross-encoder directory"
    )
    p.add_argument(
        "--now", choices=["last-session", "none"], default="last-session", help="reference time of the questions"
    )
    p.add_argument("--db", default=None, help="keep the embedded store at this SQLite path (re-runs skip known turns)")
    p.add_argument("--no-cache", action="store_true", help="do not use the on-disk embedding cache (bench_common)")
    p.add_argument("--dim-short", type=int, default=None, help="prefix size (default: the service setting)")
    p.add_argument(
        "--rotation", default=None, help="a .npy variance rotation for the prefix (see scripts/fit_rotation.py)"
    )
    p.add_argument(
        "--prefix-study",
        action="store_true",
        help="also measure two-stage vs exact vector search on "
        "the pooled turns of half the conversations, per prefix size, with and without a rotation",
    )
    p.add_argument("--prefix-sizes", default="32,64,96,128,192")
    p.add_argument(
        "--prefix-shortlist", type=int, default=30, help="prefix shortlist of the study (default: %(default)s)"
    )
    p.add_argument("--no-captions", action="store_true", help="ingest turns without their image captions")
    p.add_argument("--per-question", action="store_true", help="also write per-question scores")
    p.add_argument("--no-plot", action="store_true")
    p.add_argument("--out", default=str(bc.REPO / "bench-results"), help="output directory (default: %(default)s)")
    args = p.parse_args(argv)
    summary = asyncio.run(run(args))
    print(json.dumps(summary, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
