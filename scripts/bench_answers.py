"""End-to-end answer accuracy: retrieve the context block, let an LLM answer from it, score the answer.

The retrieval benchmarks (``bench_locomo.py``, ``bench_longmemeval.py``) measure whether the right
turns come back; this one measures what an agent using the service would answer. Per dataset:

* **ingest** exactly as the retrieval benchmark does (its own loading and ingest functions are
  reused): the embedded store, the default recipe, raw messages only; with ``--extract`` the
  service's LLM extraction runs during ingest too, on the answering model's endpoint (an extraction
  call that fails leaves the raw messages, is counted, and the run goes on);
* per question, the **context** is ``MemoryService.prompt_block`` for the question (``--context-tokens``,
  default 1500; ``--limit`` hits, default 20; ``now`` = the question's date: LongMemEval's
  ``question_date``, LoCoMo's last session time, the questions being asked after the conversation);
* the **answering model** gets the block, the question's date and the question and answers with JSON
  ``{"answer": ...}`` (``cognis_dev.answer_scoring``: prompts, response models, scoring);
* **scores**: LoCoMo: token F1 as the LoCoMo paper's code computes it (the variant is described in
  ``cognis_dev.answer_scoring``: no stemming) and an LLM judge's verdict against the gold answer;
  LongMemEval: the LLM judge with LongMemEval's rule for the question's type (off-by-one counts for
  temporal reasoning, the updated value for knowledge updates, a rubric for preferences, "cannot be
  answered" for ``_abs`` questions). The judge is the answering model unless ``--judge*`` options
  name another.

A failed answer or judge call (model unreachable, error status, output that is not the requested
JSON) is a row of the results, never the end of the run: a failed answer scores F1 0 and counts as
incorrect; a failed judge call leaves that question out of the judge accuracy; both are counted in
the table.

    .venv/bin/python scripts/bench_answers.py locomo --conversations 1 --questions 20 \\
        --llm-url http://127.0.0.1:8080/v1 --llm-model NAME
    .venv/bin/python scripts/bench_answers.py longmemeval --sample 10 --sessions 5 \\
        --llm bedrock --bedrock-model-id MODEL_ID --aws-region us-east-1

Prints the per-category (LoCoMo) or per-type (LongMemEval) table; writes JSON to ``--out``
(``answers_<dataset>.json``, and ``answers_<dataset>_per_question.json`` with ``--per-question``:
question, gold, answer, F1, verdict, the retrieved memory ids and turns); the last stdout line is
one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import bench_locomo as bl
import bench_longmemeval as blme
from cognis_dev import answer_scoring as sc
from cognis_dev import bench_common as bc

from cognis_memory.config import Settings
from cognis_memory.wiring import build_llm

#: what the judge is told about a LoCoMo category-5 question (its gold is the absence of an answer)
ADVERSARIAL_GOLD = "The conversation does not contain this information."


@dataclass
class Item:
    """One question to answer, whatever the dataset."""

    tenant: str
    user: str
    qid: str
    group: str  # the table's row: LoCoMo category, LongMemEval question type
    question: str
    gold: str
    today: datetime
    rule: sc.JudgeRule
    category: int | None  # LoCoMo category (its F1 rule); None: no F1 (LongMemEval)
    evidence: set[str]
    source_of: dict[str, str] = field(default_factory=dict)  # message id -> turn key, filled by ingest


# --------------------------------------------------------------------------------------
# data
def locomo_items(args: argparse.Namespace) -> tuple[list[bl.Conversation], list[Item], int]:
    """The conversations (``bench_locomo``'s loader) and their questions with gold answers. Questions
    none of whose evidence turns was loaded are skipped (as the retrieval benchmark does)."""
    path = Path(args.data)
    convs = bl.load_conversations(path, conversations=args.conversations, questions=None, max_sessions=args.sessions)
    raw = json.loads(path.read_text(encoding="utf-8"))
    categories = set(bl.CATEGORIES) | ({5} if args.adversarial else set())
    items: list[Item] = []
    skipped = 0
    for conv, entry in zip(convs, raw, strict=False):
        turn_ids = conv.turn_ids
        chosen: list[Item] = []
        for qi, q in enumerate(entry.get("qa", [])):
            category = int(q.get("category", 0))
            if category not in categories:
                continue
            evidence = {e for e in bl.split_evidence(q.get("evidence", [])) if e in turn_ids}
            if not evidence:
                skipped += 1
                continue
            gold = ADVERSARIAL_GOLD if category == 5 else str(q.get("answer", ""))
            chosen.append(
                Item(
                    tenant=bl.TENANT,
                    user=conv.sample_id,
                    qid=f"{conv.sample_id}/q{qi}",
                    group=str(category),
                    question=str(q["question"]),
                    gold=gold,
                    today=conv.last_time,
                    rule=sc.locomo_rule(category),
                    category=category,
                    evidence=evidence,
                    source_of=conv.msg_to_dia,  # the conversation's map, filled by bench_locomo.ingest
                )
            )
        items += chosen[: args.questions or None]
    if args.sample:
        items = sample(items, args.sample, args.seed, key=lambda i: i.group)
    return convs, items, skipped


def longmemeval_items(args: argparse.Namespace) -> tuple[list[blme.Instance], list[Item]]:
    """The instances (``bench_longmemeval``'s loader and sampling) and their gold answers."""
    path = Path(args.data)
    types = {t.strip() for t in args.types.split(",")} if args.types else None
    instances = blme.load_instances(path, types=types, sessions=args.sessions)
    if args.sample:
        if args.seed is not None:
            random.Random(args.seed).shuffle(instances)  # the order within each type; the round robin stays
        instances = blme.round_robin_by_type(instances)[: args.sample]
    instances = instances[: args.questions or None]
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        answers = {str(x["question_id"]): str(x["answer"]) for x in json.load(fh)}
    items = [
        Item(
            tenant=blme.TENANT,
            user=inst.question_id,
            qid=inst.question_id,
            group=inst.question_type,
            question=inst.question,
            gold=answers[inst.question_id],
            today=inst.question_date,
            rule=sc.longmemeval_rule(inst.question_type, inst.question_id),
            category=None,
            evidence=set(inst.evidence_turns),
            source_of=inst.msg_to_turn,  # filled by bench_longmemeval.ingest
        )
        for inst in instances
    ]
    return instances, items


def sample(items: list[Item], n: int, seed: int | None, *, key: Any) -> list[Item]:
    """``n`` items round robin over their groups (each group in file order, or shuffled by ``seed``)."""
    pool = list(items)
    if seed is not None:
        random.Random(seed).shuffle(pool)
    return sc.round_robin(pool, key)[:n]


# --------------------------------------------------------------------------------------
# models
def llm_overrides(
    kind: str,
    *,
    url: str | None,
    model: str | None,
    api_key: str | None,
    bedrock_id: str | None,
    region: str | None,
    timeout: float,
    structured_output: str,
    max_tokens: int | None,
    flag: str,
) -> dict[str, Any]:
    """The :class:`Settings` fields that make ``build_llm`` build this model (``flag`` names the options
    in the error when one is missing). An OpenAI-compatible model's answers are capped at ``max_tokens``
    (a small local model can otherwise run on until the timeout); Bedrock keeps its provider's cap."""
    if kind == "openai":
        if not url or not model:
            raise SystemExit(f"--{flag}-url and --{flag}-model are required for an OpenAI-compatible endpoint")
        out: dict[str, Any] = {
            "llm": "openai",
            "openai_base_url": url,
            "openai_model": model,
            "llm_timeout_s": timeout,
            "llm_structured_output": structured_output,
            "llm_max_tokens": max_tokens,
        }
        if api_key:
            out["openai_api_key"] = api_key
        return out
    prefix = "" if flag == "llm" else f"{flag}-"
    if not bedrock_id:
        raise SystemExit(f"--{prefix}bedrock-model-id is required with --{flag} bedrock")
    out = {"llm": "bedrock", "bedrock_model_id": bedrock_id, "llm_timeout_s": timeout}
    if region:
        out["aws_region"] = region
    return out


def answerer_overrides(args: argparse.Namespace) -> dict[str, Any]:
    return llm_overrides(
        args.llm,
        url=args.llm_url,
        model=args.llm_model,
        api_key=args.llm_api_key,
        bedrock_id=args.bedrock_model_id,
        region=args.aws_region,
        timeout=args.llm_timeout,
        structured_output=args.structured_output,
        max_tokens=args.max_tokens,
        flag="llm",
    )


def judge_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Each judge option defaults to the answerer's."""
    return llm_overrides(
        args.judge or args.llm,
        url=args.judge_url or args.llm_url,
        model=args.judge_model or args.llm_model,
        api_key=args.judge_api_key or args.llm_api_key,
        bedrock_id=args.judge_bedrock_model_id or args.bedrock_model_id,
        region=args.judge_aws_region or args.aws_region,
        timeout=args.judge_timeout or args.llm_timeout,
        structured_output=args.judge_structured_output or args.structured_output,
        max_tokens=args.max_tokens,
        flag="judge",
    )


def build_model(overrides: dict[str, Any]) -> Any:
    """The project's provider for these settings (``wiring.build_llm``)."""
    llm = build_llm(Settings(**overrides))
    if llm is None:  # pragma: no cover - the overrides always name a provider
        raise SystemExit("no LLM configured")
    return llm


class ExtractionTally:
    """The service as the retrieval benchmarks' ingest functions see it, tallying what became of each
    ingest call's fact extraction. A failed extraction does not stop the ingest: the service keeps the
    messages as raw memories, answers ``facts="pending"`` and names the failure in ``degraded``."""

    def __init__(self, svc: Any) -> None:
        self._svc = svc
        self.outcomes: dict[str, int] = {}
        self.failures: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._svc, name)

    async def add_messages(self, tenant_id: str, user_id: str, messages: Any, **kwargs: Any) -> Any:
        result = await self._svc.add_messages(tenant_id, user_id, messages, **kwargs)
        facts = str(getattr(result, "facts", "unknown"))
        self.outcomes[facts] = self.outcomes.get(facts, 0) + 1
        failed = [d for d in getattr(result, "degraded", []) if d.startswith("llm")]
        if failed and not self.failures:
            print(f"  extraction failed (those messages stay raw memories only): {failed[0]}", file=sys.stderr)
        self.failures += failed
        return result


# --------------------------------------------------------------------------------------
# one question
async def evaluate(svc: Any, answerer: Any, judge: Any, item: Item, args: argparse.Namespace) -> dict[str, Any]:
    """Retrieve, answer, score one question; returns its row (failures included, never raises for an LLM)."""
    t0 = time.perf_counter()
    block, _ = await svc.prompt_block(
        item.tenant, item.user, item.question, max_tokens=args.context_tokens, limit=args.limit, now=item.today,
        recipe=args.recipe,
    )  # fmt: skip
    retrieval_ms = (time.perf_counter() - t0) * 1000
    memory_ids = [it.memory.id for it in block.items]
    sources = [[item.source_of[m] for m in it.memory.source_message_ids if m in item.source_of] for it in block.items]
    found = {s for ss in sources for s in ss}
    row: dict[str, Any] = {
        "id": item.qid,
        "group": item.group,
        "question": item.question,
        "gold": item.gold,
        "today": item.today.isoformat(),
        "rule": str(item.rule),
        "answer": None,
        "f1": None,
        "correct": None,
        "judge_reason": None,
        "answer_error": None,
        "judge_error": None,
        "answer_seconds": None,
        "judge_seconds": None,
        "retrieval_ms": round(retrieval_ms, 1),
        "context_tokens": block.tokens,
        "memory_ids": memory_ids,
        "context_turns": sources,
        "evidence_in_context": round(len(item.evidence & found) / len(item.evidence), 4) if item.evidence else None,
    }
    answered = await sc.call_structured(
        answerer, system=sc.ANSWER_SYSTEM, prompt=sc.answer_prompt(item.question, block.text, item.today),
        model=sc.AnswerOut, schema_name=sc.ANSWER_SCHEMA,
    )  # fmt: skip
    row["answer_seconds"] = round(answered.seconds, 3)
    if answered.error is not None:
        row.update(answer_error=answered.error, correct=False, f1=0.0 if item.category is not None else None)
        return row
    answer = answered.value.answer.strip()
    row["answer"] = answer
    if item.category is not None:
        row["f1"] = round(sc.locomo_f1(answer, item.gold, item.category), 4)
    verdict = await sc.call_structured(
        judge, system=sc.JUDGE_SYSTEM, prompt=sc.judge_prompt(item.rule, item.question, item.gold, answer),
        model=sc.Verdict, schema_name=sc.VERDICT_SCHEMA,
    )  # fmt: skip
    row["judge_seconds"] = round(verdict.seconds, 3)
    if verdict.error is not None:
        row["judge_error"] = verdict.error
    else:
        row.update(correct=verdict.value.correct, judge_reason=verdict.value.reason)
    return row


async def evaluate_all(svc: Any, answerer: Any, judge: Any, items: list[Item], args: argparse.Namespace) -> list:
    gate = asyncio.Semaphore(max(1, args.concurrency))
    done = 0
    t0 = time.perf_counter()

    async def one(item: Item) -> dict[str, Any]:
        nonlocal done
        async with gate:
            row = await evaluate(svc, answerer, judge, item, args)
        done += 1
        if done % 10 == 0 or done == len(items):
            print(f"  answered {done}/{len(items)} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
        return row

    return list(await asyncio.gather(*(one(item) for item in items)))


# --------------------------------------------------------------------------------------
# run
async def run(args: argparse.Namespace) -> dict[str, Any]:
    data = Path(args.data)
    if not data.is_file():
        raise SystemExit(f"--data: no file at {data} (the benchmark data is not part of the project)")
    answer_settings = answerer_overrides(args)
    judge_settings = judge_overrides(args)
    if args.dataset == "locomo":
        convs, items, skipped = locomo_items(args)
    else:
        instances, items = longmemeval_items(args)
        skipped = 0
    users = {i.user for i in items}
    if args.dataset == "locomo":  # only the conversations a question is asked about
        convs = [c for c in convs if c.sample_id in users]
    else:
        instances = [i for i in instances if i.question_id in users]

    tmp = None
    if args.db:
        db_path = Path(args.db)
    else:
        tmp = tempfile.mkdtemp(prefix=f"bench-answers-{args.dataset}-")
        db_path = Path(tmp) / "memory.db"
    # extraction answers are longer than the answers here: the service keeps its own token cap
    service_settings = {k: v for k, v in answer_settings.items() if k != "llm_max_tokens"}
    if not args.extract:
        service_settings = {"llm": "none"}
    if args.dataset == "longmemeval":
        service_settings["embedding_threads"] = args.threads
    svc = bc.quality_service(db_path, cache=not args.no_cache, **service_settings)
    answerer = build_model(answer_settings)
    judge = answerer if judge_settings == answer_settings else build_model(judge_settings)
    tally = ExtractionTally(svc)
    try:
        await svc.start(run_worker=False)
        if args.dataset == "locomo":
            stats = await bl.ingest(tally, convs)
        else:
            stats = await blme.ingest(tally, instances)
        stats["extraction"] = {"calls_by_outcome": tally.outcomes, "failures": len(tally.failures)}
        print(f"ingested {stats['messages']} messages for {len(users)} users ({stats['created']} new, "
              f"extraction {'on' if args.extract else 'off'}) in {stats['seconds']} s", file=sys.stderr)  # fmt: skip
        t0 = time.perf_counter()
        rows = await evaluate_all(svc, answerer, judge, items, args)
        seconds = time.perf_counter() - t0
    finally:
        await svc.close()
        for llm in {id(answerer): answerer, id(judge): judge}.values():
            if hasattr(llm, "aclose"):
                await llm.aclose()
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)

    label = "category" if args.dataset == "locomo" else "question type"
    groups = sc.summarize_groups(rows, key=lambda r: r["group"])
    headers, table_rows = sc.table_rows(groups, label)
    table = bc.fmt_table(headers, table_rows)
    print(table)
    overall = groups["all"]
    failures = [r for r in rows if r["answer_error"] or r["judge_error"]]
    for r in failures[:5]:
        print(f"  failed {r['id']}: {r['answer_error'] or r['judge_error']}", file=sys.stderr)

    out_dir = Path(args.out)
    name = f"answers_{args.dataset}"
    payload = {
        "benchmark": name,
        "data": str(data),
        "questions": len(rows),
        "questions_skipped_no_matching_evidence": skipped,
        "answerer": answerer.name,
        "judge": judge.name,
        "settings": {
            "context_tokens": args.context_tokens,
            "limit": args.limit,
            "recipe": args.recipe or bc.setting(svc.settings, "recipe"),
            "extract": args.extract,
            "concurrency": args.concurrency,
            "seed": args.seed,
            "max_tokens": args.max_tokens,
            "structured_output": args.structured_output,
            "sessions": args.sessions,
        },
        "ingest": stats,
        "extraction_failure_examples": tally.failures[:5],
        "seconds": round(seconds, 1),
        "mean_retrieval_ms": round(sum(r["retrieval_ms"] for r in rows) / len(rows), 1) if rows else None,
        "mean_context_tokens": round(sum(r["context_tokens"] for r in rows) / len(rows), 1) if rows else None,
        "groups": groups,
        "table_markdown": table,
        "machine": bc.machine_info(),
    }
    bc.write_json(out_dir / f"{name}.json", payload)
    if args.per_question:
        bc.write_json(out_dir / f"{name}_per_question.json", {"questions": rows})
    return {
        "dataset": args.dataset,
        "questions": len(rows),
        "f1": overall["f1"],
        "judge_accuracy": overall["judge_accuracy"],
        "judged": overall["judged"],
        "answer_failures": overall["answer_failures"],
        "judge_failures": overall["judge_failures"],
        "mean_answer_s": overall["mean_answer_s"],
        "groups": {g: s for g, s in groups.items() if g != "all"},
        "answerer": answerer.name,
        "judge": judge.name,
        "out": str(out_dir / f"{name}.json"),
    }


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    m = common.add_argument_group("answering model (an OpenAI-compatible endpoint or Bedrock)")
    m.add_argument("--llm", choices=["openai", "bedrock"], default="openai", help="provider (default: %(default)s)")
    m.add_argument("--llm-url", default=None, help="base URL of an OpenAI-compatible endpoint (…/v1)")
    m.add_argument("--llm-model", default=None, help="model name at that endpoint")
    m.add_argument("--llm-api-key", default=None, help="bearer key of that endpoint")
    m.add_argument("--bedrock-model-id", default=None, help="Bedrock model id or inference profile (--llm bedrock)")
    m.add_argument("--aws-region", default=None, help="AWS region of Bedrock")
    m.add_argument("--llm-timeout", type=float, default=120.0, help="seconds per call (default: %(default)s)")
    m.add_argument(
        "--max-tokens",
        type=int,
        default=512,
        help="answer token cap of an OpenAI-compatible answerer and judge (default: %(default)s)",
    )
    m.add_argument(
        "--structured-output",
        choices=["auto", "json_schema", "json_object", "prompt"],
        default="auto",
        help="how an OpenAI-compatible model is asked for JSON (llm_structured_output; default: %(default)s)",
    )
    j = common.add_argument_group("judge model (each option defaults to the answering model's)")
    j.add_argument("--judge", choices=["openai", "bedrock"], default=None)
    j.add_argument("--judge-url", default=None)
    j.add_argument("--judge-model", default=None)
    j.add_argument("--judge-api-key", default=None)
    j.add_argument("--judge-bedrock-model-id", default=None)
    j.add_argument("--judge-aws-region", default=None)
    j.add_argument("--judge-timeout", type=float, default=None)
    j.add_argument("--judge-structured-output", choices=["auto", "json_schema", "json_object", "prompt"], default=None)
    r = common.add_argument_group("retrieval and run")
    r.add_argument("--context-tokens", type=int, default=1500, help="prompt block budget (default: %(default)s)")
    r.add_argument("--limit", type=int, default=20, help="search hits the block is built from (default: %(default)s)")
    r.add_argument("--recipe", default=None, help="retrieval recipe (default: the service's default)")
    r.add_argument("--extract", action="store_true", help="run the service's LLM extraction during ingest "
                   "(on the answering model's endpoint)")  # fmt: skip
    r.add_argument("--concurrency", type=int, default=1, help="questions in flight at once (default: %(default)s)")
    r.add_argument("--seed", type=int, default=None, help="with --sample: shuffle each group before the round robin")
    r.add_argument("--sample", type=int, default=None, help="N questions round robin over categories / types")
    r.add_argument("--sessions", type=int, default=None, help="smoke runs: fewer sessions (see the retrieval script)")
    r.add_argument("--db", default=None, help="keep the embedded store at this SQLite path (re-runs skip known turns)")
    r.add_argument("--no-cache", action="store_true", help="do not use the on-disk embedding cache")
    r.add_argument("--per-question", action="store_true", help="also write every question's row")
    r.add_argument("--out", default=str(bc.REPO / "bench-results"), help="output directory (default: %(default)s)")

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="dataset", required=True)
    lo = sub.add_parser("locomo", parents=[common], help="LoCoMo: F1 and judge per category")
    lo.add_argument("--data", default=str(bl.DEFAULT_DATA), help="locomo10.json (default: %(default)s)")
    lo.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    lo.add_argument("--questions", type=int, default=None, help="only the first N questions per conversation")
    lo.add_argument("--adversarial", action="store_true", help="also category 5 (correct: says it cannot answer)")
    lme = sub.add_parser("longmemeval", parents=[common], help="LongMemEval-S dev: judge per question type")
    lme.add_argument("--data", default=str(blme.DEFAULT_DATA), help="the dev set (default: %(default)s)")
    lme.add_argument("--questions", type=int, default=None, help="only the first N questions")
    lme.add_argument("--types", default=None, help="only these question types (comma-separated)")
    lme.add_argument("--threads", type=int, default=1, help="embedding CPU threads")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    print(json.dumps(asyncio.run(run(args)), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
