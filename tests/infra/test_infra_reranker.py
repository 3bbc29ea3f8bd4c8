"""Reranker: SageMaker model (Hugging Face TEI), endpoint config, endpoint, autoscaling."""

from __future__ import annotations

import inspect

import pytest
from cognis_infra.reranker import RerankerSettings, default_image, image_repository_arn

from tests.infra.infra_harness import ACCOUNT, REGION, parse_json, run_program

MODEL = "aws:sagemaker/model:Model"
CONFIG = "aws:sagemaker/endpointConfiguration:EndpointConfiguration"
ENDPOINT = "aws:sagemaker/endpoint:Endpoint"
TEI_GPU = f"141502667606.dkr.ecr.{REGION}.amazonaws.com/tei:2.0.1-tei1.8.2-gpu-py310-cu122-ubuntu22.04"


def test_model_serves_the_configured_bge_reranker_with_tei(program):
    model = program.one(MODEL)
    container = model["primaryContainer"]
    assert container["image"] == TEI_GPU
    assert container["environment"]["HF_MODEL_ID"] == "BAAI/bge-reranker-v2-m3"
    role = next(r for r in program.of_type("aws:iam/role:Role") if r.name == "reranker-role")
    assert model["executionRoleArn"] == role.outputs["arn"]


def test_tei_batch_limit_covers_what_the_runtime_sends(program):
    """TEI rejects requests with more texts than MAX_CLIENT_BATCH_SIZE (default 32)."""
    from cognis_memory.providers.rerankers import SageMakerReranker

    runtime_default = inspect.signature(SageMakerReranker.__init__).parameters["max_documents"].default
    payload_default = inspect.signature(SageMakerReranker.__init__).parameters["payload_format"].default
    assert payload_default == "tei"  # the container speaks TEI's /rerank contract
    batch = int(program.one(MODEL)["primaryContainer"]["environment"]["MAX_CLIENT_BATCH_SIZE"])
    assert batch >= runtime_default


def test_endpoint_configuration_and_endpoint(program):
    model, config, endpoint = program.one(MODEL), program.one(CONFIG), program.one(ENDPOINT)
    (variant,) = config["productionVariants"]
    assert variant["variantName"] == "AllTraffic"
    assert variant["modelName"] == model.outputs["name"]
    assert variant["instanceType"] == "ml.g5.xlarge"
    assert variant["initialInstanceCount"] == 1
    assert variant["containerStartupHealthCheckTimeoutInSeconds"] >= 600
    assert endpoint["endpointConfigName"] == config.outputs["name"]


def test_target_tracking_autoscaling(program):
    endpoint = program.one(ENDPOINT)
    target = next(
        t for t in program.of_type("aws:appautoscaling/target:Target") if t["serviceNamespace"] == "sagemaker"
    )
    assert target["resourceId"] == f"endpoint/{endpoint.outputs['name']}/variant/AllTraffic"
    assert target["scalableDimension"] == "sagemaker:variant:DesiredInstanceCount"
    assert (target["minCapacity"], target["maxCapacity"]) == (1, 2)
    policy = next(
        p for p in program.of_type("aws:appautoscaling/policy:Policy") if p["serviceNamespace"] == "sagemaker"
    )
    assert policy["policyType"] == "TargetTrackingScaling"
    assert policy["resourceId"] == target["resourceId"]
    tracking = policy["targetTrackingScalingPolicyConfiguration"]
    assert tracking["predefinedMetricSpecification"]["predefinedMetricType"] == "SageMakerVariantInvocationsPerInstance"
    assert tracking["targetValue"] == 300


def test_execution_role_is_scoped(program):
    role = next(r for r in program.of_type("aws:iam/role:Role") if r.name == "reranker-role")
    trust = parse_json(role["assumeRolePolicy"])["Statement"][0]
    assert trust["Principal"] == {"Service": "sagemaker.amazonaws.com"}
    assert trust["Condition"] == {"StringEquals": {"aws:SourceAccount": ACCOUNT}}
    policy = parse_json(
        next(p for p in program.of_type("aws:iam/rolePolicy:RolePolicy") if p.name == "reranker-role")["policy"]
    )
    by_sid = {s["Sid"]: s for s in policy["Statement"]}
    assert by_sid["PullInferenceImage"]["Resource"] == [f"arn:aws:ecr:{REGION}:141502667606:repository/tei"]
    assert by_sid["EcrAuth"]["Action"] == ["ecr:GetAuthorizationToken"]
    assert by_sid["EndpointLogs"]["Resource"] == [
        f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/sagemaker/Endpoints/*"
    ]


def test_cpu_instances_get_the_cpu_image():
    image = default_image(RerankerSettings(instance_type="ml.c6i.2xlarge"), "us-east-1")
    assert image == "683313688378.dkr.ecr.us-east-1.amazonaws.com/tei-cpu:2.0.1-tei1.8.2-cpu-py310-ubuntu22.04"


def test_unknown_region_needs_an_explicit_image():
    with pytest.raises(ValueError, match="rerankerImage"):
        default_image(RerankerSettings(), "xx-nowhere-1")


def test_image_override_moves_the_pull_permission():
    image = "111122223333.dkr.ecr.eu-west-1.amazonaws.com/my/reranker:1.0"
    run = run_program(
        {"rerankerImage": image, "rerankerModelId": "BAAI/bge-reranker-base", "rerankerInstanceType": "ml.g6.xlarge"}
    )
    container = run.one(MODEL)["primaryContainer"]
    assert container["image"] == image and container["environment"]["HF_MODEL_ID"] == "BAAI/bge-reranker-base"
    assert run.one(CONFIG)["productionVariants"][0]["instanceType"] == "ml.g6.xlarge"
    policy = parse_json(
        next(p for p in run.of_type("aws:iam/rolePolicy:RolePolicy") if p.name == "reranker-role")["policy"]
    )
    pull = next(s for s in policy["Statement"] if s["Sid"] == "PullInferenceImage")
    assert pull["Resource"] == ["arn:aws:ecr:eu-west-1:111122223333:repository/my/reranker"]


def test_image_repository_arn_parsing():
    with pytest.raises(ValueError):
        image_repository_arn("ghcr.io/org/image:1", "aws")
    assert (
        image_repository_arn("123456789012.dkr.ecr.us-east-1.amazonaws.com/tei@sha256:abc", "aws")
        == "arn:aws:ecr:us-east-1:123456789012:repository/tei"
    )


def test_settings_validation():
    with pytest.raises(ValueError, match="ml"):
        RerankerSettings(instance_type="g5.xlarge")
    with pytest.raises(ValueError, match="Min"):
        RerankerSettings(min_instances=3, max_instances=2)
