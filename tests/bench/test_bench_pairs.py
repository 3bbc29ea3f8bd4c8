"""scripts/bench_pairs.py end to end with a model that always says "no longer true": the figures it reports
follow from the pair set and from what ingest asks (code decides some pairs without a question)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from cognis_dev.pair_set import generate
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[2]


def _script() -> Any:
    spec = importlib.util.spec_from_file_location("bench_pairs", ROOT / "scripts" / "bench_pairs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class AlwaysYes:
    name = "always-yes"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def generate_structured(
        self, *, system: str, prompt: str, response_model: type[BaseModel], schema_name: str
    ) -> Any:
        assert schema_name == "fact_change"
        self.prompts.append(prompt)
        return response_model.model_validate({"no_longer_true": "yes"})


async def test_the_pair_benchmark_reports_what_code_and_model_decide(tmp_path: Path) -> None:
    bench = _script()
    llm = AlwaysYes()
    args = bench.main.__globals__["argparse"].Namespace(
        seed=0, llm_url=None, llm_model="x", llm_timeout=1.0, replay=None, record=None, concurrency=2,
        label="t", out=str(tmp_path),
    )  # fmt: skip
    out = await bench.run(args, llm=llm)
    pairs = [p for p in generate(0) if not p.ambiguous]
    assert len(llm.prompts) == len(generate(0))  # the model alone is asked every pair
    assert out["model_alone"]["recall"] == 1.0 and out["model_alone"]["wrong_yes"] == 1.0
    negatives = [p for p in pairs if not p.no_longer_true]
    positives = [p for p in pairs if p.no_longer_true]
    # the decision says "no longer true" exactly for the pairs ingest asks about (a model saying yes to all)
    asked_negatives = [p for p in negatives if bench.asked_by_ingest(p)]
    asked_positives = [p for p in positives if bench.asked_by_ingest(p)]
    assert out["decision"]["recall"] == round(len(asked_positives) / len(positives), 4) < 1.0
    assert out["decision"]["wrong_yes"] == round(len(asked_negatives) / len(negatives), 4) < 1.0
    # code alone answers the pairs about someone else
    assert out["categories"]["other_person"]["decision"]["wrong_yes"] == 0.0
    assert (tmp_path / "pairs-t.json").exists()
    assert all(p.startswith("Older fact (said ") and "\nNewer fact (said " in p for p in llm.prompts)
