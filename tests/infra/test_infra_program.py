"""The program as a whole: component structure, entry point, dependencies."""

from __future__ import annotations

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
    """The program reads the metric names from the runtime without its heavy dependencies."""
    code = (
        "import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]\n"
        "import cognis_infra.config, cognis_infra.observability, cognis_infra.service\n"
        "heavy = ('torch', 'sentence_transformers', 'transformers', 'fastapi', 'numpy', 'boto3')\n"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(INFRA), str(REPO / "runtime")], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_installed_sdks_satisfy_the_program_requirements():
    for line in (INFRA / "requirements.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            req = Requirement(line)
            assert req.specifier.contains(version(req.name)), f"{req} vs installed {version(req.name)}"


def test_pulumi_project_points_at_the_program():
    import yaml

    project = yaml.safe_load((REPO / "Pulumi.yaml").read_text())
    assert project["name"] == "cognis-memory"
    assert project["runtime"]["name"] == "python"
    assert (REPO / project["main"] / "__main__.py").exists()
