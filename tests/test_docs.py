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


def _missing_paths(document: Path) -> list[str]:
    """The files and tests a document names in backticks that do not exist, read from the repository root,
    else from the runtime package; a name starting with ``/`` is a route (``/v1/``), not a file."""
    missing = []
    for name in _named_paths(document.read_text()):
        path, _, test = name.partition("::")
        if path.startswith("/"):
            continue
        found = [base / path for base in (ROOT, ROOT / "runtime" / "cognis_memory") if (base / path).exists()]
        if not found or (test and not re.search(rf"^(async )?def {test}\(", found[0].read_text(), re.M)):
            missing.append(name)
    return missing


def test_design_notes_name_only_files_and_tests_that_exist() -> None:
    """A decision names the code that holds it: a renamed or removed module fails here, so the decision is
    updated or dropped rather than left describing code that is gone."""
    notes = ROOT / "docs" / "design-notes.md"
    assert len(_named_paths(notes.read_text())) > 80, "the path check found almost nothing to check"
    assert _missing_paths(notes) == []


def _anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a document's headings (lower case, punctuation dropped, spaces to ``-``)."""
    headings = re.findall(r"^#{1,6} (.+)$", markdown, re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_design_notes_links_reach_their_files_and_sections() -> None:
    """Every relative link of docs/design-notes.md reaches a file, and its ``#section`` a heading there (the
    figures behind the decisions are cited by benchmarks.md section)."""
    docs = ROOT / "docs"
    text = (docs / "design-notes.md").read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    relative = [link for link in links if not link.startswith(("http://", "https://"))]
    assert len(relative) > 20, "the link check found almost nothing to check"
    for link in relative:
        target, _, anchor = link.partition("#")
        path = (docs / target) if target else docs / "design-notes.md"
        assert path.exists(), f"design-notes.md links {link}: no such file"
        if anchor:
            assert anchor in _anchors(path.read_text()), f"design-notes.md links {link}: no such section"


def test_quoted_design_note_titles_exist() -> None:
    """Code and documents that cite a decision by its title (docs/design-notes.md, "UPDATE guard") cite a
    heading or an entry's title that exists."""
    notes = " ".join((ROOT / "docs" / "design-notes.md").read_text().split())
    cited = re.compile(r'design-notes\.md(?:,\s*|\s*\()"([^"]+)"')
    sources = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").glob("*.md")]
    for folder in ("runtime", "devtools", "infra", "scripts", "tests"):
        sources += [
            p for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".md", ".sh") and ".venv" not in p.parts
        ]
    titles = [
        (path.relative_to(ROOT), " ".join(title.split()))
        for path in sources
        if path.is_file() and path.name != "design-notes.md"
        for title in cited.findall(path.read_text(encoding="utf-8"))
    ]
    assert len(titles) >= 5, "the citation check found almost nothing to check"

    def titled(title: str) -> bool:  # a heading, or a bold or italic entry title
        return re.search(r"(#+ |\*)" + re.escape(title), notes) is not None

    assert [(str(path), title) for path, title in titles if not titled(title)] == []
