"""No benchmark data in the repository.

The benchmarks read LoCoMo and the LongMemEval dev set from ``../shared/data`` and nothing of them
may be committed: no copy of a file, no question or answer, no turn (not even paraphrased into a
comment as an example), no conversation, question or session id, no speaker name. Where the files
are beside the checkout (a developer's machine) every tracked text file is compared with them; a
clean clone without them skips. Nothing of the data is written here: every string compared is read
from the files at run time.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo10.json"
LONGMEMEVAL = ROOT.parent / "shared" / "data" / "longmemeval_s_dev100.json.gz"
#: a run of this many words of a dataset text found in a tracked file counts as copied
RUN = 8
#: questions and answers at least this long are looked for whole (shorter ones are common phrases)
WHOLE = 20
WORD = re.compile(r"[a-z0-9']+")
MARKUP = re.compile(r"<[^>]*>")
#: how ids are written (conv-<n>, answer_<hex>_<n>, D<n>:<n>)
TOKEN = re.compile(r"[a-z0-9_:-]+")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (LOCOMO.is_file() and LONGMEMEVAL.is_file()), reason="no benchmark data beside the repo"),
]


def runs(text: str) -> set[str]:
    """The ``RUN``-word runs of ``text``'s prose (markup tags dropped: an HTML boilerplate line is nobody's)."""
    words = WORD.findall(MARKUP.sub(" ", text.lower()))
    return {" ".join(words[i : i + RUN]) for i in range(len(words) - RUN + 1)}


def dataset_texts() -> Iterator[tuple[str, str]]:
    """(kind, text) of everything in both files that must not be copied."""
    for conv in json.loads(LOCOMO.read_text(encoding="utf-8")):
        yield "id", str(conv["sample_id"])
        for key, value in conv["conversation"].items():
            if key.startswith("speaker_"):
                yield "name", value
            elif isinstance(value, list):
                for turn in value:
                    yield "text", turn.get("text", "")
                    yield "id", str(turn.get("dia_id", ""))
        for qa in conv["qa"]:
            yield "qa", str(qa.get("question", ""))
            yield "qa", str(qa.get("answer", qa.get("adversarial_answer", "")))
    with gzip.open(LONGMEMEVAL, "rt", encoding="utf-8") as fh:
        for item in json.load(fh):
            yield "id", item["question_id"]
            yield "qa", item["question"]
            yield "qa", str(item["answer"])
            yield from (("id", s) for s in item["haystack_session_ids"])
            for session in item["haystack_sessions"]:
                yield from (("text", turn["content"]) for turn in session)


def findings(files: dict[str, str]) -> list[str]:
    """What of the datasets occurs in ``files`` (path -> text): a list of "path: what" lines."""
    lowered = {p: t.lower() for p, t in files.items()}
    where_run: dict[str, set[str]] = {}
    where_token: dict[str, set[str]] = {}
    for path, text in lowered.items():
        for run in runs(text):
            where_run.setdefault(run, set()).add(path)
        for token in {*TOKEN.findall(text), *WORD.findall(text)}:
            where_token.setdefault(token, set()).add(path)
    blob = "\n".join(lowered.values())
    out: set[str] = set()
    for kind, text in dataset_texts():
        text = text.strip().lower()
        if kind in ("text", "qa"):
            for run in runs(text):
                out.update(f"{p}: a run of {RUN} words of a dataset {kind}" for p in where_run.get(run, ()))
            short = len(WORD.findall(text)) < RUN  # a longer one is found by its runs
            if kind == "qa" and short and len(text) >= WHOLE and text in blob:
                out.update(f"{p}: a whole question or answer" for p, t in lowered.items() if text in t)
        elif kind == "id" and len(text) >= 6:
            out.update(f"{p}: a dataset id" for p in where_token.get(text, ()))
        elif kind == "name" and len(text) >= 6:  # shorter names (Sam, Tim) are everyday words
            out.update(f"{p}: a LoCoMo speaker name" for p in where_token.get(text, ()))
    return sorted(out)


#: third-party vocabularies, which list every word piece (so every name): compared as whole files only
VOCABULARIES = re.compile(r"runtime/cognis_memory/providers/models/[^/]+/tokenizer\.json")


def tracked_files() -> tuple[dict[str, str], list[str]]:
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    texts, binaries = {}, []
    for name in names:
        if VOCABULARIES.fullmatch(name):
            binaries.append(name)
            continue
        data = (ROOT / name).read_bytes() if (ROOT / name).is_file() else b""
        try:
            texts[name] = data.decode("utf-8")
        except UnicodeDecodeError:
            binaries.append(name)
    return texts, binaries


def test_no_tracked_file_carries_benchmark_data() -> None:
    texts, binaries = tracked_files()
    digests = {hashlib.sha256(f.read_bytes()).hexdigest() for f in (LOCOMO, LONGMEMEVAL)}
    copies = [n for n in [*texts, *binaries] if hashlib.sha256((ROOT / n).read_bytes()).hexdigest() in digests]
    assert not copies, f"a benchmark file is committed: {copies}"
    found = findings(texts)
    assert not found, "benchmark data in tracked files (read it from ../shared/data instead):\n" + "\n".join(found)


def test_the_check_finds_a_planted_question_turn_and_name() -> None:
    """The comparison is not vacuous: text taken from the data at run time is found in a planted file."""
    taken: dict[str, str] = {}
    for kind, text in dataset_texts():
        checked_length = 6 if kind == "name" else 40  # names as the check reads them; texts of several runs
        if kind in ("qa", "text", "name") and len(text) >= checked_length:
            taken.setdefault(kind, text)
        if len(taken) == 3:
            break
    planted = {f"planted-{k}.md": f"An example: {v}." for k, v in taken.items()}
    found = findings({**planted, "clean.md": "Nothing but our own words about a user who moved to Lisbon."})
    assert {line.split(":")[0] for line in found} == set(planted)
