"""The README's configuration table and commands stay true to the code."""

import re
from pathlib import Path

from cognis_dev.config_table import rows

from cognis_memory.config import Settings

ROOT = Path(__file__).resolve().parents[1]


def test_readme_lists_every_setting_with_its_default() -> None:
    readme = (ROOT / "README.md").read_text()
    for env, setting, default, _ in rows():
        line = next((row for row in readme.splitlines() if row.startswith(f"| {env} |")), None)
        assert line is not None, f"{env} is missing from the README configuration table"
        assert f"| {setting} | {default} |" in line, f"{env}: README setting or default differs from the code"
    assert len(rows()) == len(list(Settings.flat_fields())) == len({env for env, *_ in rows()})


def test_readme_commands_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    for script in ("scripts/demo.sh", "scripts/test.sh"):
        assert f"bash {script}" in readme and (ROOT / script).is_file()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "scripts/test.sh" in ci


def _named_paths(text: str) -> list[str]:
    """Every file or folder a document names in backticks (``stores/records/schema.py``, ``tests/x.py::test_y``);
    placeholders (``stores/<kind>.py``) and commands (anything with a space) are not paths."""
    words = re.findall(r"`([^`\s<>]+)`", text)
    return [w for w in words if re.fullmatch(r"[\w.\-/]+(::\w+)?", w) and ("/" in w or w.endswith(FILE_ENDINGS))]


FILE_ENDINGS = (".py", ".md", ".sh", ".toml", ".json")


def test_contributing_names_only_files_and_tests_that_exist() -> None:
    """CONTRIBUTING.md's map stays true: a renamed module or test fails here, naming the stale path.
    Paths are read from the repository root, else from the runtime package (as the document says)."""
    named = _named_paths((ROOT / "CONTRIBUTING.md").read_text())
    assert len(named) > 40, "the path check found almost nothing to check"
    for name in named:
        path, _, test = name.partition("::")
        found = [base / path for base in (ROOT, ROOT / "runtime" / "cognis_memory") if (base / path).exists()]
        assert found, f"CONTRIBUTING.md names {path}, which does not exist"
        if test:
            assert re.search(rf"^(async )?def {test}\(", found[0].read_text(), re.M), f"{name} does not exist"
