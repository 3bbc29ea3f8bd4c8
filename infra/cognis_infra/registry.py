"""Registry: the ECR repository of the API image, and the image build that fills it.

By default ``pulumi up`` builds the project's ``Dockerfile`` (target ``api``, for the Fargate
CPU architecture) with ``pulumi-docker-build``, signs in to the repository with a token from
``aws.ecr.get_authorization_token`` and pushes; the task definition runs the pushed image by
digest (``repo:tag@sha256:...``), so a fresh stack comes up in one ``pulumi up``.

Tags are immutable, so the tag is a digest of everything that goes into the build: the files
the ``.dockerignore`` lets through with their permission bits (``COPY`` keeps them), the
Dockerfile, the target, the platform and the build arguments, the base image among them
(``cognis:baseImage``, pinned by digest for a reproducible base). Nothing of the checkout's
location goes in: the build context and the Dockerfile are handed to the build as paths relative
to the program's working directory, so ``pulumi up`` from another checkout or from CI computes the
same tag and the same inputs, and does not build or push again. An unchanged tree keeps its tag
and is not pushed again, a changed one gets a new tag.

A tag already in the repository is therefore an image of the same inputs: the program looks the tag
up before it declares the build and, when it is there, runs that image (``repo:tag@<its digest>``)
instead of building and pushing again. A push that succeeded in an update whose state was never
saved is thus picked up by the next ``pulumi up``; before, that update rebuilt (a build is not
byte-identical) and ECR refused the new image under the immutable tag. The build resource is
``retain_on_delete``: leaving it out of the program then only drops it from the state.

The lifecycle policy never expires a tagged image: every image a task definition runs (the
current one, the one the circuit breaker rolls back to, an older one set with ``cognis:imageTag``)
is tagged, and ECR cannot tell which of them a task definition still names. Only untagged images
expire (docs/deploy.md, "Images in the repository").

Teams whose CI builds images set ``cognis:image`` (any URI) or ``cognis:imageTag`` (a tag in
this repository, e.g. from ``scripts/build_and_push_image.sh``) and no build runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pulumi
import pulumi_aws as aws
import pulumi_docker_build as docker_build

from .base import CognisComponent

#: Docker platform per Fargate CPU architecture.
PLATFORMS: dict[str, docker_build.Platform] = {
    "X86_64": docker_build.Platform.LINUX_AMD64,
    "ARM64": docker_build.Platform.LINUX_ARM64,
}
BUILD_TARGET = "api"


@dataclass(frozen=True)
class ImageBuild:
    """Build the API image from ``context`` inside the program."""

    context: Path
    cpu_architecture: str = "X86_64"
    target: str = BUILD_TARGET
    dockerfile: str = "Dockerfile"
    #: optional embedding models the build fetches into the image (the Dockerfile's COGNIS_FETCH_MODELS)
    fetch_models: tuple[str, ...] = ()
    #: the Dockerfile's PYTHON_IMAGE (None: the Dockerfile's default, which the digest covers as its text)
    base_image: str | None = None

    @property
    def platform(self) -> docker_build.Platform:
        return PLATFORMS[self.cpu_architecture]

    @property
    def build_args(self) -> dict[str, str]:
        args = {"COGNIS_FETCH_MODELS": " ".join(self.fetch_models)} if self.fetch_models else {}
        if self.base_image:
            args["PYTHON_IMAGE"] = self.base_image
        return args

    def location(self, path: Path, cwd: Path | None = None) -> str:
        """``path`` relative to the working directory (the program's and the build provider's), so that the
        build's inputs do not depend on where the checkout is."""
        return Path(os.path.relpath(path, cwd or Path.cwd())).as_posix()

    def tag(self) -> str:
        extra = [f"{k}={v}" for k, v in sorted(self.build_args.items())]
        return "src-" + build_digest(self.context, self.dockerfile, self.target, self.platform.value, *extra)[:16]


@dataclass
class RegistryArgs:
    #: Repository name (carries the stack name).
    repository_name: str
    #: Build the image here; None when the image comes from elsewhere.
    build: ImageBuild | None = None
    protect: bool = True
    tags: Mapping[str, str] = field(default_factory=dict)


def lifecycle_policy() -> str:
    """Expire untagged images after a day; never a tagged one (fact 69): a tag count or age cannot know which
    images the current and the rolled-back task definitions still run."""
    return json.dumps(
        {
            "rules": [
                {
                    "rulePriority": 1,
                    "description": "Expire untagged images after a day",
                    "selection": {
                        "tagStatus": "untagged",
                        "countType": "sinceImagePushed",
                        "countUnit": "days",
                        "countNumber": 1,
                    },
                    "action": {"type": "expire"},
                }
            ]
        }
    )


def pushed_digest(repository_name: str, tag: str) -> str | None:
    """The digest ECR holds under ``tag`` in the repository, or None (no such repository or tag yet).
    Provider look-ups, before anything is declared, like the Aurora engine look-up."""
    if repository_name not in (aws.ecr.get_repositories().names or []):
        return None
    images = aws.ecr.get_images(repository_name=repository_name).image_ids or []
    return next((i.image_digest for i in images if i.image_tag == tag), None)


# --- build context digest -------------------------------------------------------------------------


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """A ``.dockerignore`` pattern as a regex over ``/``-separated relative paths (``**`` spans dirs)."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out += ".*"
            i += 2
            if pattern.startswith("/", i):
                out += "/?"
                i += 1
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out)


def _ignore_rules(text: str) -> list[tuple[bool, re.Pattern[str]]]:
    rules = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line[1:] if negate else line
        rules.append((negate, _pattern_regex(pattern.strip("/"))))
    return rules


def _excluded(path: str, rules: Sequence[tuple[bool, re.Pattern[str]]]) -> bool:
    """The last rule matching the path or one of its parent directories decides."""
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for negate, regex in rules:
        if any(regex.fullmatch(c) for c in candidates):
            excluded = not negate
    return excluded


def _literal_root(pattern: str) -> str:
    """The part of a pattern before its first wildcard, e.g. ``runtime`` for ``runtime/**/x``."""
    return re.split(r"[*?\[]", pattern, maxsplit=1)[0].rstrip("/")


def context_files(context: Path) -> list[str]:
    """Relative paths of the files ``docker build`` sends, by the context's ``.dockerignore``.

    Excluded directories are not walked unless a ``!`` rule could re-include something below them.
    """
    ignore = context / ".dockerignore"
    text = ignore.read_text() if ignore.exists() else ""
    rules = _ignore_rules(text)
    reincluded = [
        _literal_root(line.strip()[1:].strip("/")) for line in text.splitlines() if line.strip().startswith("!")
    ]

    def worth_walking(rel_dir: str) -> bool:
        if not _excluded(rel_dir, rules):
            return True
        return any(root == "" or root.startswith(rel_dir + "/") or rel_dir.startswith(root) for root in reincluded)

    files = []
    for dirpath, dirnames, filenames in os.walk(context):
        base = Path(dirpath).relative_to(context).as_posix()
        prefix = "" if base == "." else base + "/"
        dirnames[:] = sorted(d for d in dirnames if worth_walking(prefix + d))
        files.extend(prefix + f for f in filenames if not _excluded(prefix + f, rules))
    return sorted(files)


def build_digest(context: Path, dockerfile: str, target: str, platform: str, *build_args: str) -> str:
    """SHA-256 over everything that decides the image: context files (relative path, permission bits,
    bytes), Dockerfile, target, platform and build arguments (``NAME=value``). Nothing of the checkout's
    absolute location enters it."""
    h = hashlib.sha256()
    h.update(f"target={target}\0platform={platform}\0".encode())
    for arg in build_args:
        h.update(f"arg={arg}\0".encode())
    for rel in sorted({*context_files(context), dockerfile}):
        path = context / rel
        h.update(rel.encode() + b"\0" + f"{stat.S_IMODE(path.stat().st_mode):o}".encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


class Registry(CognisComponent):
    """An ECR repository (immutable tags, scan on push, KMS, lifecycle rules) and, optionally,
    the image build that pushes to it."""

    repository_url: pulumi.Output[str]
    repository_arn: pulumi.Output[str]
    #: ``<repository>:<tag>@sha256:<digest>`` of the built image (None without a build).
    image_ref: pulumi.Output[str] | None

    def __init__(self, name: str, args: RegistryArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("cognis:registry:Registry", name, args.tags, opts)
        repo = aws.ecr.Repository(
            f"{name}-api",
            name=args.repository_name,
            image_tag_mutability="IMMUTABLE",
            image_scanning_configuration=aws.ecr.RepositoryImageScanningConfigurationArgs(scan_on_push=True),
            encryption_configurations=[aws.ecr.RepositoryEncryptionConfigurationArgs(encryption_type="KMS")],
            force_delete=False,
            tags=self.tags(args.repository_name),
            opts=self.child_opts(protect=args.protect),
        )
        aws.ecr.LifecyclePolicy(f"{name}-api", repository=repo.name, policy=lifecycle_policy(), opts=self.child_opts())
        self.image_ref = None
        b = args.build
        tag = b.tag() if b is not None else None
        # An immutable tag that exists holds an image of the same build inputs (the tag is their digest): run it.
        existing = pushed_digest(args.repository_name, tag) if tag is not None else None
        if tag is not None and existing:
            self.image_ref = pulumi.Output.concat(repo.repository_url, ":", tag, "@", existing)
        elif b is not None and tag is not None:
            token = aws.ecr.get_authorization_token_output(registry_id=repo.registry_id)
            image = docker_build.Image(
                f"{name}-image",
                tags=[pulumi.Output.concat(repo.repository_url, ":", tag)],
                context=docker_build.BuildContextArgs(location=b.location(b.context)),
                dockerfile=docker_build.DockerfileArgs(location=b.location(b.context / b.dockerfile)),
                target=b.target,
                build_args=b.build_args or None,
                platforms=[b.platform],
                push=True,
                # A preview needs no Docker engine; the build and push happen in `pulumi up`.
                build_on_preview=False,
                registries=[
                    docker_build.RegistryArgs(
                        address=repo.repository_url,
                        username=token.user_name,
                        password=pulumi.Output.secret(token.password),
                    )
                ],
                # Dropped from the program once its tag is found in the repository: forget it, delete nothing.
                opts=self.child_opts(retain_on_delete=True),
            )
            self.image_ref = image.ref
        self.repository_url = repo.repository_url
        self.repository_arn = repo.arn
        self.register_outputs(
            {"repositoryUrl": self.repository_url, "repositoryArn": self.repository_arn, "imageRef": self.image_ref}
        )
