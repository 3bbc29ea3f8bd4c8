"""scripts/stage_reranker_model.py, whose code is cognis_dev.reranker_staging, against S3 (moto: S3 and STS
are paid AWS APIs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import boto3
import pytest
from cognis_dev import reranker_staging as stage
from moto import mock_aws

from cognis_infra.reranker import RerankerSettings
from tests.infra.infra_harness import REPO

REGION = "eu-west-1"
BUCKET = "cognis-models-123456789012-eu-west-1"  # moto's account


@pytest.fixture
def aws(monkeypatch):
    """moto's S3 with the default bucket already there. moto applies bucket policies without their
    conditions, so the TLS-only policy would deny its (plain) requests: creating the bucket is
    tested on its own below, staging on a bucket without that policy."""
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
        s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        yield s3


@pytest.fixture
def model_dir(tmp_path):
    d = tmp_path / "bge-reranker"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"architectures": ["XLMRobertaForSequenceClassification"]}))
    (d / "tokenizer.json").write_text("{}")
    (d / "model.safetensors").write_bytes(b"\x01" * 4096)
    (d / "onnx").mkdir()
    (d / "onnx" / "model.onnx").write_bytes(b"\x02" * 10)  # a format TEI does not load
    (d / ".cache").mkdir()
    (d / ".cache" / "junk").write_text("x")
    return d


def _keys(s3, prefix=""):
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", []))


def test_the_default_bucket_is_created_private_encrypted_versioned_and_tls_only(aws):
    other = "cognis-models-123456789012-eu-west-2"
    s3_west2 = boto3.client("s3", region_name="eu-west-2")
    assert stage.ensure_bucket(s3_west2, other, "eu-west-2", "aws", named=False) is True
    assert stage.ensure_bucket(s3_west2, other, "eu-west-2", "aws", named=False) is False  # exists now
    block = s3_west2.get_public_access_block(Bucket=other)["PublicAccessBlockConfiguration"]
    assert all(block.values())
    rules = s3_west2.get_bucket_encryption(Bucket=other)["ServerSideEncryptionConfiguration"]["Rules"]
    assert rules[0]["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    assert s3_west2.get_bucket_versioning(Bucket=other)["Status"] == "Enabled"
    (deny,) = json.loads(s3_west2.get_bucket_policy(Bucket=other)["Policy"])["Statement"]
    assert deny["Effect"] == "Deny" and deny["Principal"] == "*"
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert deny["Resource"] == [f"arn:aws:s3:::{other}", f"arn:aws:s3:::{other}/*"]
    with pytest.raises(stage.StageError, match="does not exist"):
        stage.ensure_bucket(s3_west2, "someone-elses-bucket", "eu-west-2", "aws", named=True)


def test_stages_a_local_directory(aws, model_dir, capsys):
    assert stage.main(["--model-dir", str(model_dir), "--no-config"]) == 0
    out = capsys.readouterr().out
    uri = out.strip().splitlines()[-1].removeprefix("staged ")
    revision = stage.content_revision(stage.model_files(model_dir))
    assert uri == f"s3://{BUCKET}/models/BAAI/bge-reranker-v2-m3/{revision}/"
    prefix = uri.removeprefix(f"s3://{BUCKET}/")
    assert _keys(aws) == sorted(
        prefix + k for k in ("config.json", "tokenizer.json", "model.safetensors", stage.MANIFEST)
    )
    manifest = json.loads(aws.get_object(Bucket=BUCKET, Key=prefix + stage.MANIFEST)["Body"].read())
    assert manifest["revision"] == revision and manifest["model_id"] == "BAAI/bge-reranker-v2-m3"
    assert manifest["files"]["model.safetensors"]["bytes"] == 4096
    # The stack accepts the URI as it is printed.
    assert RerankerSettings(model_s3_uri=uri).model_prefix == prefix


def test_staging_again_uploads_nothing_and_a_different_model_is_refused(aws, model_dir, capsys):
    args = ["--model-dir", str(model_dir), "--label", "v1", "--no-config"]
    assert stage.main(args) == 0
    versions = len(aws.list_object_versions(Bucket=BUCKET)["Versions"])
    assert stage.main(args) == 0
    assert "already staged, nothing uploaded" in capsys.readouterr().out
    assert len(aws.list_object_versions(Bucket=BUCKET)["Versions"]) == versions

    (model_dir / "model.safetensors").write_bytes(b"\x03" * 4096)
    assert stage.main(args) == 1
    assert "already holds a different model" in capsys.readouterr().err
    assert len(aws.list_object_versions(Bucket=BUCKET)["Versions"]) == versions  # nothing overwritten


def test_refusals(aws, tmp_path, model_dir, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert stage.main(["--model-dir", str(empty), "--no-config"]) == 1
    assert "no config.json" in capsys.readouterr().err
    (model_dir / "model.safetensors").unlink()
    assert stage.main(["--model-dir", str(model_dir), "--no-config"]) == 1
    assert "no weights" in capsys.readouterr().err
    assert stage.main(["--model-dir", str(model_dir), "--bucket", "someone-elses-bucket", "--no-config"]) == 1
    assert [b["Name"] for b in aws.list_buckets()["Buckets"]] == [BUCKET]  # a named bucket is never created


@pytest.mark.parametrize("revision", ["main", "v2.0", "953dc6f"])
def test_a_revision_must_be_a_full_commit(revision, capsys):
    with pytest.raises(SystemExit) as info:
        stage.parse_args(["--revision", revision])
    assert info.value.code == 2 and "40 hex characters" in capsys.readouterr().err


def test_sets_the_stack_config_with_pulumi(aws, model_dir, tmp_path):
    """The script runs `pulumi config set` (a stub on PATH records the call)."""
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir()
    (bin_dir / "pulumi").write_text(f'#!/usr/bin/env bash\necho "pulumi $*" >> {log}\n')
    (bin_dir / "pulumi").chmod(0o755)
    env_path = f"{bin_dir}:{os.environ['PATH']}"
    os.environ["PATH"] = env_path
    try:
        assert stage.main(["--model-dir", str(model_dir), "--label", "v7", "--stack", "prod"]) == 0
    finally:
        os.environ["PATH"] = env_path.split(":", 1)[1]
    uri = f"s3://{BUCKET}/models/BAAI/bge-reranker-v2-m3/v7/"
    assert log.read_text().splitlines() == [f"pulumi config set cognis:rerankerModelS3Uri {uri} --stack prod"]


def test_help_runs_without_aws():
    out = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "stage_reranker_model.py"), "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "--model-dir" in out and "--revision" in out and "--no-config" in out
