"""The examples: the demo conversation's shape, and the in-process script run as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

from cognis_memory.timeexpr import find_time_spans

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_demo_conversation_shape():
    rows = [json.loads(line) for line in (EXAMPLES / "demo_conversation.jsonl").read_text("utf-8").splitlines()]
    assert 25 <= len(rows) <= 40
    assert {r["user_id"] for r in rows} == {"demo-user"}
    assert sorted({r["session_id"] for r in rows}) == ["session-1", "session-2"]
    assert {r["speaker"] for r in rows} == {"Maya", "Sol"}
    assert len({r["client_message_id"] for r in rows}) == len(rows)
    times = [datetime.fromisoformat(r["timestamp"].replace("Z", "+00:00")) for r in rows]
    assert times == sorted(times) and (times[-1] - times[0]).days >= 13
    relative = [s.text for r, t in zip(rows, times, strict=True) for s in find_time_spans(r["content"], t)]
    assert {"last weekend", "two weeks ago", "next month", "yesterday"} <= {s.lower() for s in relative}
    text = " ".join(r["content"] for r in rows)
    for changed_fact in ("I live in Porto", "moved to Lisbon", "data analyst", "product manager"):
        assert changed_fact in text


def test_in_process_example_runs(tmp_path):
    env = {**os.environ, "COGNIS_DATA_DIR": str(tmp_path / "data"), "HF_HUB_OFFLINE": "1"}
    for var in ("COGNIS_STORE", "COGNIS_LLM", "COGNIS_RERANKER", "COGNIS_RECIPE"):
        env.pop(var, None)
    cmd = [sys.executable, str(EXAMPLES / "in_process.py")]
    first = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert first.returncode == 0, first.stderr[-2000:]
    out = first.stdout
    assert f"stored 30 new of 30 messages in {tmp_path / 'data'}" in out
    assert "updated memory" in out and "v2 replaces v1" in out
    answers = out.split("Q: ")[1:]
    assert len(answers) == 5
    assert answers[0].startswith("Where does Maya live?")
    assert "1. [" in answers[0] and "Maya lives in Lisbon" in answers[0].splitlines()[1]
    assert "(temporal: explicit" in answers[2]  # "last weekend"
    assert "earlier v1: Hi! I'm Maya. I live in Porto" in answers[4]  # the history question
    assert not any(line.startswith("{") for line in out.splitlines())  # quiet telemetry
