"""Retrieval quality on the LongMemEval-S dev set: session and turn recall of every named recipe, in one run.

``longmemeval_s_dev100.json.gz`` (100 questions of LongMemEval-S, MIT licence; read from
``../shared/data``, never copied into the project) holds one question per instance, each
with its own haystack of about 50 chat sessions. Each instance is its own user (tenant
``bench-lme``, user = ``question_id``); every haystack turn is one message through
``MemoryService.add_messages``: ``content`` = the turn text, ``role`` as given (``user`` or
``assistant``, no speaker name: the speaker is the role, as for a real agent's turns),
``timestamp`` = the session's date plus the turn's position in seconds (the order within a
session), ``session_id`` = the haystack session id, ``client_message_id`` =
``<session id>:<turn index>``. The question is a search confined to that user with ``now`` =
``question_date``.

Scores per question, from the results' ``source_message_ids`` only (never from text):

* session recall any@k / all@k: at least one / every answer session (``answer_session_ids``)
  among the sessions of the top k results;
* turn recall any@k: at least one evidence turn (``has_answer``) among the top k results;
* for ``knowledge-update`` questions, newest-first@5: the best-ranked result of an answer
  session within the top 5 comes from the most recent answer session (0 when no answer
  session is in the top 5).

Means overall and per ``question_type``. Vectors of every turn are cached on disk
(``bench_common.CachingEmbedder``, outside the repository), so only the first run embeds:

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/bench_longmemeval.py                # every recipe
    HF_HUB_OFFLINE=1 .venv/bin/python scripts/bench_longmemeval.py --recipes rrf,default --questions 20

With fact extraction by an LLM (any OpenAI-compatible endpoint, a local model: docs/local-llm.md),
the options of ``bench_updates.py``: every haystack session is one synchronous ingest request whose
facts are extracted and decided before the next session's (sessions in date order), ``--concurrency``
questions at once (each its own user). Facts cite the messages they were said in, so a fact maps to
its sessions and turns as a raw turn does, and the metrics are the same. Beside them the run reports
what the LLM did (``extraction``: :func:`cognis_dev.update_set.llm_summary`: answers valid and usable,
decisions by kind, LLM seconds per message, ...). The knowledge-update questions, each with its answer
sessions and 4 others, recorded, then replayed without the model:

    ... scripts/bench_longmemeval.py --types knowledge-update --sessions 4 \\
            --llm-url http://127.0.0.1:8092/v1 --llm-model qwen2.5-coder-1.5b-instruct --record run.jsonl
    ... scripts/bench_longmemeval.py --types knowledge-update --sessions 4 --replay run.jsonl --label replayed

A haystack session is long for a small model's context, and the whole session is one extract call:
the 78 sessions of that run hold 13,700 characters at the median, 23,000 (about 6,000 tokens) at most,
beyond the 4,096 tokens a local server is given by default. Give it 16,384 tokens (``--n-ctx``),
or split sessions with ``--session-turns N`` (requests of at most N turns, each still extracted before
the next). A request the model cannot answer is handed to a job, run once more after the ingest, and
counted (``batches_deferred``, ``jobs``).

The last stdout line is one JSON object; the full results go to ``--out`` as JSON
(``longmemeval.json``, or ``longmemeval-LABEL.json`` with ``--label``).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cognis_dev import bench_common as bc
from cognis_dev.update_set import IngestReport, llm_summary

from cognis_memory.retrieval.recipes import RECIPE_DESCRIPTIONS, RECIPES
from cognis_memory.service import MemoryService, MessageBody

TENANT = "bench-lme"
DEFAULT_DATA = bc.REPO.parent / "shared" / "data" / "longmemeval_s_dev100.json.gz"
LIMIT = 10
METRICS = ("session_any@5", "session_all@5", "session_any@10", "session_all@10", "turn_any@5", "turn_any@10")
KU = "knowledge-update"


@dataclass
class Instance:
    question_id: str
    question_type: str
    question: str
    question_date: datetime
    answer_sessions: set[str]
    session_dates: dict[str, datetime]
    sessions: list[tuple[str, datetime, list[dict[str, Any]]]]
    evidence_turns: set[str] = field(default_factory=set)  # "<session>/<index>" of has_answer turns
    msg_to_turn: dict[str, str] = field(default_factory=dict)  # message id -> "<session>/<index>", by ingest


def parse_date(value: str) -> datetime:
    """'2023/05/30 (Tue) 23:40' -> an aware UTC datetime."""
    return datetime.strptime(value.strip(), "%Y/%m/%d (%a) %H:%M").replace(tzinfo=UTC)


def load_instances(
    path: Path, *, questions: int | None = None, types: set[str] | None = None, sessions: int | None = None
) -> list[Instance]:
    """The dev set's instances; ``sessions`` keeps only the answer sessions and the first N others of
    each haystack (for smoke runs)."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        raw = json.load(fh)
    out = []
    for item in raw:
        if types and item["question_type"] not in types:
            continue
        dates = [parse_date(d) for d in item["haystack_dates"]]
        haystack = list(zip(item["haystack_session_ids"], dates, item["haystack_sessions"], strict=True))
        if sessions is not None:
            others = [h for h in haystack if h[0] not in item["answer_session_ids"]][:sessions]
            haystack = [h for h in haystack if h[0] in item["answer_session_ids"] or h in others]
        inst = Instance(
            question_id=str(item["question_id"]),
            question_type=str(item["question_type"]),
            question=str(item["question"]),
            question_date=parse_date(item["question_date"]),
            answer_sessions=set(item["answer_session_ids"]),
            session_dates=dict(zip(item["haystack_session_ids"], dates, strict=True)),
            sessions=haystack,
        )
        inst.evidence_turns = {
            f"{sid}/{i}" for sid, _, turns in haystack for i, t in enumerate(turns) if t.get("has_answer")
        }
        out.append(inst)
    return out[: questions or None]


def round_robin_by_type(instances: list[Instance]) -> list[Instance]:
    """The instances interleaved over question types (each type in file order), so any prefix is a
    sample of every type in about the file's proportions... of the types that have questions left."""
    by_type: dict[str, list[Instance]] = {}
    for inst in instances:
        by_type.setdefault(inst.question_type, []).append(inst)
    total = len(instances)
    out: list[Instance] = []
    taken = {t: 0 for t in by_type}
    while len(out) < total:
        # the type furthest behind its share of what has been taken so far goes next
        t = min(by_type, key=lambda t: (taken[t] / len(by_type[t]) if taken[t] < len(by_type[t]) else 2.0, t))
        out.append(by_type[t][taken[t]])
        taken[t] += 1
    return out


def turn_message(sid: str, date: datetime, i: int, turn: dict[str, Any]) -> MessageBody:
    return MessageBody(
        content=str(turn["content"]),
        role=str(turn["role"]),
        timestamp=date + timedelta(seconds=i),
        session_id=sid,
        client_message_id=f"{sid}:{i}",
    )


def warm_cache(svc: MemoryService, instances: list[Instance]) -> int:
    """Embed every turn's memory text (as ingest will build it) into the on-disk cache, in batches of
    similar length: the first run's cost is embedding ~46,000 long turns."""
    from cognis_memory.domain import Message

    embedder = svc.encoder.embedder
    if not isinstance(embedder, bc.CachingEmbedder):
        return 0
    texts = []
    for inst in instances:
        for sid, date, turns in inst.sessions:
            for i, t in enumerate(turns):
                if str(t.get("content", "")).strip():
                    m = turn_message(sid, date, i, t)
                    msg = Message(tenant_id=TENANT, user_id=inst.question_id, content=m.content,
                                  timestamp=m.timestamp, role=m.role)  # fmt: skip
                    texts += [r.display_text for r in svc.ingest.resolve([msg])]
    return embedder.warm(texts)


async def ingest(
    svc: MemoryService,
    instances: list[Instance],
    *,
    concurrency: int = 1,
    date_order: bool = False,
    session_turns: int | None = None,
    report: IngestReport | None = None,
) -> dict[str, Any]:
    """Every haystack session one request (synchronous mode: with an extraction LLM, its facts are
    extracted and decided before the next session's), or requests of ``session_turns`` turns at most;
    ``date_order``: sessions sorted by date (the file orders sessions of the same day by hour only
    sometimes), else in file order. ``concurrency``
    questions (users) are ingested at once, each one's sessions in order, as
    :func:`cognis_dev.update_set.ingest` does: users share nothing, so the stored result is the same.
    ``report``, when given, gains per request the extraction counts the service answered with (for
    ``llm_summary``). Returns the counts and seconds of the ingest."""
    report = report if report is not None else IngestReport()
    gate = asyncio.Semaphore(concurrency)
    total = created = warmed = done = 0
    t0 = time.perf_counter()
    if concurrency > 1:  # embedding blocks the event loop: done first, not between the LLM calls of other users
        for inst in instances:
            warmed += warm_cache(svc, [inst])

    async def one_question(inst: Instance) -> None:
        nonlocal total, created, warmed, done
        async with gate:
            if concurrency == 1:
                warmed += warm_cache(svc, [inst])  # per question, so an interrupted first run leaves whole questions
            sessions = sorted(inst.sessions, key=lambda s: s[1]) if date_order else inst.sessions
            for sid, date, turns in sessions:
                kept = [(i, t) for i, t in enumerate(turns) if str(t.get("content", "")).strip()]
                step = session_turns or len(kept)
                for keep in (kept[j : j + step] for j in range(0, len(kept), step)):
                    msgs = [turn_message(sid, date, i, t) for i, t in keep]
                    t1 = time.perf_counter()
                    res = await svc.add_messages(TENANT, inst.question_id, msgs)
                    report.add_batch(inst.question_id, len(msgs), time.perf_counter() - t1, res)
                    for (i, _), m in zip(keep, res.messages, strict=True):
                        inst.msg_to_turn[m.id] = f"{sid}/{i}"
                    total += len(msgs)
                    created += sum(res.created)
            done += 1
            if done % 5 == 0:
                print(f"  ingested {done}/{len(instances)} questions ({total} turns, {time.perf_counter() - t0:.0f} s)",
                      file=sys.stderr)  # fmt: skip

    await asyncio.gather(*(one_question(inst) for inst in instances))
    seconds = time.perf_counter() - t0
    assert isinstance(svc.telemetry, bc.RecordingTelemetry)
    svc.telemetry.take()
    stats = {"messages": total, "created": created, "seconds": round(seconds, 1), "embedded_into_cache": warmed}
    return stats


async def all_jobs(svc: MemoryService) -> list[Any]:
    """Every ingest job of the tenant (one per session request), page by page."""
    jobs: list[Any] = []
    while True:
        page = await svc.list_jobs(TENANT, limit=1000, after=jobs[-1].id if jobs else None)
        jobs += page
        if len(page) < 1000:
            return jobs


def score_question(inst: Instance, ranked_turns: list[list[str]]) -> dict[str, float]:
    """The metrics of one question from the turn keys of each result, best first."""
    row: dict[str, float] = {}
    for k in (5, 10):
        turns = [t for ts in ranked_turns[:k] for t in ts]
        sessions = {t.split("/", 1)[0] for t in turns}
        found = inst.answer_sessions & sessions
        row[f"session_any@{k}"] = float(bool(found))
        row[f"session_all@{k}"] = float(found == inst.answer_sessions)
        row[f"turn_any@{k}"] = float(bool(inst.evidence_turns & set(turns)))
    if inst.question_type == KU:
        newest = max(inst.answer_sessions, key=lambda s: inst.session_dates[s])
        first = next(
            (s for ts in ranked_turns[:5] for s in (t.split("/", 1)[0] for t in ts) if s in inst.answer_sessions), None
        )
        row["newest_first@5"] = float(first == newest)
    return row


def aggregate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def mean(rs: list[dict[str, Any]], keys: tuple[str, ...]) -> dict[str, float]:
        return {k: round(sum(r[k] for r in rs) / len(rs), 4) for k in keys if rs and all(k in r for r in rs)}

    out: dict[str, Any] = mean(rows, METRICS)
    ku = [r for r in rows if r["question_type"] == KU]
    if ku:
        out["newest_first@5"] = mean(ku, ("newest_first@5",))["newest_first@5"]
    out["questions"] = len(rows)
    types = sorted({r["question_type"] for r in rows})
    out["per_type"] = {
        t: {**mean([r for r in rows if r["question_type"] == t], METRICS),
            "questions": sum(1 for r in rows if r["question_type"] == t)}
        for t in types
    }  # fmt: skip
    return out


async def evaluate_recipe(svc: MemoryService, instances: list[Instance], recipe: str) -> tuple[dict[str, Any], list]:
    rows, latencies = [], []
    for inst in instances:
        t0 = time.perf_counter()
        res = await svc.search(TENANT, inst.question_id, inst.question, limit=LIMIT, recipe=recipe,
                               now=inst.question_date)  # fmt: skip
        latencies.append((time.perf_counter() - t0) * 1000)
        ranked = [[inst.msg_to_turn[m] for m in h.memory.source_message_ids if m in inst.msg_to_turn] for h in res.hits]
        row: dict[str, Any] = score_question(inst, ranked)
        row.update(question_id=inst.question_id, question_type=inst.question_type)
        rows.append(row)
    svc.telemetry.take()
    summary = aggregate(rows)
    summary.update(bc.latency_summary(latencies, prefix="search_"))
    return summary, rows


def table(results: dict[str, Any]) -> str:
    headers = ["recipe", *METRICS, "KU newest-first@5", "p50 ms"]
    rows = [[n, *(r[m] for m in METRICS), r.get("newest_first@5", float("nan")), r["search_p50_ms"]]
            for n, r in results.items()]  # fmt: skip
    return bc.fmt_table(headers, rows)


def type_table(results: dict[str, Any], metric: str) -> str:
    types = sorted({t for r in results.values() for t in r["per_type"]})
    headers = ["recipe", *types]
    rows = [[n, *(r["per_type"].get(t, {}).get(metric, float("nan")) for t in types)] for n, r in results.items()]
    return bc.fmt_table(headers, rows)


async def run(args: argparse.Namespace, *, llm: Any = None) -> dict[str, Any]:
    """The benchmark; ``llm``, an object of the LLM protocol, extracts facts in place of ``--llm-url``."""
    data = Path(args.data)
    if not data.is_file():
        raise SystemExit(f"--data: no file at {data} (the LongMemEval file is not part of the project)")
    types = {t.strip() for t in args.types.split(",")} if args.types else None
    instances = load_instances(data, types=types, sessions=args.sessions)
    if args.sample:
        instances = round_robin_by_type(instances)[: args.sample]
    instances = instances[: args.questions or None]
    if args.warm_only:
        svc = bc.quality_service(Path(tempfile.mkdtemp()) / "memory.db")
        shard, shards = (int(x) for x in args.warm_only.split("/"))
        for n, inst in enumerate(instances):
            if n % shards == shard:
                warm_cache(svc, [inst])
                print(f"  warmed question {n + 1}/{len(instances)}", file=sys.stderr, flush=True)
        return {"warmed": len(instances)}
    recipes = bc.selected_recipes(args.recipes)
    llm = bc.extraction_llm(args, llm)
    tmp = None
    if args.db:
        db_path = Path(args.db)
    else:
        tmp = tempfile.mkdtemp(prefix="bench-lme-")
        db_path = Path(tmp) / "memory.db"
    # Haystack turns can be long (up to ~77 KB): each is one message; ingest stores the longest as parts.
    svc = bc.quality_service(db_path, cache=not args.no_cache, embedding_threads=args.threads, extraction_llm=llm)
    results: dict[str, Any] = {}
    per_question: dict[str, list] = {}
    extraction: dict[str, Any] | None = None
    try:
        await svc.start(run_worker=False)
        extracting = svc.ingest.extractor is not None
        report = IngestReport()
        stats = await ingest(svc, instances, report=report, concurrency=args.concurrency, date_order=extracting,
                             session_turns=args.session_turns)  # fmt: skip
        print(f"ingested {stats['messages']} turns of {len(instances)} questions ({stats['created']} new) in "
              f"{stats['seconds']} s", file=sys.stderr)  # fmt: skip
        if extracting:
            await svc.worker.drain(timeout_s=3600)  # extractions a failing LLM handed to jobs
            jobs = await all_jobs(svc)
            extraction = llm_summary(report, {j.id: j.result for j in jobs})
            extraction["jobs"] = dict(Counter(j.status.value for j in jobs))
            print(json.dumps(extraction, indent=1), file=sys.stderr)
        await bc.wait_until_searchable(svc)
        for name in recipes:
            t0 = time.perf_counter()
            results[name], per_question[name] = await evaluate_recipe(svc, instances, name)
            r = results[name]
            print(f"  {name:28s} " + "  ".join(f"{m} {r[m]:.3f}" for m in METRICS)
                  + f"  KU-newest {r.get('newest_first@5', float('nan')):.3f} ({time.perf_counter() - t0:.0f} s)",
                  file=sys.stderr)  # fmt: skip
    finally:
        await svc.close()
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    overall = table(results)
    by_type = type_table(results, "turn_any@5")
    print(overall)
    print("\nturn any@5 per question type:")
    print(by_type)
    out_dir = Path(args.out)
    name = f"longmemeval-{args.label}" if args.label else "longmemeval"
    payload: dict[str, Any] = {
        "benchmark": "longmemeval_s_dev",
        "data": str(data),
        "questions": len(instances),
        "ingest": stats,
        "machine": bc.machine_info(),
        "recipes": {n: {**r, "description": RECIPE_DESCRIPTIONS.get(n, ""), "config": RECIPES[n].model_dump()}
                    for n, r in results.items()},
        "table_markdown": overall,
        "turn_any@5_per_type_markdown": by_type,
    }  # fmt: skip
    llm_name = getattr(llm, "name", None) if llm is not None else None
    if extraction is not None:  # (without an LLM the file is what it always was)
        payload.update(llm=llm_name, structured_output=args.structured_output if args.llm_url else None,
                       concurrency=args.concurrency, session_turns=args.session_turns, extraction=extraction)  # fmt: skip
    bc.write_json(out_dir / f"{name}.json", payload)
    if args.per_question:
        bc.write_json(out_dir / f"{name}_per_question.json", per_question)
    out: dict[str, Any] = {
        "questions": len(instances),
        "recipes": {n: {k: r[k] for k in (*METRICS, "newest_first@5", "search_p50_ms") if k in r}
                    for n, r in results.items()},
        "out": str(out_dir / f"{name}.json"),
    }  # fmt: skip
    if extraction is not None:
        out.update(llm=llm_name, extraction=extraction)
    return out


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=str(DEFAULT_DATA), help="longmemeval_s_dev100.json.gz (default: %(default)s)")
    p.add_argument("--questions", type=int, default=None, help="only the first N questions")
    p.add_argument("--types", default=None, help="only these question types (comma-separated)")
    p.add_argument(
        "--sessions",
        type=int,
        default=None,
        help="keep only the answer sessions and the first N other sessions of each haystack (smoke runs)",
    )
    p.add_argument(
        "--sample",
        type=int,
        default=None,
        help="N questions taken round robin over the question types (each in file order)",
    )
    p.add_argument(
        "--warm-only",
        default=None,
        metavar="I/N",
        help="only embed the turns of every N-th question from the I-th into the cache (parallel first runs)",
    )
    p.add_argument("--db", default=None, help="keep the embedded store at this SQLite path (re-runs skip known turns)")
    p.add_argument("--threads", type=int, default=1, help="embedding CPU threads")
    bc.add_llm_args(p)
    p.add_argument(
        "--concurrency",
        type=int,
        default=1,
        help="questions (users) ingested at once (a local LLM server with as many --parallel slots; default: 1)",
    )
    p.add_argument(
        "--session-turns",
        type=int,
        default=None,
        help="at most N turns per ingest request (default: a whole haystack session; for an LLM of small context)",
    )
    p.add_argument("--label", default=None, help="name of this run's output files (longmemeval-LABEL.json)")
    bc.add_quality_args(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    print(json.dumps(asyncio.run(run(args)), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
