"""The runtime's comments and docstrings say what the code does and why, not the project's history: a
reference to an issue or a work round ("issue 23 asks", "round 4") belongs in the commit message. No runtime
module grows past the size at which it is split by role."""

import re
from pathlib import Path

RUNTIME = Path(__file__).resolve().parents[1] / "runtime"
#: the issue's own check (``grep -rE 'issue [0-9]+|round [0-9]+' runtime/``), in any case and with ``#``
HISTORY = re.compile(r"(issue|round)s? #?[0-9]+", re.IGNORECASE)
SOURCE_ENDINGS = (".py", ".js", ".html", ".css")


def test_the_runtime_names_no_issue_or_round() -> None:
    files = [p for p in RUNTIME.rglob("*") if p.is_file() and p.suffix in SOURCE_ENDINGS]
    assert len(files) > 100, "the check found almost no source files to read"
    found = [
        f"{path.relative_to(RUNTIME)}:{number}: {line.strip()}"
        for path in files
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if HISTORY.search(line)
    ]
    assert not found, "history in the runtime (say what the code does and why instead):\n" + "\n".join(found)


#: the size past which a runtime module is split by role (CONTRIBUTING.md)
MAX_MODULE_LINES = 500


def test_no_runtime_module_is_longer_than_the_limit() -> None:
    modules = list(RUNTIME.rglob("*.py"))
    assert len(modules) > 100, "the check found almost no modules to read"
    long = {
        str(p.relative_to(RUNTIME)): n
        for p in modules
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"runtime modules over {MAX_MODULE_LINES} lines (split each by role, not at the line): {long}"
