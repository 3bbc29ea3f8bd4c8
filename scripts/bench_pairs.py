"""The change check on a labelled pair set: does the model say "no longer true" exactly when it is?

Each pair of :mod:`cognis_dev.pair_set` (generated from the project's own templates, on attributes the
update set does not use) is two facts of a person with the dates they were said and a label. Every pair
goes through what ingest does with a stored fact and a new one:

* **code first** (:mod:`cognis_memory.ingest.candidates`): a pair about two people, under two attribute
  names, or whose newer value repeats the older, is never asked: the answer is "no";
* otherwise the **change check** (:mod:`cognis_memory.ingest.change_check`) is asked of the model, with
  the facts written as ingest stores them ("Maya's job title: nurse").

Reported per category and overall: recall of "no longer true" on the pairs labelled so, and the rate
of wrong "no longer true" on the others; both for the decision (code + model) and for the model alone
(every pair asked); ambiguous pairs are left out of the figures and reported apart. Also the cost:
calls, prompt and output tokens, seconds.

    python -m cognis_dev.local_llm serve --model qwen2.5-coder-1.5b-instruct --kind llama-server --port 8092 &
    .venv/bin/python scripts/bench_pairs.py --llm-url http://127.0.0.1:8092/v1 --llm-model qwen2.5-coder-1.5b-instruct \\
        --record pairs.jsonl
    .venv/bin/python scripts/bench_pairs.py --replay pairs.jsonl     # again, from the recorded answers
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cognis_dev import bench_common as bc
from cognis_dev.llm_recording import RecordingLLM, ReplayLLM
from cognis_dev.pair_set import CATEGORIES, Claim, LabelledPair, generate

from cognis_memory.config import Settings
from cognis_memory.fact_identity import fact_text, normal_subject, same_attribute, same_subject, same_value
from cognis_memory.ingest.answer_repair import AnswerReport
from cognis_memory.ingest.change_check import ChangeCheck, StatedFact
from cognis_memory.wiring import build_llm


def _stated(claim: Claim) -> StatedFact:
    subject = normal_subject(claim.subject, "user")
    return StatedFact(
        fact_text(subject, claim.key, claim.value), datetime.combine(claim.said, datetime.min.time(), UTC)
    )


def asked_by_ingest(pair: LabelledPair) -> bool:
    """Whether ingest would ask the change check for this pair (:mod:`cognis_memory.ingest.candidates`: the same
    person, the same attribute, not a repetition of the value)."""
    older, newer = pair.older, pair.newer
    if not same_subject(normal_subject(older.subject, "user"), normal_subject(newer.subject, "user")):
        return False
    return same_attribute(older.key, newer.key) and not same_value(older.value, newer.value)


def _rates(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    pos = [r for r in rows if r["label"]]
    neg = [r for r in rows if not r["label"]]
    return {
        "pairs": len(rows),
        "recall": round(sum(r[key] for r in pos) / len(pos), 4) if pos else None,
        "wrong_yes": round(sum(r[key] for r in neg) / len(neg), 4) if neg else None,
        "accuracy": round(sum(r[key] == r["label"] for r in rows) / len(rows), 4) if rows else None,
    }


async def run(args: argparse.Namespace, *, llm: Any = None) -> dict[str, Any]:
    """The figures of one run (see the module docstring); ``llm``, when given, is asked instead of --llm-url."""
    pairs = generate(args.seed)
    if llm is None and args.llm_url:
        llm = build_llm(Settings(llm="openai", openai_base_url=args.llm_url, openai_model=args.llm_model,
                                 llm_timeout_s=args.llm_timeout, llm_max_tokens=64))  # fmt: skip
    if args.replay:
        llm = ReplayLLM(Path(args.replay), fallback=llm)
    if llm is None:
        raise SystemExit("--llm-url or --replay is needed")
    if args.record:
        llm = RecordingLLM(llm, Path(args.record))
    check, report = ChangeCheck(llm), AnswerReport()
    gate = asyncio.Semaphore(args.concurrency)

    async def one(pair: LabelledPair) -> dict[str, Any]:
        async with gate:
            said = await check.no_longer_true(_stated(pair.older), _stated(pair.newer), report)
        asked = asked_by_ingest(pair)
        return {"id": pair.id, "category": pair.category, "label": pair.no_longer_true, "ambiguous": pair.ambiguous,
                "model": said, "decision": said if asked else False, "asked": asked}  # fmt: skip

    started = time.perf_counter()
    rows = await asyncio.gather(*(one(p) for p in pairs))
    wall = time.perf_counter() - started
    clear = [r for r in rows if not r["ambiguous"]]
    out: dict[str, Any] = {
        "benchmark": "change_check_pairs", "seed": args.seed, "llm": getattr(llm, "name", None),
        "decision": _rates(clear, "decision"), "model_alone": _rates(clear, "model"),
        "categories": {c: {"decision": _rates([r for r in clear if r["category"] == c], "decision"),
                           "model_alone": _rates([r for r in clear if r["category"] == c], "model")}
                       for c in CATEGORIES},
        "ambiguous": [{k: r[k] for k in ("id", "label", "model")} for r in rows if r["ambiguous"]],
        "asked_by_ingest": sum(r["asked"] for r in rows),
        "cost": {"calls": report.calls, "prompt_tokens": report.prompt_tokens, "output_tokens": report.output_tokens,
                 "seconds_sum": round(report.seconds, 1), "wall_seconds": round(wall, 1),
                 "unusable": report.unusable, "repairs": dict(report.repairs)},
        "wrong": [{k: r[k] for k in ("id", "label", "model", "decision")} for r in clear if r["decision"] != r["label"]],
        "machine": bc.machine_info(),
    }  # fmt: skip
    name = f"pairs-{args.label}" if args.label else "pairs"
    bc.write_json(Path(args.out) / f"{name}.json", out)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=0, help="pair set seed (default: %(default)s)")
    p.add_argument("--llm-url", default=None, help="an OpenAI-compatible endpoint")
    p.add_argument("--llm-model", default="qwen2.5-coder-1.5b-instruct", help="model name (default: %(default)s)")
    p.add_argument("--llm-timeout", type=float, default=300.0, help="call timeout, s (default: %(default)s)")
    p.add_argument("--replay", default=None, help="answer from a recording (calls it lacks go to --llm-url)")
    p.add_argument("--record", default=None, help="write every call and its answer to this file (JSON lines)")
    p.add_argument("--concurrency", type=int, default=2, help="questions in flight (default: %(default)s)")
    p.add_argument("--label", default=None, help="name of the output file (pairs-LABEL.json)")
    p.add_argument("--out", default=str(bc.REPO / "bench-results"), help="output directory (default: %(default)s)")
    args = p.parse_args(argv)
    result = asyncio.run(run(args))
    print(json.dumps({k: result[k] for k in ("decision", "model_alone", "categories", "cost")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
