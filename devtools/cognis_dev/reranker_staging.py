"""Staging a pinned reranker model in S3 for the SageMaker endpoint (the command: scripts/stage_reranker_model.py).

The files of a Hugging Face model directory with their SHA-256 (:func:`model_files`), the default
bucket and how it is created (:func:`ensure_bucket`: private, SSE-S3, versioned, TLS only), the
upload under ``models/<model id>/<revision>/`` with its manifest written last (:func:`stage`), and
the command line itself (:func:`parse_args`, :func:`main`, which also runs ``pulumi config set``).
Why and how to run it: the script's docstring and docs/deploy.md, "Stage the reranker model".

Only the standard library at import: boto3 and botocore are imported by the functions that use
them, huggingface_hub by :func:`download` (``--revision``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DEFAULT_MODEL_ID = "BAAI/bge-reranker-v2-m3"
MANIFEST = "cognis-model.json"
#: Weights formats TEI does not load; not downloaded, not uploaded.
IGNORED_PATTERNS: tuple[str, ...] = ("*.onnx", "onnx/*", "openvino/*", "*.h5", "*.msgpack", "*.ot", "flax_model*")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class StageError(Exception):
    """A refusal, with the reason for the operator."""


# --- the model files ------------------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _ignored(rel: str) -> bool:
    from fnmatch import fnmatch

    return any(fnmatch(rel, pattern) for pattern in IGNORED_PATTERNS)


def model_files(model_dir: Path) -> dict[str, dict[str, Any]]:
    """``{relative path: {sha256, bytes}}`` of the files to stage (no hidden files, no unused formats)."""
    if not (model_dir / "config.json").is_file():
        raise StageError(f"{model_dir} has no config.json: not a Hugging Face model directory")
    files: dict[str, dict[str, Any]] = {}
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        rel = path.relative_to(model_dir).as_posix()
        if any(part.startswith(".") for part in rel.split("/")) or _ignored(rel) or rel == MANIFEST:
            continue
        files[rel] = {"sha256": _sha256(path), "bytes": path.stat().st_size}
    if not any(name.endswith((".safetensors", ".bin")) for name in files):
        raise StageError(f"{model_dir} holds no weights (*.safetensors or *.bin)")
    return files


def content_revision(files: dict[str, dict[str, Any]]) -> str:
    """A revision label for a local directory: the digest of its manifest."""
    canonical = json.dumps(files, sort_keys=True).encode()
    return "sha256-" + hashlib.sha256(canonical).hexdigest()[:16]


def download(model_id: str, revision: str, into: Path) -> Path:
    """The Hub snapshot of ``model_id`` at commit ``revision`` (needs huggingface_hub and the network)."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError as e:  # pragma: no cover - depends on the operator's environment
        raise StageError("--revision needs huggingface_hub (pip install huggingface_hub), or use --model-dir") from e
    path = snapshot_download(
        repo_id=model_id, revision=revision, local_dir=str(into), ignore_patterns=list(IGNORED_PATTERNS)
    )
    return Path(path)


# --- S3 ---------------------------------------------------------------------------------------------------


def default_bucket(account: str, region: str) -> str:
    return f"cognis-models-{account}-{region}"


def _bucket_exists(s3: Any, bucket: str) -> bool:
    from botocore.exceptions import ClientError

    try:
        s3.head_bucket(Bucket=bucket)
        return True
    except ClientError as e:
        if e.response.get("Error", {}).get("Code") in ("404", "NoSuchBucket", "NotFound"):
            return False
        raise


def create_bucket(s3: Any, bucket: str, region: str, partition: str = "aws") -> None:
    """A private, encrypted, versioned bucket that refuses plain HTTP."""
    kwargs: dict[str, Any] = {"Bucket": bucket}
    if region != "us-east-1":
        kwargs["CreateBucketConfiguration"] = {"LocationConstraint": region}
    s3.create_bucket(**kwargs)
    s3.put_public_access_block(
        Bucket=bucket,
        PublicAccessBlockConfiguration={
            "BlockPublicAcls": True,
            "IgnorePublicAcls": True,
            "BlockPublicPolicy": True,
            "RestrictPublicBuckets": True,
        },
    )
    s3.put_bucket_encryption(
        Bucket=bucket,
        ServerSideEncryptionConfiguration={
            "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
        },
    )
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    arn = f"arn:{partition}:s3:::{bucket}"
    s3.put_bucket_policy(
        Bucket=bucket,
        Policy=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Sid": "TlsOnly",
                        "Effect": "Deny",
                        "Principal": "*",
                        "Action": "s3:*",
                        "Resource": [arn, f"{arn}/*"],
                        "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                    }
                ],
            }
        ),
    )


def ensure_bucket(s3: Any, bucket: str, region: str, partition: str, *, named: bool) -> bool:
    """Create the default bucket when it is missing (True if created); a named bucket must exist."""
    if _bucket_exists(s3, bucket):
        return False
    if named:
        raise StageError(f"bucket {bucket} does not exist (only the default bucket is created)")
    create_bucket(s3, bucket, region, partition)
    return True


def _existing_manifest(s3: Any, bucket: str, key: str) -> dict[str, Any] | None:
    # Listed first: without s3:ListBucket, S3 answers a missing key with 403, not 404.
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=key).get("Contents", [])
    if not any(o["Key"] == key for o in listed):
        return None
    return json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())


def stage(
    s3: Any, model_dir: Path, bucket: str, model_id: str, revision: str, files: dict[str, dict[str, Any]]
) -> tuple[str, bool]:
    """Upload ``files`` under ``models/<model id>/<revision>/`` unless already there; ``(uri, uploaded)``."""
    prefix = f"models/{model_id}/{revision}/"
    manifest = {"model_id": model_id, "revision": revision, "files": files}
    existing = _existing_manifest(s3, bucket, prefix + MANIFEST)
    uri = f"s3://{bucket}/{prefix}"
    if existing is not None:
        if existing.get("files") != files:
            raise StageError(
                f"{uri} already holds a different model (its {MANIFEST} lists other files); staged models are "
                "immutable: stage under another --revision"
            )
        return uri, False
    for rel in files:
        s3.upload_file(str(model_dir / rel), bucket, prefix + rel)
    # Written last: a prefix with a manifest is complete.
    s3.put_object(Bucket=bucket, Key=prefix + MANIFEST, Body=json.dumps(manifest, indent=2, sort_keys=True).encode())
    return uri, True


# --- command line -----------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="stage_reranker_model.py",
        description="Stage a pinned reranker model in S3 and point the stack at it (cognis:rerankerModelS3Uri).",
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--model-dir", type=Path, help="a local model directory to stage")
    source.add_argument("--revision", help="a Hub commit (40 hex characters) of --model-id to download and stage")
    p.add_argument("--label", help="revision label for --model-dir (default: sha256-<digest of the files>)")
    p.add_argument("--model-id", default=DEFAULT_MODEL_ID, help=f"Hugging Face model id (default {DEFAULT_MODEL_ID})")
    p.add_argument("--bucket", help="S3 bucket (default: cognis-models-<account>-<region>, created when missing)")
    p.add_argument("--region", help="AWS region (default: the AWS configuration's)")
    p.add_argument("--stack", help="Pulumi stack to set cognis:rerankerModelS3Uri on (default: the selected one)")
    p.add_argument("--no-config", action="store_true", help="only stage; do not run `pulumi config set`")
    args = p.parse_args(argv)
    if args.revision is not None and not _COMMIT.match(args.revision):
        p.error("--revision must be a full commit hash (40 hex characters): branch and tag names move")
    if args.label is not None and not _LABEL.match(args.label):
        p.error("--label may hold letters, digits, '.', '_' and '-' only")
    if "/" not in args.model_id or args.model_id.startswith("/") or ".." in args.model_id:
        p.error("--model-id must look like org/name")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    import boto3

    session = boto3.session.Session(region_name=args.region)
    region = session.region_name
    if not region:
        print("no AWS region: pass --region or configure one", file=sys.stderr)
        return 2
    s3 = session.client("s3")
    identity = session.client("sts").get_caller_identity()
    partition = identity["Arn"].split(":")[1]
    bucket = args.bucket or default_bucket(identity["Account"], region)
    try:
        with tempfile.TemporaryDirectory(prefix="cognis-model-") as tmp:
            if args.revision is not None:
                model_dir, revision = download(args.model_id, args.revision, Path(tmp)), args.revision
                files = model_files(model_dir)
            else:
                model_dir = args.model_dir
                files = model_files(model_dir)
                revision = args.label or content_revision(files)
            if ensure_bucket(s3, bucket, region, partition, named=args.bucket is not None):
                print(f"created s3://{bucket} (private, SSE-S3, versioned, TLS only)")
            total = sum(f["bytes"] for f in files.values())
            print(f"staging {args.model_id}@{revision}: {len(files)} files, {total / 1e6:.1f} MB")
            uri, uploaded = stage(s3, model_dir, bucket, args.model_id, revision, files)
    except StageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(("staged " if uploaded else "already staged, nothing uploaded: ") + uri)
    if not args.no_config:
        command = ["pulumi", "config", "set", "cognis:rerankerModelS3Uri", uri]
        if args.stack:
            command += ["--stack", args.stack]
        subprocess.run(command, check=True)
        print("cognis:rerankerModelS3Uri set; now run: pulumi up")
    return 0
