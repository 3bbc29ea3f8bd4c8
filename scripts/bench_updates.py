"""Knowledge updates: does retrieval put what is true *now* first, and still find what was true before?

The data is generated here from the project's own templates (no outside data): many
synthetic users, each telling an assistant about themselves over several chat sessions
months apart. Each user has a few attributes (home, employer, diet, pet, car, ...); some
change once or twice across sessions, the others never change. The statement of a new
value is phrased differently from the old one ("I live in Porto" ... "we finally moved to
Lisbon"), sessions of unrelated chat sit between them, and distractor turns mention the
same kind of thing about other people. Half of the users speak under their own name (a
speaker such as ``Maya``); the other half are plain ``user``/``assistant`` turns.

Three question kinds, each a search confined to that user, asked after the last session:

* **current**: the attribute's present value ("Where do I live now?", "What is Maya's
  dog called?"). current@1 = the top result states the newest value (so it is also ranked
  above every stale statement); stale-above-current = some statement of an older value
  ranks above the best-ranked statement of the newest value (or the newest is missing and
  a stale one is there).
* **previous**: the value before the last change ("Where did I live before?"). history
  recall@5 = fraction of the statements of the previous value within the top 5.
* **unchanged**: an attribute stated once and never changed. unchanged@1 = it is the top
  result.

Every named recipe runs over the same ingested data, like ``bench_locomo.py``:

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/bench_updates.py                      # 60 users, every recipe
    HF_HUB_OFFLINE=1 .venv/bin/python scripts/bench_updates.py --users 8 --recipes rrf,default
    HF_HUB_OFFLINE=1 .venv/bin/python scripts/bench_updates.py --dump users.jsonl  # the generated data

With fact extraction (the design's answer to changing facts), every session is one synchronous
ingest request whose facts are extracted and decided before the next:

    ... scripts/bench_updates.py --oracle --recipes default                  # a perfect model (ground truth)
    ... scripts/bench_updates.py --llm-url http://127.0.0.1:8080/v1 --llm-model qwen --users 10 --recipes default

``--oracle`` answers from the set's own ground truth (:mod:`cognis_dev.update_oracle`), so it
measures the pipeline alone; ``--llm-url`` any OpenAI-compatible endpoint (a local model:
docs/local-llm.md). Beside the retrieval metrics the run then reports what the LLM did: facts per
message, the share of answers valid as given and usable after repair, decisions by kind, LLM
seconds per message, the repairs and drops by kind, and how each changed attribute ended in the
store (:func:`cognis_dev.update_set.fact_audit`). Data, scoring and the oracle live in
``devtools/cognis_dev`` (the CI quality gate uses them too).

The runtime knows nothing of these templates: the mechanism under test (current-state
retrieval, ``retrieval/current_state.py``) uses no attribute or word list, and is checked
on attributes and phrasings this file does not contain.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from cognis_dev import bench_common as bc
from cognis_dev.update_oracle import UpdateSetOracle
from cognis_dev.update_set import TENANT, evaluate, fact_audit, generate, ingest, llm_summary

from cognis_memory.retrieval.recipes import RECIPE_DESCRIPTIONS

HEADERS = ["recipe", "current@1", "stale>current", "current R@5", "history R@5", "previous@1", "unchanged@1"]


def table_row(name: str, r: dict[str, Any]) -> list[Any]:
    return [name, r["current@1"], r["stale_above_current"], r["current_recall@5"], r["history_recall@5"],
            r["previous@1"], r["unchanged@1"]]  # fmt: skip


async def run(args: argparse.Namespace) -> dict[str, Any]:
    histories = generate(args.users, args.seed)
    if args.dump:
        with open(args.dump, "w", encoding="utf-8") as fh:
            for h in histories:
                fh.write(json.dumps(asdict(h)) + "\n")
    recipes = bc.selected_recipes(args.recipes)
    tmp = tempfile.mkdtemp(prefix="bench-updates-")
    settings: dict[str, Any] = {}
    llm = bc.extraction_llm(args, UpdateSetOracle(histories) if args.oracle else None)
    if args.update_min_similarity is not None:
        settings["llm_update_min_similarity"] = args.update_min_similarity
    svc = bc.quality_service(Path(tmp) / "memory.db", cache=not args.no_cache, extraction_llm=llm, **settings)
    results: dict[str, Any] = {}
    per_question: dict[str, list] = {}
    extraction: dict[str, Any] | None = None
    try:
        await svc.start(run_worker=False)
        t0 = time.perf_counter()
        report = await ingest(svc, histories, concurrency=args.concurrency)
        n_turns = sum(len(h.turns) for h in histories)
        print(f"ingested {n_turns} turns of {len(histories)} users in {time.perf_counter() - t0:.1f} s",
              file=sys.stderr)  # fmt: skip
        if svc.ingest.extractor is not None:
            await svc.worker.drain(timeout_s=3600)  # extractions a failing LLM handed to jobs
            jobs = await svc.list_jobs(TENANT, limit=1000)
            extraction = llm_summary(report, {j.id: j.result for j in jobs})
            extraction["jobs"] = dict(Counter(j.status.value for j in jobs))
            extraction["store"] = await fact_audit(svc, histories, maps=report.maps)
            print(json.dumps(extraction, indent=1), file=sys.stderr)
        await bc.wait_until_searchable(svc)
        for name in recipes:
            results[name], per_question[name] = await evaluate(svc, histories, report.maps, name)
            r = results[name]
            print(f"  {name:28s} current@1 {r['current@1']:.3f}  stale>current {r['stale_above_current']:.3f}  "
                  f"history R@5 {r['history_recall@5']:.3f}  unchanged@1 {r['unchanged@1']:.3f}",
                  file=sys.stderr)  # fmt: skip
    finally:
        await svc.close()
        shutil.rmtree(tmp, ignore_errors=True)
    table = bc.fmt_table(HEADERS, [table_row(n, r) for n, r in results.items()])
    print(table)
    llm_name = getattr(llm, "name", None) if llm is not None else None
    out_dir = Path(args.out)
    name = f"updates-{args.label}" if args.label else "updates"
    bc.write_json(out_dir / f"{name}.json", {
        "benchmark": "knowledge_updates", "users": args.users, "seed": args.seed, "llm": llm_name,
        "structured_output": args.structured_output if args.llm_url else None,
        "questions": next(iter(results.values()))["questions"] if results else {},
        "machine": bc.machine_info(), "table_markdown": table, "extraction": extraction,
        "recipes": {n: {**r, "description": RECIPE_DESCRIPTIONS.get(n, "")} for n, r in results.items()},
    })  # fmt: skip
    if args.per_question:
        bc.write_json(out_dir / f"{name}_per_question.json", per_question)
    return {"users": args.users, "llm": llm_name, "recipes": results, "extraction": extraction,
            "out": str(out_dir / f"{name}.json")}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--users", type=int, default=60, help="synthetic users (default: %(default)s)")
    p.add_argument("--seed", type=int, default=1, help="generator seed (default: %(default)s)")
    llm = p.add_mutually_exclusive_group()
    llm.add_argument("--oracle", action="store_true", help="extract with a perfect model (the set's ground truth)")
    bc.add_llm_args(p, llm)
    p.add_argument(
        "--update-min-similarity",
        type=float,
        default=None,
        help="the UPDATE guard's cosine (COGNIS_LLM_UPDATE_MIN_SIMILARITY; 0 turns the guard off)",
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=1,
        help="users ingested at once (a local LLM server with as many --parallel slots; default: 1)",
    )
    p.add_argument("--label", default=None, help="name of this run's output files (updates-LABEL.json)")
    p.add_argument("--dump", default=None, help="also write the generated histories (JSON lines) to this file")
    bc.add_quality_args(p)
    args = p.parse_args(argv)
    print(json.dumps(asyncio.run(run(args)), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
