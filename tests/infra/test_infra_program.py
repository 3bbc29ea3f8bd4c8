"""The program as a whole: component structure, entry point, dependencies."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

from packaging.requirements import Requirement

from tests.infra.infra_harness import INFRA, REPO

COMPONENTS = {
    "cognis:network:Network",
    "cognis:encryption:Encryption",
    "cognis:search:Search",
    "cognis:database:Database",
    "cognis:cache:Cache",
    "cognis:reranker:Reranker",
    "cognis:registry:Registry",
    "cognis:service:ServiceIdentity",
    "cognis:service:Service",
    "cognis:observability:Observability",
}


def _qualified_type(urn: str) -> str:
    return urn.split("::")[2]


def test_one_component_per_concern_owns_every_aws_resource(program):
    types = [_qualified_type(u) for u in program.urns]
    components = {t.split("$")[-1] for t in types if t.split("$")[-1].startswith("cognis:")}
    assert components == COMPONENTS
    for t in types:
        chain = t.split("$")
        if chain[-1].startswith("aws:"):
            assert any(link in COMPONENTS for link in chain), f"{t} is not inside a component"


def test_every_component_is_a_direct_child_of_the_stack(program):
    for t in (_qualified_type(u) for u in program.urns):
        chain = [link for link in t.split("$") if link != "pulumi:pulumi:Stack"]
        if chain[-1].startswith("cognis:"):
            assert len(chain) == 1, t


def test_program_stays_import_light(tmp_path):
    """The program's modules, imported as installed (no path set-up, from an unrelated directory),
    load the Pulumi SDKs and nothing of the runtime: not its dependencies, not even the
    ``cognis_memory`` package (the metric names are the runtime's file under another name)."""
    code = (
        "import sys\n"
        "import cognis_infra.config, cognis_infra.observability, cognis_infra.service, cognis_infra.registry\n"
        "heavy = ('torch', 'sentence_transformers', 'transformers', 'fastapi', 'numpy', 'boto3', 'psycopg')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
        "print(sorted(m for m in sys.modules if m.startswith('cognis_memory')))\n"
        "print(cognis_infra.__file__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path)
    heavy, runtime, location = out.stdout.splitlines()
    assert heavy == "[]"
    assert runtime == "[]"
    assert Path(location).parent == INFRA / "cognis_infra"  # the editable install of this checkout


def test_metric_names_are_the_runtimes_own_file():
    """One file, two import names: the link in the infra package resolves to the runtime's module,
    and that module imports nothing (it must load where the runtime is not installed)."""
    import cognis_memory.telemetry.names as runtime_names
    from cognis_infra import metric_names

    link = INFRA / "cognis_infra" / "metric_names.py"
    assert link.is_symlink()
    assert not Path(os.readlink(link)).is_absolute()  # relative: valid in any checkout
    assert Path(metric_names.__file__).resolve() == Path(runtime_names.__file__).resolve()
    tree = ast.parse(link.read_text())
    imports = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    assert [(getattr(n, "module", None), [a.name for a in n.names]) for n in imports] == [
        ("__future__", ["annotations"])
    ]


def _pyproject(path):
    import tomllib

    return tomllib.loads(path.read_text())


def test_installed_sdks_satisfy_the_infra_package_requirements():
    reqs = [Requirement(r) for r in _pyproject(INFRA / "pyproject.toml")["project"]["dependencies"]]
    # no torch, no runtime; boto3 for the dynamic resources (the migration run, the reranker endpoint)
    assert {r.name for r in reqs} == {"pulumi", "pulumi-aws", "pulumi-docker-build", "boto3"}
    for req in reqs:
        assert req.specifier.contains(version(req.name)), f"{req} vs installed {version(req.name)}"
    assert version("cognis-infra") == _pyproject(INFRA / "pyproject.toml")["project"]["version"]


def test_pulumi_install_installs_the_infra_package_of_this_directory():
    """`pulumi install` runs pip in the program directory; the one line resolves to infra/ from
    there, and run from the repository root it names neither infra/ nor the runtime's project
    (where "." would silently install the runtime with all its dependencies)."""
    lines = [
        line.split()
        for line in (INFRA / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert len(lines) == 1 and lines[0][0] == "-e", lines
    target = lines[0][1]
    assert (INFRA / target).resolve() == INFRA.resolve()
    assert (REPO / target).resolve() not in (REPO.resolve(), INFRA.resolve())


def test_the_runtime_wheel_leaves_the_infra_side_out():
    """The runtime distribution has no Pulumi extra (cognis-infra carries the SDK pins) and
    packages only ``cognis_memory``."""
    root = _pyproject(REPO / "pyproject.toml")
    assert "infra" not in root["project"]["optional-dependencies"]
    assert root["tool"]["setuptools"]["packages"]["find"]["include"] == ["cognis_memory*"]


def test_pulumi_project_points_at_the_program_and_its_own_venv():
    import yaml

    project = yaml.safe_load((REPO / "Pulumi.yaml").read_text())
    assert project["name"] == "cognis"
    assert project["runtime"]["name"] == "python"
    assert (REPO / project["main"] / "__main__.py").exists()
    # `pulumi install` runs pip in the program directory (main), into this virtualenv.
    options = project["runtime"]["options"]
    assert options == {"toolchain": "pip", "virtualenv": "infra/.venv"}
    assert (REPO / project["main"] / "requirements.txt").exists()
    assert "infra/.venv" in (REPO / ".gitignore").read_text() or ".venv/" in (REPO / ".gitignore").read_text()


def test_the_default_bedrock_model_is_the_runtimes_own_file():
    """Like the metric names: the stack reads the runtime's default model from the runtime's file."""
    import cognis_memory.providers.bedrock_models as runtime_models
    from cognis_infra import bedrock_models

    link = INFRA / "cognis_infra" / "bedrock_models.py"
    assert link.is_symlink() and not Path(os.readlink(link)).is_absolute()
    assert Path(bedrock_models.__file__).resolve() == Path(runtime_models.__file__).resolve()
    tree = ast.parse(link.read_text())
    imports = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    assert [(getattr(n, "module", None), [a.name for a in n.names]) for n in imports] == [
        ("__future__", ["annotations"])
    ]
