"""The program as a whole: component structure, entry point, dependencies."""

from __future__ import annotations

import ast
import subprocess
import sys
from importlib.metadata import version

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


def test_program_stays_import_light():
    """The program needs only what infra/requirements.txt installs: the Pulumi SDKs (and the metric
    names, read from the runtime's source tree, which import nothing heavy)."""
    code = (
        "import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]\n"
        "import cognis_infra.config, cognis_infra.observability, cognis_infra.service, cognis_infra.registry\n"
        "heavy = ('torch', 'sentence_transformers', 'transformers', 'fastapi', 'numpy', 'boto3', 'psycopg')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
        "print(sorted(m for m in sys.modules if m.startswith('cognis_memory')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(INFRA), str(REPO / "runtime")], capture_output=True, text=True, check=True
    )
    heavy, runtime = out.stdout.splitlines()
    assert heavy == "[]"
    modules = ast.literal_eval(runtime)
    assert "cognis_memory.telemetry.names" in modules
    assert all(m == "cognis_memory" or m.startswith("cognis_memory.telemetry") for m in modules), modules


def _requirements(path):
    return [Requirement(line) for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def test_installed_sdks_satisfy_the_program_requirements():
    reqs = _requirements(INFRA / "requirements.txt")
    assert {r.name for r in reqs} == {"pulumi", "pulumi-aws", "pulumi-docker-build"}  # no torch, no runtime
    for req in reqs:
        assert req.specifier.contains(version(req.name)), f"{req} vs installed {version(req.name)}"


def test_infra_extra_and_requirements_agree():
    import tomllib

    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["infra"]
    assert sorted(str(Requirement(r)) for r in extra) == sorted(
        str(r) for r in _requirements(INFRA / "requirements.txt")
    )


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
