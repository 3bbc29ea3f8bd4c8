"""Retrieval quality gate: the default recipe on the project's own knowledge-update set.

``cognis_dev.update_set`` (the data of ``scripts/bench_updates.py``) generates synthetic users whose home, job, diet, pet, ... change
across sessions (the project's own templates, no outside data). This test ingests a small,
fixed sample of them through the real service (embedded store, offline model, no LLM) and
scores the default recipe. It fails when any metric falls more than ``margin`` below (for
stale-above-current: rises above) the baseline recorded in ``quality_baseline.json``, so a
change that loses current-state ordering or recall cannot land unnoticed.

Each named embedding model has its own baseline (its thresholds are its own): the default
all-MiniLM-L6-v2 in ``quality_baseline.json``, bge-small-en-v1.5 (fetched once from Maven Central
into the model cache) in ``quality_baseline_bge-small-en-v1.5.json``.

After an intended improvement, record the new figures with
``.venv/bin/python -m tests.bench.test_quality_gate --record [--model NAME]`` (it prints them and
rewrites that baseline) and say why in the commit.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: embedding model -> its baseline file
BASELINES = {
    "all-MiniLM-L6-v2": Path(__file__).with_name("quality_baseline.json"),
    "bge-small-en-v1.5": Path(__file__).with_name("quality_baseline_bge-small-en-v1.5.json"),
}

#: metric -> direction: +1 higher is better, -1 lower is better
GATED = {"current@1": 1, "stale_above_current": -1, "current_recall@5": 1, "history_recall@5": 1,
         "unchanged@1": 1, "unchanged_recall@5": 1}  # fmt: skip


async def measure(tmp: Path, users: int, seed: int, recipe: str, model: str) -> dict[str, Any]:
    from cognis_dev import bench_common as bc
    from cognis_dev import update_set as bu

    from cognis_memory.providers.embedding_models import EMBEDDING_MODELS

    if EMBEDDING_MODELS[model].fetchable:
        await asyncio.to_thread(EMBEDDING_MODELS[model].fetch)  # once per model cache
    histories = bu.generate(users, seed)
    svc = bc.quality_service(tmp / "memory.db", cache=False, embedding_model=model)
    await svc.start(run_worker=False)
    try:
        report = await bu.ingest(svc, histories)
        summary, _ = await bu.evaluate(svc, histories, report.maps, recipe)
    finally:
        await svc.close()
    return summary


def regressions(measured: dict[str, Any], baseline: dict[str, Any]) -> list[str]:
    margin = baseline["margin"]
    out = []
    for metric, direction in GATED.items():
        was, now = baseline["metrics"][metric], measured[metric]
        if (was - now) * direction > margin + 1e-9:
            out.append(f"{metric}: {now:.3f} (baseline {was:.3f}, allowed margin {margin})")
    return out


@pytest.mark.slow
@pytest.mark.parametrize("model", list(BASELINES))
async def test_default_recipe_holds_its_knowledge_update_quality(tmp_path: Path, model: str) -> None:
    baseline = json.loads(BASELINES[model].read_text(encoding="utf-8"))
    measured = await measure(tmp_path, baseline["users"], baseline["seed"], baseline["recipe"], model)
    assert measured["questions"] == baseline["questions"]  # the generator is deterministic
    bad = regressions(measured, baseline)
    assert not bad, "retrieval quality regressed on the knowledge-update set:\n" + "\n".join(bad)


def test_gate_flags_a_drop_beyond_the_margin() -> None:
    baseline = {"margin": 0.05, "metrics": {m: 0.5 for m in GATED}}
    ok = {m: 0.5 - 0.04 * d for m, d in GATED.items()}
    assert regressions(ok, baseline) == []
    worse = dict(ok, **{"current@1": 0.44, "stale_above_current": 0.56})
    assert [r.split(":")[0] for r in regressions(worse, baseline)] == ["current@1", "stale_above_current"]


if __name__ == "__main__":  # record a new baseline
    import tempfile

    if "--record" not in sys.argv:
        raise SystemExit("usage: python -m tests.bench.test_quality_gate --record [--model NAME]")
    model = sys.argv[sys.argv.index("--model") + 1] if "--model" in sys.argv else "all-MiniLM-L6-v2"
    default = json.loads(BASELINES["all-MiniLM-L6-v2"].read_text(encoding="utf-8"))
    path = BASELINES[model]
    base = json.loads(path.read_text(encoding="utf-8")) if path.exists() else dict(default)
    m = asyncio.run(measure(Path(tempfile.mkdtemp()), base["users"], base["seed"], base["recipe"], model))
    base["metrics"] = {k: m[k] for k in GATED}
    base["questions"] = m["questions"]
    path.write_text(json.dumps(base, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(base, indent=2))
