"""The inspector's static files are package data: a wheel (what ``pip install .`` and the Docker image
install, not the editable checkout the tests run from) contains them, and the app serves them from
the installed package."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STATIC = REPO / "runtime" / "cognis_memory" / "ui" / "static"


@pytest.mark.slow
def test_a_built_wheel_carries_the_inspector_files(tmp_path):
    src = tmp_path / "src"  # a copy, so the build leaves nothing in the checkout
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "runtime", src / "runtime", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            ".",
        ],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    (wheel,) = (tmp_path / "dist").glob("cognis_memory-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {f"cognis_memory/ui/static/{p.name}" for p in STATIC.iterdir() if p.is_file()}
    assert shipped == {"cognis_memory/ui/static/index.html", "cognis_memory/ui/static/app.js",
                       "cognis_memory/ui/static/style.css"}  # fmt: skip
    assert shipped <= names, sorted(n for n in names if "/ui/" in n)
