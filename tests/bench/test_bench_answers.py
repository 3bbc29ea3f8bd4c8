"""The end-to-end answer benchmark: LoCoMo-style token F1, the judge rule per LongMemEval question type,
the failure rows, and the script's whole flow on tiny invented datasets against a scripted model.

The datasets below are written for this test (invented people, pets and dates), in the two files'
formats only; no benchmark text is used.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cognis_dev import answer_scoring as sc

from cognis_memory.providers.base import LLMOutputError
from cognis_memory.providers.llms.structured import wire_schema
from tests.llm_server import Reply, ScriptedLLMServer

ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------------------
# token F1
@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [
        ("The Cello", "cello", 1.0),  # case and an article
        ("Pebble!", "pebble", 1.0),  # punctuation
        ("an apple and a pear", "apple pear", 1.0),  # a, an, the and "and" are dropped
        ("Lyon, France", "lyon france", 1.0),  # commas
        ("e-mail", "email", 1.0),  # punctuation inside a word is removed, not split on
        ("red bicycle", "blue bicycle", 0.5),  # half the tokens shared
        ("a cello, since January", "the cello", 0.5),  # P 1/3, R 1
        ("March 2024", "early March 2024", 0.8),  # P 1, R 2/3
        ("go go go", "go", 0.5),  # tokens are a multiset: P 1/3
        ("Tuesday", "Friday", 0.0),
        ("", "cello", 0.0),
        ("cello", "", 0.0),
        ("", "", 0.0),  # LoCoMo's code: no shared token is 0, even for two empty texts
        ("...", "the", 0.0),  # nothing left after normalising
    ],
)
def test_token_f1(prediction: str, gold: str, expected: float) -> None:
    assert sc.token_f1(prediction, gold) == pytest.approx(expected)


def test_normalize_answer() -> None:
    assert sc.normalize_answer("  The Owl, and   THE Pussycat's boat! ") == "owl pussycats boat"
    assert sc.normalize_answer(2024) == "2024"


def test_locomo_f1_per_category() -> None:
    # category 1: each gold part's best match among the predicted parts, averaged over gold parts
    assert sc.locomo_f1("hiking, baking", "baking, hiking, chess", 1) == pytest.approx(2 / 3)
    assert sc.locomo_f1("baking bread", "baking", 1) == pytest.approx(2 / 3)
    # category 3: the gold answer up to its first ';'
    assert sc.locomo_f1("yes", "Yes; because it rained all week", 3) == 1.0
    assert sc.locomo_f1("yes", "Yes; because it rained all week", 4) == pytest.approx(2 / 7)
    # categories 2 and 4: plain F1
    assert sc.locomo_f1("14 May 2023", "14 May, 2023", 2) == 1.0
    # category 5: says it cannot answer
    assert sc.locomo_f1("No information available.", "anything", 5) == 1.0
    assert sc.locomo_f1("That was not mentioned.", "anything", 5) == 1.0
    assert sc.locomo_f1("On Tuesday", "anything", 5) == 0.0


# --------------------------------------------------------------------------------------
# judge rules
@pytest.mark.parametrize(
    ("question_type", "question_id", "rule"),
    [
        ("single-session-user", "q1", sc.JudgeRule.STANDARD),
        ("single-session-assistant", "q2", sc.JudgeRule.STANDARD),
        ("multi-session", "q3", sc.JudgeRule.STANDARD),
        ("temporal-reasoning", "q4", sc.JudgeRule.TEMPORAL),
        ("knowledge-update", "q5", sc.JudgeRule.KNOWLEDGE_UPDATE),
        ("single-session-preference", "q6", sc.JudgeRule.PREFERENCE),
        ("temporal-reasoning", "q7_abs", sc.JudgeRule.ABSTENTION),  # _abs wins over the type
        ("multi-session", "q8_abs", sc.JudgeRule.ABSTENTION),
        ("a-type-added-later", "q9", sc.JudgeRule.STANDARD),
    ],
)
def test_longmemeval_rule(question_type: str, question_id: str, rule: sc.JudgeRule) -> None:
    assert sc.longmemeval_rule(question_type, question_id) is rule


def test_locomo_rule() -> None:
    assert [sc.locomo_rule(c) for c in (1, 2, 3, 4)] == [sc.JudgeRule.STANDARD] * 4
    assert sc.locomo_rule(5) is sc.JudgeRule.ABSTENTION


def test_judge_prompt_carries_the_rule_and_the_texts() -> None:
    texts = {rule: sc.rule_text(rule) for rule in sc.JudgeRule}
    assert len(set(texts.values())) == len(texts)  # one instruction per rule
    assert "off by one" in texts[sc.JudgeRule.TEMPORAL]
    assert "newest value" in texts[sc.JudgeRule.KNOWLEDGE_UPDATE]
    assert "rubric" in texts[sc.JudgeRule.PREFERENCE]
    assert "not available" in texts[sc.JudgeRule.ABSTENTION]
    prompt = sc.judge_prompt(sc.JudgeRule.TEMPORAL, "How long did the tour last?", "9 days", "ten days")
    assert prompt.startswith(texts[sc.JudgeRule.TEMPORAL])
    assert "How long did the tour last?" in prompt and "9 days" in prompt and "ten days" in prompt
    assert "Rubric:" in sc.judge_prompt(sc.JudgeRule.PREFERENCE, "q", "uses the user's diet", "r")
    assert "Reference answer:" in sc.judge_prompt(sc.JudgeRule.STANDARD, "q", "g", "r")


def test_answer_models_follow_the_providers_rules() -> None:
    assert wire_schema(sc.AnswerOut) == {
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    assert wire_schema(sc.Verdict)["required"] == ["correct", "reason"]


# --------------------------------------------------------------------------------------
# failures and figures
class _Failing:
    name = "failing"

    async def generate_structured(self, **kwargs: Any) -> Any:
        raise LLMOutputError("failing: expected a JSON object for answer, got string")


async def test_call_structured_turns_failures_into_rows() -> None:
    result = await sc.call_structured(_Failing(), system="s", prompt="p", model=sc.AnswerOut, schema_name="answer")
    assert result.value is None and result.error is not None
    assert result.error.startswith("LLMOutputError: failing: expected a JSON object")


def test_summarize_counts_failures() -> None:
    rows = [
        {"f1": 1.0, "correct": True, "answer_error": None, "judge_error": None, "answer_seconds": 1.0},
        {"f1": 0.0, "correct": False, "answer_error": "LLMOutputError: x", "judge_error": None, "answer_seconds": 3.0},
        {"f1": 0.5, "correct": None, "answer_error": None, "judge_error": "DependencyUnavailableError: y",
         "answer_seconds": 2.0},
    ]  # fmt: skip
    s = sc.summarize(rows)
    assert s["questions"] == 3 and s["f1"] == 0.5
    assert s["judged"] == 2 and s["judge_accuracy"] == 0.5  # the failed judge call is left out
    assert s["answer_failures"] == 1 and s["judge_failures"] == 1 and s["mean_answer_s"] == 2.0


def test_round_robin() -> None:
    items = ["a1", "a2", "a3", "a4", "b1", "b2", "c1"]
    out = sc.round_robin(items, key=lambda s: s[0])
    assert sorted(out) == sorted(items)
    assert out[:3] == ["a1", "b1", "c1"]


# --------------------------------------------------------------------------------------
# the whole script on invented data
def _turn(dia: str, speaker: str, text: str) -> dict[str, str]:
    return {"speaker": speaker, "dia_id": dia, "text": text}


LOCOMO_LIKE = [
    {
        "sample_id": "invented-1",
        "conversation": {
            "speaker_a": "Orla",
            "speaker_b": "Bexley",
            "session_1_date_time": "10:00 am on 4 March, 2024",
            "session_1": [
                _turn("D1:1", "Orla", "I adopted a grey rabbit called Pebble last weekend, she hops everywhere."),
                _turn("D1:2", "Bexley", "Lovely! I started learning the cello in January and practise daily."),
            ],
            "session_2_date_time": "3:30 pm on 18 April, 2024",
            "session_2": [
                _turn("D2:1", "Orla", "Pebble chewed through my laptop charger yesterday, what a menace."),
                _turn("D2:2", "Bexley", "I played my first cello recital at the town library on Saturday."),
            ],
        },
        "qa": [
            {"question": "What is the name of Orla's rabbit?", "answer": "Pebble", "evidence": ["D1:1"],
             "category": 4},
            {"question": "What instrument is Bexley learning?", "answer": "the cello", "evidence": ["D1:2"],
             "category": 4},
            {"question": "When did Bexley play a recital?", "answer": "April 2024", "evidence": ["D2:2"],
             "category": 2},
            {"question": "When did Orla adopt the rabbit?", "answer": "early March 2024", "evidence": ["D1:1"],
             "category": 2},
            {"question": "What colour is Bexley's cello?", "adversarial_answer": "dark red", "evidence": ["D1:2"],
             "category": 5},
            {"question": "Which pets does Bexley keep?", "answer": "none", "evidence": ["D9:9"], "category": 1},
        ],
    }
]  # fmt: skip

#: question -> (the scripted answer, or a Reply to send instead; the scripted verdict, or a Reply)
LOCOMO_SCRIPT: dict[str, tuple[Any, Any]] = {
    "What is the name of Orla's rabbit?": ("Pebble", True),  # F1 1
    "What instrument is Bexley learning?": ("a cello, since January", True),  # F1 0.5
    "When did Bexley play a recital?": (Reply(500, '{"error": {"message": "model crashed"}}'), None),  # answer fails
    "When did Orla adopt the rabbit?": ("March 2024", Reply(200, "")),  # F1 0.8, the judge's reply is unusable
    "What colour is Bexley's cello?": ("No information available.", True),  # F1 1 (category 5)
}


def _between(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0].strip()


def _unusable_completion() -> Reply:
    content = "Sure! The response looks right to me."
    return Reply(200, json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}))


def schema_of(body: dict[str, Any]) -> str:
    """Which answer a request asks for: the json_schema name, or (json_object mode) the schema's fields."""
    fmt = body["response_format"]
    if fmt["type"] == "json_schema":
        return str(fmt["json_schema"]["name"])
    fields = frozenset(fmt["schema"]["properties"])
    known = {frozenset({"answer"}): sc.ANSWER_SCHEMA, frozenset({"correct", "reason"}): sc.VERDICT_SCHEMA}
    return known.get(fields, "other")


def scripted(script: dict[str, tuple[Any, Any]]) -> Any:
    def respond(_: str, body: dict[str, Any]) -> dict[str, Any]:
        schema = schema_of(body)
        prompt = body["messages"][-1]["content"]
        if schema not in (sc.ANSWER_SCHEMA, sc.VERDICT_SCHEMA):  # the service's extraction (--extract)
            raise Reply(503, '{"error": {"message": "extraction is down"}}')
        if schema == sc.ANSWER_SCHEMA:
            answer, _ = script[_between(prompt, "Question: ", "\n")]
            if isinstance(answer, Reply):
                raise answer
            return {"answer": answer}
        _, verdict = script[_between(prompt, "<question>", "</question>")]
        if isinstance(verdict, Reply):
            raise _unusable_completion() if verdict.body == "" else verdict
        return {"correct": verdict, "reason": "scripted"}

    return respond


def run_script(*args: str) -> tuple[dict[str, Any], str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_answers.py"), *args],
        capture_output=True, text=True, timeout=300, env=env, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stdout


@pytest.mark.slow
def test_locomo_end_to_end(tmp_path: Path) -> None:
    data = tmp_path / "conversations.json"
    data.write_text(json.dumps(LOCOMO_LIKE), encoding="utf-8")
    with ScriptedLLMServer(scripted(LOCOMO_SCRIPT)) as server:
        out, stdout = run_script(
            "locomo", "--data", str(data), "--adversarial", "--llm-url", server.base_url, "--llm-model", "answerer",
            "--judge-model", "judge", "--no-cache", "--per-question", "--out", str(tmp_path),
        )  # fmt: skip
        requests = list(server.requests)

    # the table's figures follow from the script above
    assert out["questions"] == 5  # the question whose evidence is in no loaded turn is skipped
    groups = out["groups"]
    assert groups["4"]["questions"] == 2 and groups["4"]["f1"] == 0.75 and groups["4"]["judge_accuracy"] == 1.0
    assert groups["2"]["questions"] == 2 and groups["2"]["f1"] == 0.4
    assert groups["2"]["answer_failures"] == 1 and groups["2"]["judge_failures"] == 1
    assert groups["2"]["judged"] == 1 and groups["2"]["judge_accuracy"] == 0.0  # the failed answer is incorrect
    assert groups["5"]["f1"] == 1.0 and groups["5"]["judge_accuracy"] == 1.0
    assert out["f1"] == 0.66 and out["judged"] == 4 and out["judge_accuracy"] == 0.75
    assert out["answer_failures"] == 1 and out["judge_failures"] == 1
    assert out["answerer"] == "openai:answerer" and out["judge"] == "openai:judge"
    assert "| 2        | 2         | 0.400 | 0.000     | 1            | 1           |" in stdout
    assert "| all      | 5         | 0.660 | 0.750     | 1            | 1           |" in stdout

    # every answer call got the context block and the question's date; the judge is the judge model
    answers = [r for r in requests if schema_of(r) == sc.ANSWER_SCHEMA]
    verdicts = [r for r in requests if schema_of(r) == sc.VERDICT_SCHEMA]
    assert len(answers) == 5 and len(verdicts) == 4  # no judge call for the failed answer
    assert {r["max_tokens"] for r in requests} == {512} and {r["temperature"] for r in requests} == {0.0}
    assert {r["model"] for r in answers} == {"answerer"} and {r["model"] for r in verdicts} == {"judge"}
    rabbit = next(r["messages"][-1]["content"] for r in answers if "Orla's rabbit" in r["messages"][-1]["content"])
    assert "<memories>" in rabbit and "Pebble last weekend" in rabbit
    assert "Today is Thursday, 18 April 2024." in rabbit
    adversarial = next(r["messages"][-1]["content"] for r in verdicts if "colour" in r["messages"][-1]["content"])
    assert adversarial.startswith(sc.rule_text(sc.JudgeRule.ABSTENTION))

    rows = {
        r["question"]: r for r in json.loads((tmp_path / "answers_locomo_per_question.json").read_text())["questions"]
    }
    rabbit_row = rows["What is the name of Orla's rabbit?"]
    assert rabbit_row["answer"] == "Pebble" and rabbit_row["gold"] == "Pebble" and rabbit_row["f1"] == 1.0
    assert rabbit_row["correct"] is True and rabbit_row["memory_ids"] and rabbit_row["evidence_in_context"] == 1.0
    assert ["D1:1"] in rabbit_row["context_turns"]
    failed = rows["When did Bexley play a recital?"]
    assert failed["answer"] is None and failed["correct"] is False and "HTTP 500" in failed["answer_error"]
    unjudged = rows["When did Orla adopt the rabbit?"]
    assert unjudged["f1"] == 0.8 and unjudged["correct"] is None and "not valid JSON" in unjudged["judge_error"]
    assert json.loads((tmp_path / "answers_locomo.json").read_text())["groups"]["all"]["questions"] == 5


def _session(*turns: tuple[str, str, bool]) -> list[dict[str, Any]]:
    return [{"role": role, "content": content, "has_answer": has} for role, content, has in turns]


LONGMEMEVAL_LIKE = [
    {
        "question_id": "inv-temporal-1",
        "question_type": "temporal-reasoning",
        "question": "How many days after planting the tomatoes did I pick the first one?",
        "question_date": "2024/07/30 (Tue) 09:00",
        "answer": "54 days",
        "answer_session_ids": ["s-plant", "s-pick"],
        "haystack_dates": ["2024/05/01 (Wed) 18:00", "2024/06/24 (Mon) 19:00", "2024/06/02 (Sun) 10:00"],
        "haystack_session_ids": ["s-plant", "s-pick", "s-other"],
        "haystack_sessions": [
            _session(("user", "I planted six tomato seedlings along the fence today.", True),
                     ("assistant", "Water them deeply twice a week.", False)),
            _session(("user", "I picked my very first ripe tomato this evening!", True),
                     ("assistant", "Congratulations on the harvest.", False)),
            _session(("user", "Can you suggest a name for a kayak?", False),
                     ("assistant", "How about Driftwood?", False)),
        ],
    },
    {
        "question_id": "inv-update-1",
        "question_type": "knowledge-update",
        "question": "Which gym do I train at these days?",
        "question_date": "2024/09/01 (Sun) 12:00",
        "answer": "the climbing gym on Harbour Street",
        "answer_session_ids": ["s-gym-old", "s-gym-new"],
        "haystack_dates": ["2024/02/10 (Sat) 08:00", "2024/08/15 (Thu) 20:00"],
        "haystack_session_ids": ["s-gym-old", "s-gym-new"],
        "haystack_sessions": [
            _session(("user", "I train at the Riverside fitness club every morning.", True)),
            _session(("user", "I switched to the climbing gym on Harbour Street last week.", True)),
        ],
    },
    {
        "question_id": "inv-user-1_abs",
        "question_type": "single-session-user",
        "question": "What is my sister's favourite film?",
        "question_date": "2024/03/03 (Sun) 15:00",
        "answer": "You mentioned your sister's birthday, not her favourite film.",
        "answer_session_ids": ["s-sister"],
        "haystack_dates": ["2024/03/01 (Fri) 11:00"],
        "haystack_session_ids": ["s-sister"],
        "haystack_sessions": [_session(("user", "My sister turns thirty on the ninth of March.", True))],
    },
]  # fmt: skip

LONGMEMEVAL_SCRIPT: dict[str, tuple[Any, Any]] = {
    "How many days after planting the tomatoes did I pick the first one?": ("55 days", True),
    "Which gym do I train at these days?": ("The Riverside fitness club", False),
    "What is my sister's favourite film?": ("No information available.", True),
}


@pytest.mark.slow
def test_longmemeval_end_to_end(tmp_path: Path) -> None:
    data = tmp_path / "dev.json.gz"
    with gzip.open(data, "wt", encoding="utf-8") as fh:
        json.dump(LONGMEMEVAL_LIKE, fh)
    with ScriptedLLMServer(scripted(LONGMEMEVAL_SCRIPT)) as server:
        out, stdout = run_script(
            "longmemeval", "--data", str(data), "--llm-url", server.base_url, "--llm-model", "m", "--no-cache",
            "--concurrency", "2", "--extract", "--structured-output", "json_object", "--per-question",
            "--out", str(tmp_path),
        )  # fmt: skip
        requests = list(server.requests)
    extraction_calls = [r for r in requests if schema_of(r) == "other"]
    verdicts = {
        _between(p, "<question>", "</question>"): p
        for p in (r["messages"][-1]["content"] for r in requests if schema_of(r) == sc.VERDICT_SCHEMA)
    }
    # --structured-output reaches every model, the service's extraction included; no token cap on extraction
    assert {r["response_format"]["type"] for r in requests} == {"json_object"}
    assert all("max_tokens" not in r for r in extraction_calls)

    assert out["questions"] == 3 and out["f1"] is None  # LongMemEval is judged only
    assert out["judge_accuracy"] == pytest.approx(2 / 3, abs=1e-4) and out["answer_failures"] == 0
    groups = out["groups"]
    assert groups["temporal-reasoning"]["judge_accuracy"] == 1.0
    assert groups["knowledge-update"]["judge_accuracy"] == 0.0
    assert groups["single-session-user"]["judge_accuracy"] == 1.0
    assert "| knowledge-update    | 1         | -  | 0.000     |" in stdout
    # each question was judged under its type's rule; the _abs question under the abstention rule
    expected = {
        "How many days after planting the tomatoes did I pick the first one?": sc.JudgeRule.TEMPORAL,
        "Which gym do I train at these days?": sc.JudgeRule.KNOWLEDGE_UPDATE,
        "What is my sister's favourite film?": sc.JudgeRule.ABSTENTION,
    }
    for question, rule in expected.items():
        assert verdicts[question].startswith(sc.rule_text(rule)), question
    assert "Why it cannot be answered:" in verdicts["What is my sister's favourite film?"]
    # --extract: every ingest call tried the extraction, which failed; the run went on with raw memories
    ingest = json.loads((tmp_path / "answers_longmemeval.json").read_text())["ingest"]
    sessions = sum(len(x["haystack_sessions"]) for x in LONGMEMEVAL_LIKE)
    assert len(extraction_calls) >= sessions
    assert ingest["extraction"] == {"calls_by_outcome": {"pending": sessions}, "failures": sessions}
    rows = json.loads((tmp_path / "answers_longmemeval_per_question.json").read_text())["questions"]
    temporal = next(r for r in rows if r["group"] == "temporal-reasoning")
    assert temporal["today"].startswith("2024-07-30") and temporal["evidence_in_context"] == 1.0
