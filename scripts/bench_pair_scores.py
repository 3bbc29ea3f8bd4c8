"""How well a model's *confidence* separates changed facts from facts that still hold, on the pair set.

The change check asks a model "is the older fact no longer true?" and reads its answer. A small model
can rank pairs correctly while its answers all say "yes"; this benchmark tells the two apart. For each
labelled pair of :mod:`cognis_dev.pair_set` and each question wording (``--variants``) it asks an
OpenAI-compatible server for one answer token with ``logprobs`` and scores the pair by
P("no longer true") = P(yes) / (P(yes) + P(no)) (for wordings where "no" means changed, 1 minus that).
It reports, per wording, on the pairs that are not marked ambiguous:

* ``auc``: the chance that a changed pair scores above one that still holds (0.5 is a coin);
* ``auc_cardinality``: the same on the pairs where only the attribute's cardinality decides
  (``change`` and ``ended`` against ``multi_valued``: the pairs code cannot settle by subject or key);
* ``at_half``: recall of "no longer true" and the rate of wrong "no longer true" at a score of 0.5
  (what reading the answer gives);
* ``best_recall_wrong_le_0_02`` and ``best_wrong_recall_ge_0_9``: the best operating points any
  threshold gives, chosen after the fact on the same pairs, so an upper bound (issue 30's target is
  recall >= 0.90 with wrong <= 0.02).

    python -m cognis_dev.local_llm serve --model qwen2.5-coder-1.5b-instruct --kind llama-server --port 8092 &
    .venv/bin/python scripts/bench_pair_scores.py --llm-url http://127.0.0.1:8092/v1 --record scores.jsonl
    .venv/bin/python scripts/bench_pair_scores.py --replay scores.jsonl      # the figures again, no model

The server must return ``logprobs`` with ``top_logprobs`` for chat completions (llama.cpp's
llama-server and OpenAI do; Bedrock's Converse API does not, so a Bedrock model is measured by the
answer-reading benchmarks instead).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import sys
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.request import Request, urlopen

from cognis_dev.pair_set import Claim, LabelledPair, generate

CARDINALITY = ("change", "ended", "multi_valued")


def claim_text(claim: Claim) -> str:
    """A claim as an extraction model's fact reads: "Maya's job title: nurse", "The user's gym: PulseFit"."""
    who = "The user" if claim.subject.strip().lower() == "user" else claim.subject.strip()
    owner = f"{who}'" if who.endswith("s") and not who.endswith("'s") else f"{who}'s"
    return f"{owner} {claim.key}: {claim.value}"


def said(claim: Claim) -> str:
    return f"{claim.said.day} {claim.said:%B %Y}"


@dataclass(frozen=True)
class Variant:
    """One wording: the system and user messages for a pair, and which answer means "no longer true"."""

    system: str
    prompt: Callable[[LabelledPair], str]
    changed_answer: str  # "yes" or "no"


VARIANTS: dict[str, Variant] = {
    # the change check's wording (the narrow-question design, main's history at 0029546)
    "no_longer_true": Variant(
        "You keep a person's facts up to date. You are given an older fact and a newer fact about the same "
        "person, each with the date it was said. Answer yes when the older fact is no longer true because of the "
        "newer one: the newer fact gives the same thing a different value (another city, another job, another "
        "partner, a different routine) or says that it ended or stopped. Answer no when both can be true at the "
        "same time: the newer fact adds one more item (another pet, another hobby, one more language or friend), "
        "adds a detail, is about something else, or says the same thing again.",
        lambda p: (
            f"Older fact (said {said(p.older)}): {claim_text(p.older)}\nNewer fact (said {said(p.newer)}): "
            f"{claim_text(p.newer)}\nIs the older fact no longer true? Answer yes or no."
        ),
        "yes",
    ),
    "both_true": Variant(
        "You judge whether two facts about a person can both be true at the same time. Answer yes or no.",
        lambda p: (
            f"Fact A: {claim_text(p.older)}\nFact B: {claim_text(p.newer)}\n"
            "Can fact A and fact B both be true at the same time?"
        ),
        "no",
    ),
    "still_true": Variant(
        "Answer yes or no.",
        lambda p: (
            f"On {said(p.older)} we noted: {claim_text(p.older)}\nOn {said(p.newer)} we noted: "
            f"{claim_text(p.newer)}\nIs it still true now that {claim_text(p.older)}?"
        ),
        "no",
    ),
    # about the attribute alone: one question per key, whatever the values
    "one_at_a_time": Variant(
        "Answer yes or no.",
        lambda p: f"Can one person have two different {p.newer.key} at the same time?",
        "no",
    ),
}


def yes_share(top_logprobs: Iterable[dict[str, Any]]) -> tuple[float, float]:
    """P(yes) / (P(yes) + P(no)) over the first token's alternatives (any case, spaces stripped), and the
    probability mass the two answers hold (a low mass: the model meant to say something else)."""
    yes = no = 0.0
    for alt in top_logprobs:
        word = str(alt.get("token", "")).strip().lower()
        if word == "yes":
            yes += math.exp(float(alt["logprob"]))
        elif word == "no":
            no += math.exp(float(alt["logprob"]))
    return (yes / (yes + no) if yes + no > 0 else 0.5), yes + no


def ask(url: str, model: str, system: str, prompt: str, timeout: float) -> list[dict[str, Any]]:
    body = {"model": model, "messages": [{"role": "system", "content": system}, {"role": "user", "content": prompt}],
            "max_tokens": 1, "temperature": 0, "logprobs": True, "top_logprobs": 20}  # fmt: skip
    request = Request(f"{url.rstrip('/')}/chat/completions", data=json.dumps(body).encode(),
                      headers={"Content-Type": "application/json"})  # fmt: skip
    with urlopen(request, timeout=timeout) as answer:
        content = json.load(answer)["choices"][0]["logprobs"]["content"]
    return list(content[0]["top_logprobs"])


def score_rows(pairs: list[LabelledPair], names: list[str], asker: Callable[[str, str], list[dict[str, Any]]],
               concurrency: int = 2) -> list[dict[str, Any]]:  # fmt: skip
    """One row per (wording, pair); a question asked for several pairs (one per key) is asked once."""
    questions = {(VARIANTS[n].system, VARIANTS[n].prompt(p)) for n in names for p in pairs}
    with ThreadPoolExecutor(concurrency) as pool:
        answers = dict(zip(questions, pool.map(lambda q: asker(*q), questions), strict=True))
    rows = []
    for name in names:
        variant = VARIANTS[name]
        for pair in pairs:
            share, mass = yes_share(answers[(variant.system, variant.prompt(pair))])
            score = share if variant.changed_answer == "yes" else 1.0 - share
            rows.append({"variant": name, "id": pair.id, "category": pair.category, "label": pair.no_longer_true,
                         "ambiguous": pair.ambiguous, "score": round(score, 6), "mass": round(mass, 6)})  # fmt: skip
    return rows


def auc(pos: list[float], neg: list[float]) -> float | None:
    """P(a positive scores above a negative), ties counted half."""
    if not pos or not neg:
        return None
    wins = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in pos for b in neg)
    return round(wins / (len(pos) * len(neg)), 4)


def _rate(scores: list[float], threshold: float) -> float:
    return sum(s >= threshold for s in scores) / len(scores)


def summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The figures per wording (module docstring), ambiguous pairs left out."""
    out: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(r["variant"] for r in rows):
        clear = [r for r in rows if r["variant"] == name and not r["ambiguous"]]
        pos = [r["score"] for r in clear if r["label"]]
        neg = [r["score"] for r in clear if not r["label"]]
        card = [r for r in clear if r["category"] in CARDINALITY]
        thresholds = sorted(set(pos + neg)) + [math.inf]
        out[name] = {
            "pairs": len(clear), "changed": len(pos),
            "auc": auc(pos, neg),
            "auc_cardinality": auc([r["score"] for r in card if r["label"]], [r["score"] for r in card if not r["label"]]),
            "at_half": {"recall": round(_rate(pos, 0.5), 4), "wrong": round(_rate(neg, 0.5), 4)},
            "best_recall_wrong_le_0_02": round(max(_rate(pos, t) for t in thresholds if _rate(neg, t) <= 0.02), 4),
            "best_wrong_recall_ge_0_9": round(min((_rate(neg, t) for t in thresholds if _rate(pos, t) >= 0.9),
                                                  default=1.0), 4),
        }  # fmt: skip
    return out


def read_rows(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r, sort_keys=True) + "\n" for r in rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--llm-url", default=None, help="an OpenAI-compatible endpoint that returns logprobs")
    p.add_argument("--llm-model", default="qwen2.5-coder-1.5b-instruct", help="model name (default: %(default)s)")
    p.add_argument("--llm-timeout", type=float, default=300.0, help="call timeout, s (default: %(default)s)")
    p.add_argument("--variants", default=",".join(VARIANTS), help="wordings, comma-separated (default: all)")
    p.add_argument("--seed", type=int, default=0, help="pair set seed (default: %(default)s)")
    p.add_argument("--concurrency", type=int, default=2, help="questions in flight (default: %(default)s)")
    p.add_argument("--record", default=None, help="write the scored rows here (JSON lines; .gz compresses)")
    p.add_argument("--replay", default=None, help="the figures from rows written by --record, no model")
    args = p.parse_args(argv)
    if args.replay:
        rows = read_rows(Path(args.replay))
    elif args.llm_url:
        names = [n.strip() for n in args.variants.split(",") if n.strip()]
        unknown = sorted(set(names) - set(VARIANTS))
        if unknown:
            p.error(f"--variants: unknown {unknown}; known {sorted(VARIANTS)}")
        rows = score_rows(generate(args.seed), names,
                          lambda system, prompt: ask(args.llm_url, args.llm_model, system, prompt, args.llm_timeout),
                          args.concurrency)  # fmt: skip
        if args.record:
            write_rows(Path(args.record), rows)
    else:
        p.error("--llm-url or --replay is needed")
    print(json.dumps(summary(rows), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
