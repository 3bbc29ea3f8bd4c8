"""scripts/bench_longmemeval.py with fact extraction: the whole script on a tiny invented LongMemEval-shaped
file, with an in-test LLM object (passed to ``run(args, llm=...)``) that answers every call with an empty
answer, then replayed from its recording; and without an LLM, as the command a developer types.

The data below is written for this test (invented people, places and dates), in the file's format only;
no benchmark text is used.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from cognis_memory.providers.base import LLMOutputError
from tests.file_modules import load_file

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "bench_longmemeval.py"
METRICS = ("session_any@5", "session_all@5", "session_any@10", "session_all@10", "turn_any@5", "turn_any@10",
           "newest_first@5")  # fmt: skip
pytestmark = pytest.mark.slow


def _turn(role: str, content: str, has_answer: bool = False) -> dict[str, Any]:
    return {"role": role, "content": content, "has_answer": has_answer}


LONGMEMEVAL_LIKE = [
    {
        "question_id": "invented-ku-1",
        "question_type": "knowledge-update",
        "question": "Which city do I live in now?",
        "question_date": "2023/05/30 (Tue) 23:40",
        "answer": "Tallinn",
        "answer_session_ids": ["s-home-old", "s-home-new"],
        "haystack_dates": ["2023/01/04 (Wed) 09:15", "2023/02/11 (Sat) 18:02", "2023/03/19 (Sun) 10:30",
                           "2023/04/22 (Sat) 16:45"],
        "haystack_session_ids": ["s-home-old", "s-bread", "s-garden", "s-home-new"],
        "haystack_sessions": [
            [_turn("user", "I just signed the lease on a flat in Ghent, right by the canal.", True),
             _turn("assistant", "Congratulations on the flat in Ghent! Canal views are lovely.")],
            [_turn("user", "My sourdough starter smells like nail polish remover, is that bad?"),
             _turn("assistant", "That acetone smell usually means the starter is hungry; feed it more often.")],
            [_turn("user", "Which vegetables can I sow outdoors in early spring?"),
             _turn("assistant", "Peas, radishes and spinach tolerate the cold well.")],
            [_turn("user", "We moved from Ghent to Tallinn last week, the boxes are still everywhere.", True),
             _turn("assistant", "Welcome to Tallinn! Unpacking takes a while, one room at a time.")],
        ],
    },
    {
        "question_id": "invented-ku-2",
        "question_type": "knowledge-update",
        "question": "How many kilometres is my longest run so far?",
        "question_date": "2023/08/02 (Wed) 08:00",
        "answer": "21",
        "answer_session_ids": ["s-run-10", "s-run-21"],
        # the same day's sessions out of hour order, as in the real file
        "haystack_dates": ["2023/06/03 (Sat) 17:20", "2023/06/03 (Sat) 08:05", "2023/07/09 (Sun) 12:00"],
        "haystack_session_ids": ["s-chess", "s-run-10", "s-run-21"],
        "haystack_sessions": [
            [_turn("user", "Can you explain the Sicilian Defence in chess?"),
             _turn("assistant", "It answers 1.e4 with 1...c5, fighting for the centre from the side.")],
            [_turn("user", "Today I ran 10 kilometres without stopping for the first time!", True),
             _turn("assistant", "Ten kilometres is a great milestone, well done.")],
            [_turn("user", "I finished a half marathon this morning, 21 kilometres, my longest run yet.", True),
             _turn("assistant", "A half marathon! That is a huge step up from your 10 km.")],
        ],
    },
]  # fmt: skip

#: what the script computed on the data above before fact extraction was added (its only path then), with the
#: default embedder: a change of the embedder or of these recipes may change them (then run that script again)
_ALL = {"session_any@5": 1.0, "session_all@5": 1.0, "session_any@10": 1.0, "session_all@10": 1.0, "turn_any@5": 1.0,
        "turn_any@10": 1.0}  # fmt: skip
UNCHANGED_METRICS = {"rrf": {**_ALL, "newest_first@5": 1.0}, "default": {**_ALL, "newest_first@5": 0.5}}


class EmptyLLM:
    """The LLM protocol, answering every call with the empty answer of the schema asked for: each list
    field empty; a schema with a required field that is not a list cannot be answered so."""

    name = "empty"

    def __init__(self) -> None:
        self.schemas: list[str] = []

    async def generate_structured(
        self, *, system: str, prompt: str, response_model: type[BaseModel], schema_name: str
    ) -> Any:
        self.schemas.append(schema_name)
        answer: dict[str, Any] = {}
        for name, f in response_model.model_fields.items():
            if typing.get_origin(f.annotation) is list:
                answer[name] = []
            elif f.is_required():
                raise LLMOutputError("scripted")
        return response_model.model_validate(answer)


def _load_script() -> Any:
    """The script as a module (scripts/ is no package to import from), to hand ``run`` an LLM object."""
    return load_file("bench_longmemeval_under_test", SCRIPT)


def _data(tmp_path: Path) -> Path:
    path = tmp_path / "dev.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump(LONGMEMEVAL_LIKE, fh)
    return path


def _args(data: Path, tmp_path: Path, name: str, *extra: str) -> list[str]:
    return ["--data", str(data), "--types", "knowledge-update", "--recipes", "rrf,default", "--no-cache",
            "--db", str(tmp_path / name / "memory.db"), "--out", str(tmp_path), *extra]  # fmt: skip


def _metrics(out: dict[str, Any]) -> dict[str, dict[str, float]]:
    return {n: {k: v for k, v in r.items() if k in METRICS} for n, r in out["recipes"].items()}


async def test_bench_longmemeval_with_an_llm(tmp_path: Path) -> None:
    bench = _load_script()
    data = _data(tmp_path)
    sessions = sum(len(x["haystack_sessions"]) for x in LONGMEMEVAL_LIKE)
    turns = sum(len(s) for x in LONGMEMEVAL_LIKE for s in x["haystack_sessions"])

    # without an LLM: the command as typed, the script's unchanged path
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *_args(data, tmp_path, "plain")],
        capture_output=True, text=True, timeout=300, env=env, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    plain = json.loads(proc.stdout.strip().splitlines()[-1])
    assert plain["questions"] == 2 and "extraction" not in plain
    assert _metrics(plain) == UNCHANGED_METRICS
    written = json.loads((tmp_path / "longmemeval.json").read_text())
    assert "extraction" not in written and written["ingest"]["messages"] == turns

    # with an LLM object (every session one synchronous request, two questions at once), recorded
    llm = EmptyLLM()
    record = tmp_path / "run.jsonl"
    args = bench.parser().parse_args(
        _args(data, tmp_path, "llm", "--concurrency", "2", "--record", str(record), "--label", "empty")
    )
    out = await bench.run(args, llm=llm)
    assert out["out"] == str(tmp_path / "longmemeval-empty.json") and out["llm"] == "empty"
    ext = out["extraction"]
    assert ext["messages"] == turns and ext["batches"] == sessions and ext["batches_deferred"] == 0
    assert ext["answers"] == ext["llm_calls"] == len(llm.schemas) > 0  # (sessions with nothing to extract ask none)
    assert ext["valid_as_given"] == 1.0 and ext["usable_after_repair"] == 1.0
    assert ext["decisions"] == {"ADD": 0, "UPDATE": 0, "DELETE": 0, "NONE": 0, "conflicts": 0}
    assert ext["facts_per_message"] == 0.0 and ext["llm_seconds_per_message"] >= 0.0
    assert set(ext["jobs"]) == {"done"}  # none failed or pending
    # no fact was written, so the store holds the same raw turns: the same scores as without an LLM
    assert _metrics(out) == _metrics(plain)
    written = json.loads((tmp_path / "longmemeval-empty.json").read_text())
    assert written["extraction"] == ext and written["llm"] == "empty" and written["concurrency"] == 2
    assert len(record.read_text().splitlines()) == len(llm.schemas)

    # replayed from the recording, without the object
    args = bench.parser().parse_args(_args(data, tmp_path, "replay", "--replay", str(record), "--label", "replay"))
    again = await bench.run(args)
    assert again["extraction"]["answers"] == ext["answers"] and again["extraction"]["decisions"] == ext["decisions"]
    assert _metrics(again) == _metrics(plain)

    # --session-turns 1: one request per turn, each extracted before the next
    args = bench.parser().parse_args(_args(data, tmp_path, "turns", "--session-turns", "1", "--label", "turns"))
    per_turn = await bench.run(args, llm=EmptyLLM())
    assert per_turn["extraction"]["batches"] == per_turn["extraction"]["messages"] == turns
    assert _metrics(per_turn) == _metrics(plain)
