"""Every part of the project imports its own code as installed packages: no module edits the
interpreter's import path (the runtime, devtools/ and infra/ are distributions that
scripts/setup.sh and `pulumi install` install; see docs/design-notes.md, "Dev-only package"), and nothing
outside scripts/ imports from it (scripts are entry points, their code is in a package)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("runtime", "devtools", "infra", "scripts", "tests")


def _python_files():
    for root in ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            parts = path.relative_to(REPO).parts
            if not any(p.startswith(".") or p in {"venv", "__pycache__", "build"} for p in parts):
                yield path


def _uses_of_sys_path(path: Path) -> list[int]:
    """Lines where the code (not a comment or a string) reads or changes ``sys.path``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == "path"
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
    ]


def test_no_module_touches_sys_path():
    files = list(_python_files())
    assert any(p.parts[-2:] == ("infra", "__main__.py") for p in files)  # the scan reaches the Pulumi side
    found = {str(p.relative_to(REPO)): lines for p in files if (lines := _uses_of_sys_path(p))}
    assert found == {}


def _imports_of_scripts(path: Path) -> list[int]:
    """Lines that import the ``scripts`` directory as a package (``import scripts...``, ``from scripts...``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        if any(name == "scripts" or name.startswith("scripts.") for name in names):
            lines.append(node.lineno)
    return lines


def test_library_code_is_not_imported_from_scripts():
    """``scripts/`` holds command-line entry points; what tests and tools import lives in a package
    (``cognis_dev`` for development code, issue 24, item 7)."""
    files = [p for p in _python_files() if p.relative_to(REPO).parts[0] != "scripts"]
    found = {str(p.relative_to(REPO)): lines for p in files if (lines := _imports_of_scripts(p))}
    assert found == {}
