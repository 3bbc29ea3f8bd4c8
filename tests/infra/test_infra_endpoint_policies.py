"""VPC endpoint policies: every endpoint the stack knows admits only this stack's calls on its own resources."""

from __future__ import annotations

import pytest

from cognis_infra.context import AwsContext
from tests.infra.infra_harness import ACCOUNT, REGION, parse_json, run_program

POLICY = "aws:ec2/vpcEndpointPolicy:VpcEndpointPolicy"


@pytest.fixture(scope="module")
def policies(program):
    endpoints = {e.id for e in program.of_type("aws:ec2/vpcEndpoint:VpcEndpoint")}
    assert all(p["vpcEndpointId"] in endpoints for p in program.of_type(POLICY))
    return {
        p.name.removeprefix("endpoint-policy-"): parse_json(p["policy"])["Statement"] for p in program.of_type(POLICY)
    }


def test_every_endpoint_has_a_policy(program, policies):
    interface = [e for e in program.of_type("aws:ec2/vpcEndpoint:VpcEndpoint") if e["vpcEndpointType"] == "Interface"]
    assert len(policies) == len(interface) + 1  # and the S3 gateway
    assert set(policies) == {"secretsmanager", "logs", "ecr-api", "ecr-dkr", "bedrock-runtime",
                             "sagemaker-runtime", "s3"}  # fmt: skip


def test_policies_name_the_stacks_resources_only(program, policies):
    secrets = {s.name: s.outputs["arn"] for s in program.of_type("aws:secretsmanager/secret:Secret")}
    master = program.one("aws:rds/cluster:Cluster").outputs["masterUserSecrets"][0]["secretArn"]
    (read,) = policies["secretsmanager"]
    assert sorted(read["Resource"]) == sorted([secrets["api-api-keys"], secrets["cache-auth"], master])
    assert read["Condition"] == {"StringEquals": {"aws:PrincipalAccount": ACCOUNT}}
    (logs,) = policies["logs"]
    group = f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/cognis-memory/test/api"
    assert logs["Resource"] == [group, f"{group}:*"]
    repo = program.one("aws:ecr/repository:Repository").outputs["arn"]
    pull = next(s for s in policies["ecr-api"] if s["Sid"] == "PullStackImages")
    assert repo in pull["Resource"] and len(pull["Resource"]) == 2  # + the reranker's inference image
    (invoke,) = policies["bedrock-runtime"]
    assert all("nova-2-lite" in r for r in invoke["Resource"])
    (reranker,) = policies["sagemaker-runtime"]
    assert reranker["Resource"] == [f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/cognis-test-reranker-*"]
    s3 = {s["Sid"]: s for s in policies["s3"]}
    assert s3["EcrImageLayers"]["Resource"] == [f"arn:aws:s3:::prod-{REGION}-starport-layer-bucket/*"]
    assert "Condition" not in s3["EcrImageLayers"]  # ECR hands layers out as its own presigned URLs
    assert s3["ReadRerankerModel"]["Resource"] == [
        "arn:aws:s3:::cognis-models-123456789012-eu-west-1/models/BAAI/bge-reranker-v2-m3/0123abcd/*"
    ]
    for statements in policies.values():
        for s in statements:
            assert s["Effect"] == "Allow" and s["Principal"] == "*" and "*" not in s["Action"]


def test_an_image_from_elsewhere_leaves_ecr_open_and_no_reranker_no_sagemaker_policy():
    run = run_program({"image": "ghcr.io/acme/cognis:1", "rerankerEnabled": False}, drop=("rerankerModelS3Uri",))
    names = {p.name for p in run.of_type(POLICY)}
    assert "endpoint-policy-ecr-api" not in names and "endpoint-policy-sagemaker-runtime" not in names


def test_endpoint_service_names_come_from_the_partition():
    china = AwsContext(
        "cn-north-1", ACCOUNT, "aws-cn", "amazonaws.com.cn", ("a",), reverse_dns_prefix="cn.com.amazonaws"
    )
    assert china.endpoint_service("s3") == "cn.com.amazonaws.cn-north-1.s3"
    from tests.infra.infra_harness import REPO

    assert "com.amazonaws." not in (REPO / "infra/cognis_infra/network.py").read_text()
