"""scripts/bench_pair_scores.py: the arithmetic, a real model's logprobs, and the recorded 1.5B figures
that docs/benchmarks.md quotes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from cognis_dev.pair_set import generate

from tests.file_modules import load_file

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "bench_pair_scores.py"
RECORDED = Path(__file__).parent / "recorded" / "qwen2.5-coder-1.5b-pair-scores.jsonl.gz"
BENCHMARKS = ROOT / "docs" / "benchmarks.md"


bench: Any = load_file("bench_pair_scores_under_test", SCRIPT)


def test_the_yes_share_reads_both_answers_in_any_case_and_spacing() -> None:
    share, mass = bench.yes_share(
        [
            {"token": "Yes", "logprob": -0.5},
            {"token": " yes", "logprob": -2.0},
            {"token": "No", "logprob": -1.0},
            {"token": "Maybe", "logprob": -0.1},
        ]
    )
    yes, no = 2.718281828**-0.5 + 2.718281828**-2.0, 2.718281828**-1.0
    assert share == pytest.approx(yes / (yes + no), rel=1e-6)
    assert mass == pytest.approx(yes + no, rel=1e-6)
    assert bench.yes_share([{"token": "Maybe", "logprob": 0.0}]) == (0.5, 0.0)  # neither answer: no evidence


def test_auc_counts_ties_half_and_orders() -> None:
    assert bench.auc([0.9, 0.8], [0.1, 0.2]) == 1.0
    assert bench.auc([0.1], [0.9]) == 0.0
    assert bench.auc([0.5], [0.5]) == 0.5
    assert bench.auc([], [0.5]) is None


def _rows(score_of) -> list[dict[str, Any]]:
    pairs = generate(0)
    return [
        {"variant": "v", "id": p.id, "category": p.category, "label": p.no_longer_true, "ambiguous": p.ambiguous,
         "score": score_of(p), "mass": 1.0}
        for p in pairs
    ]  # fmt: skip


def test_a_perfect_ranking_meets_the_target_and_a_constant_one_does_not() -> None:
    perfect = bench.summary(_rows(lambda p: 0.9 if p.no_longer_true else 0.1))["v"]
    assert perfect["auc"] == 1.0 and perfect["auc_cardinality"] == 1.0
    assert perfect["best_recall_wrong_le_0_02"] == 1.0 and perfect["best_wrong_recall_ge_0_9"] == 0.0
    always_yes = bench.summary(_rows(lambda p: 0.8))["v"]
    assert always_yes["auc"] == 0.5
    assert always_yes["at_half"] == {"recall": 1.0, "wrong": 1.0}
    assert always_yes["best_recall_wrong_le_0_02"] == 0.0  # only "never" keeps wrong answers under 2 %


def test_ambiguous_pairs_are_left_out() -> None:
    rows = _rows(lambda p: 0.5)
    assert bench.summary(rows)["v"]["pairs"] == sum(not r["ambiguous"] for r in rows) < len(rows)


def test_a_question_shared_by_pairs_is_asked_once_and_scored_for_each() -> None:
    pairs = generate(0)[:40]
    asked: list[tuple[str, str]] = []

    def asker(system: str, prompt: str) -> list[dict[str, Any]]:
        asked.append((system, prompt))
        return [{"token": "yes", "logprob": -0.2}, {"token": "no", "logprob": -1.9}]

    rows = bench.score_rows(pairs, ["one_at_a_time", "no_longer_true"], asker, concurrency=1)
    assert len(rows) == 2 * len(pairs)
    keys = {p.newer.key for p in pairs}
    assert len(asked) == len(keys) + len(pairs) == len(set(asked))
    # "yes, two at once" means the attribute holds several values: not a change
    assert all(r["score"] < 0.5 for r in rows if r["variant"] == "one_at_a_time")
    assert all(r["score"] > 0.5 for r in rows if r["variant"] == "no_longer_true")


def _doc_rows() -> dict[str, list[str]]:
    """The rows of benchmarks.md's logprob table: wording -> its cells after the name."""
    text = BENCHMARKS.read_text(encoding="utf-8")
    section = text.split("#### The change check scored by the model's confidence", 1)[1].split("\n#", 1)[0]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"\| `(\w+)` \|(.*)\|\s*$", line)
        if m:
            rows[m.group(1)] = [c.strip() for c in m.group(2).split("|")]
    return rows


def test_the_recorded_1_5b_scores_give_the_figures_the_docs_quote() -> None:
    figures = bench.summary(bench.read_rows(RECORDED))
    doc = _doc_rows()
    assert set(doc) == set(figures) == set(bench.VARIANTS)
    for name, f in figures.items():
        expected = [f"{f['auc']:.3f}", f"{f['auc_cardinality']:.3f}", f"{f['at_half']['recall']:.3f}",
                    f"{f['at_half']['wrong']:.3f}", f"{f['best_recall_wrong_le_0_02']:.3f}",
                    f"{f['best_wrong_recall_ge_0_9']:.3f}"]  # fmt: skip
        assert doc[name] == expected, name


def test_a_real_server_gives_logprobs_the_benchmark_reads(local_llama_server) -> None:
    pairs = generate(0)[:3]
    rows = bench.score_rows(
        pairs,
        ["no_longer_true"],
        lambda system, prompt: bench.ask(local_llama_server.base_url, local_llama_server.model, system, prompt, 300),
        concurrency=1,
    )
    assert len(rows) == 3
    # the model answers yes or no: those two hold most of the first token's probability
    assert all(0.0 <= r["score"] <= 1.0 and r["mass"] > 0.5 for r in rows), rows
