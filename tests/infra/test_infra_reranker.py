"""Reranker: a SageMaker model (TEI) on S3 weights with network isolation in the VPC, endpoint, autoscaling."""

from __future__ import annotations

import fnmatch
import inspect

import pytest

from cognis_infra.reranker import (
    RerankerSettings,
    default_image,
    endpoint_name,
    endpoint_name_pattern,
    image_repository_arn,
)
from tests.infra.infra_harness import ACCOUNT, MODEL_S3_URI, REGION, parse_json, run_program

MODEL = "aws:sagemaker/model:Model"
CONFIG = "aws:sagemaker/endpointConfiguration:EndpointConfiguration"
#: The endpoint is a dynamic resource (sagemaker_endpoint.py): found by its resource name.
ENDPOINT = "reranker-endpoint"
TARGET = "aws:appautoscaling/target:Target"
TEI_GPU = f"141502667606.dkr.ecr.{REGION}.amazonaws.com/tei:2.0.1-tei1.8.2-gpu-py310-cu122-ubuntu22.04"


def _sagemaker_target(run):
    return next(t for t in run.of_type(TARGET) if t["serviceNamespace"] == "sagemaker")


def _role_statements(run):
    policy = next(p for p in run.of_type("aws:iam/rolePolicy:RolePolicy") if p.name == "reranker-role")
    return {s["Sid"]: s for s in parse_json(policy["policy"])["Statement"]}


def test_model_loads_the_staged_weights_from_s3_not_the_hub(program):
    container = program.one(MODEL)["primaryContainer"]
    assert container["image"] == TEI_GPU
    (source,) = container["modelDataSource"]["s3DataSources"]
    assert source == {"s3Uri": MODEL_S3_URI, "s3DataType": "S3Prefix", "compressionType": "None"}
    assert container["environment"]["HF_MODEL_ID"] == "/opt/ml/model"  # where SageMaker puts the model data
    assert container["environment"]["HF_HUB_OFFLINE"] == "1"


def test_model_runs_isolated_in_the_private_subnets(program):
    model = program.one(MODEL)
    assert model["enableNetworkIsolation"] is True
    assert sorted(model["vpcConfig"]["subnets"]) == [f"subnet-network-private-{i}" for i in range(3)]
    assert model["vpcConfig"]["securityGroupIds"] == ["sg-network-reranker-sg"]
    role = next(r for r in program.of_type("aws:iam/role:Role") if r.name == "reranker-role")
    assert model["executionRoleArn"] == role.outputs["arn"]


def test_role_reads_only_the_model_prefix(program):
    stmts = _role_statements(program)
    bucket, prefix = "cognis-models-123456789012-eu-west-1", "models/BAAI/bge-reranker-v2-m3/0123abcd/"
    assert stmts["ReadModelData"]["Action"] == ["s3:GetObject"]
    assert stmts["ReadModelData"]["Resource"] == [f"arn:aws:s3:::{bucket}/{prefix}*"]
    assert stmts["ListModelData"]["Resource"] == [f"arn:aws:s3:::{bucket}"]
    assert stmts["ListModelData"]["Condition"] == {"StringLike": {"s3:prefix": [f"{prefix}*"]}}
    assert stmts["PullInferenceImage"]["Resource"] == [f"arn:aws:ecr:{REGION}:141502667606:repository/tei"]
    assert all(a.startswith("ec2:") and "*" not in a for a in stmts["AttachToVpc"]["Action"])


def test_tei_batch_limit_covers_what_the_runtime_sends(program):
    """TEI rejects requests with more texts than MAX_CLIENT_BATCH_SIZE (default 32)."""
    from cognis_memory.providers.rerankers import SageMakerReranker

    runtime_default = inspect.signature(SageMakerReranker.__init__).parameters["max_documents"].default
    payload_default = inspect.signature(SageMakerReranker.__init__).parameters["payload_format"].default
    assert payload_default == "tei"  # the container speaks TEI's /rerank contract
    batch = int(program.one(MODEL)["primaryContainer"]["environment"]["MAX_CLIENT_BATCH_SIZE"])
    assert batch >= runtime_default


def test_endpoint_is_named_after_the_stack_and_the_instance_type(program):
    model, config, endpoint = program.one(MODEL), program.one(CONFIG), program.named(ENDPOINT)
    (variant,) = config["productionVariants"]
    assert variant["variantName"] == "AllTraffic"
    assert variant["modelName"] == model.outputs["name"]
    assert variant["instanceType"] == "ml.g5.xlarge"
    assert variant["initialInstanceCount"] == 1
    assert variant["containerStartupHealthCheckTimeoutInSeconds"] >= 600
    assert endpoint["endpointConfigName"] == config.outputs["name"]
    assert endpoint["name"] == "cognis-test-reranker-ml-g5-xlarge"


def test_endpoint_logs_go_to_a_group_the_stack_owns(program):
    group = next(g for g in program.of_type("aws:cloudwatch/logGroup:LogGroup") if g.name == "reranker-logs")
    assert group["name"] == "/aws/sagemaker/Endpoints/cognis-test-reranker-ml-g5-xlarge"
    assert group["kmsKeyId"] == program.one("aws:kms/key:Key").outputs["arn"]
    assert _role_statements(program)["EndpointLogs"]["Resource"] == [f"{group.outputs['arn']}:*"]


def test_target_tracking_autoscaling(program):
    endpoint = program.named(ENDPOINT)
    target = _sagemaker_target(program)
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


@pytest.fixture(scope="module")
def bigger():
    return run_program({"rerankerInstanceType": "ml.g5.2xlarge"})


def test_changing_the_instance_type_replaces_endpoint_config_and_scaling_target(program, bigger):
    """SageMaker refuses to update an autoscaled variant to another instance type. A new name makes
    the endpoint a replacement (created before the old one is deleted), the new configuration is a
    new resource, and the scaling target, keyed by the endpoint name, is replaced with it."""
    old_ep, new_ep = program.named(ENDPOINT), bigger.named(ENDPOINT)
    assert old_ep["name"] != new_ep["name"] == "cognis-test-reranker-ml-g5-2xlarge"
    assert new_ep.options["deleteBeforeReplace"] is False
    assert bigger.one(CONFIG)["productionVariants"][0]["instanceType"] == "ml.g5.2xlarge"
    old_target, new_target = _sagemaker_target(program), _sagemaker_target(bigger)
    assert old_target["resourceId"] != new_target["resourceId"]
    assert new_target.options["replaceOnChanges"] == ["resourceId"]
    assert new_target.options["deleteBeforeReplace"] is False
    # The API follows the new endpoint, and its permission covers both names while tasks roll over.
    (container, _) = parse_json(bigger.one("aws:ecs/taskDefinition:TaskDefinition", "api-task")["containerDefinitions"])
    env = {e["name"]: e["value"] for e in container["environment"]}
    assert env["COGNIS_SAGEMAKER_ENDPOINT"] == new_ep.outputs["name"]
    task = parse_json(
        next(p for p in bigger.of_type("aws:iam/rolePolicy:RolePolicy") if p.name == "api-task")["policy"]
    )
    (pattern,) = next(s for s in task["Statement"] if s["Sid"] == "InvokeReranker")["Resource"]
    for ep in (old_ep, new_ep):
        assert fnmatch.fnmatchcase(ep.outputs["arn"], pattern), (ep.outputs["arn"], pattern)


def test_a_new_model_updates_the_same_endpoint():
    """Changing the model of an autoscaled variant is allowed in place: the endpoint keeps its name."""
    run = run_program({"rerankerModelS3Uri": "s3://cognis-models-123456789012-eu-west-1/models/x/y/"})
    assert run.named(ENDPOINT)["name"] == "cognis-test-reranker-ml-g5-xlarge"
    assert run.one(MODEL)["primaryContainer"]["modelDataSource"]["s3DataSources"][0]["s3Uri"].endswith("/x/y/")


def test_endpoint_names_fit_and_match_the_pattern():
    long_prefix = "cognis-" + "a-very-long-stack-name" * 3
    for prefix in ("cognis-prod", long_prefix):
        for instance in ("ml.g5.xlarge", "ml.p4de.24xlarge", "ml.c6i.2xlarge"):
            name = endpoint_name(prefix, instance)
            assert len(name) <= 63 and name.replace("-", "").isalnum()
            assert fnmatch.fnmatchcase(name, endpoint_name_pattern(prefix))
    assert not fnmatch.fnmatchcase(endpoint_name("cognis-prod2", "ml.g5.xlarge"), endpoint_name_pattern("cognis-prod"))


def test_cpu_instances_get_the_cpu_image():
    settings = RerankerSettings(instance_type="ml.c6i.2xlarge", model_s3_uri=MODEL_S3_URI)
    image = default_image(settings, "us-east-1")
    assert image == "683313688378.dkr.ecr.us-east-1.amazonaws.com/tei-cpu:2.0.1-tei1.8.2-cpu-py310-ubuntu22.04"


def test_unknown_region_needs_an_explicit_image():
    with pytest.raises(ValueError, match="rerankerImage"):
        default_image(RerankerSettings(model_s3_uri=MODEL_S3_URI), "xx-nowhere-1")


def test_image_override_moves_the_pull_permission():
    image = "111122223333.dkr.ecr.eu-west-1.amazonaws.com/my/reranker:1.0"
    run = run_program({"rerankerImage": image, "rerankerInstanceType": "ml.g6.xlarge"})
    assert run.one(MODEL)["primaryContainer"]["image"] == image
    assert run.one(CONFIG)["productionVariants"][0]["instanceType"] == "ml.g6.xlarge"
    pull = _role_statements(run)["PullInferenceImage"]
    assert pull["Resource"] == ["arn:aws:ecr:eu-west-1:111122223333:repository/my/reranker"]


def test_image_repository_arn_parsing():
    with pytest.raises(ValueError):
        image_repository_arn("ghcr.io/org/image:1", "aws")
    assert (
        image_repository_arn(f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/tei@sha256:abc", "aws")
        == f"arn:aws:ecr:us-east-1:{ACCOUNT}:repository/tei"
    )


def test_settings_validation():
    with pytest.raises(ValueError, match="ml"):
        RerankerSettings(instance_type="g5.xlarge", model_s3_uri=MODEL_S3_URI)
    with pytest.raises(ValueError, match="Min"):
        RerankerSettings(min_instances=3, max_instances=2, model_s3_uri=MODEL_S3_URI)
    with pytest.raises(ValueError, match="stage_reranker_model"):
        RerankerSettings()
    assert RerankerSettings(enabled=False).model_s3_uri is None


def test_endpoint_updates_keep_the_running_instance_count(program):
    """UpdateEndpoint resets variant properties to the configuration's initial count unless asked to retain
    them; the endpoint is updated with RetainAllVariantProperties."""
    endpoint = program.named(ENDPOINT)
    assert endpoint.type == "pulumi-python:dynamic:Resource"
    assert endpoint["retainAllVariantProperties"] is True
    assert endpoint["region"] == "eu-west-1"


def _sagemaker(responses):
    import boto3
    from botocore.stub import Stubber

    client = boto3.client("sagemaker", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="y")
    stub = Stubber(client)
    for method, response, params in responses:
        stub.add_response(method, response, params)
    return client, stub


def _described(config, status="InService"):
    return {
        "EndpointName": "cognis-test-reranker-ml-g5-xlarge",
        "EndpointArn": "arn:aws:sagemaker:eu-west-1:123456789012:endpoint/cognis-test-reranker-ml-g5-xlarge",
        "EndpointConfigName": config,
        "EndpointStatus": status,
        "CreationTime": "2026-12-01T00:00:00Z",
        "LastModifiedTime": "2026-12-01T00:00:00Z",
    }


def _config_of(model):
    return {"EndpointConfigName": "c", "EndpointConfigArn": "arn:aws:sagemaker:eu-west-1:123456789012:endpoint-config/c",
            "CreationTime": "2026-12-01T00:00:00Z",
            "ProductionVariants": [{"VariantName": "AllTraffic", "ModelName": model}]}  # fmt: skip


NAME = {"EndpointName": "cognis-test-reranker-ml-g5-xlarge"}
UPDATE = ("update_endpoint", {"EndpointArn": _described("x")["EndpointArn"]},
          {**NAME, "EndpointConfigName": "config-new", "RetainAllVariantProperties": True})  # fmt: skip


def test_a_new_configuration_is_rolled_out_with_retained_variant_properties():
    """The update keeps the variant properties; once the endpoint runs the new configuration, the one it left
    and that configuration's model are deleted (the model the new configuration uses stays)."""
    from cognis_infra.sagemaker_endpoint import apply_endpoint

    client, stub = _sagemaker([
        ("describe_endpoint", _described("config-old"), NAME),
        UPDATE,
        ("describe_endpoint", _described("config-new", "Updating"), NAME),
        ("describe_endpoint", _described("config-new"), NAME),
        ("describe_endpoint_config", _config_of("model-new"), {"EndpointConfigName": "config-new"}),
        ("describe_endpoint_config", _config_of("model-old"), {"EndpointConfigName": "config-old"}),
        ("delete_model", {}, {"ModelName": "model-old"}),
        ("delete_endpoint_config", {}, {"EndpointConfigName": "config-old"}),
    ])  # fmt: skip
    props = {"name": NAME["EndpointName"], "endpointConfigName": "config-new", "region": "eu-west-1"}
    with stub:
        out = apply_endpoint(props, client=client, poll_s=0)
        stub.assert_no_pending_responses()
    assert out["endpointConfigName"] == "config-new"


def test_a_failed_update_fails_and_keeps_the_configuration_in_use():
    """SageMaker rolls a failed update back: the endpoint is InService again on the old configuration with a
    FailureReason. That is a failed update (naming the reason), and nothing is deleted: any call beyond
    the stubbed ones (DeleteEndpointConfig, DeleteModel) would fail the test."""
    from cognis_infra.sagemaker_endpoint import EndpointFailed, apply_endpoint

    reason = "The primary container for production variant AllTraffic did not pass the ping health check."
    client, stub = _sagemaker([
        ("describe_endpoint", _described("config-old"), NAME),
        UPDATE,
        ("describe_endpoint", _described("config-new", "Updating"), NAME),
        ("describe_endpoint", {**_described("config-old"), "FailureReason": reason}, NAME),
    ])  # fmt: skip
    props = {"name": NAME["EndpointName"], "endpointConfigName": "config-new", "region": "eu-west-1"}
    with stub, pytest.raises(EndpointFailed, match="ping health check") as failed:
        apply_endpoint(props, client=client, poll_s=0)
    stub.assert_no_pending_responses()
    assert "config-old" in str(failed.value) and "InService" in str(failed.value)


def test_a_reverted_change_is_not_failed_by_the_earlier_failure_reason():
    """After a failed update the endpoint keeps its FailureReason on the old configuration; a stack that goes back
    to that configuration updates nothing and succeeds."""
    from cognis_infra.sagemaker_endpoint import apply_endpoint

    earlier = {**_described("config-old"), "FailureReason": "health check"}
    client, stub = _sagemaker([("describe_endpoint", earlier, NAME), ("describe_endpoint", earlier, NAME)])
    props = {"name": NAME["EndpointName"], "endpointConfigName": "config-old", "region": "eu-west-1"}
    with stub:
        assert apply_endpoint(props, client=client, poll_s=0)["endpointConfigName"] == "config-old"
        stub.assert_no_pending_responses()


def test_an_update_rollback_that_failed_too_fails():
    from cognis_infra.sagemaker_endpoint import EndpointFailed, apply_endpoint

    client, stub = _sagemaker([
        ("describe_endpoint", _described("config-old"), NAME),
        UPDATE,
        ("describe_endpoint", {**_described("config-new", "UpdateRollbackFailed"), "FailureReason": "mixed"}, NAME),
    ])  # fmt: skip
    props = {"name": NAME["EndpointName"], "endpointConfigName": "config-new", "region": "eu-west-1"}
    with stub, pytest.raises(EndpointFailed, match="UpdateRollbackFailed: mixed"):
        apply_endpoint(props, client=client, poll_s=0)


def test_deleting_the_endpoint_keeps_a_model_another_endpoint_runs(program):
    """Configurations and models are retained by Pulumi and deleted by the endpoint: after the endpoint is gone,
    its configuration goes, and its model unless another endpoint's configuration (a replacement with another
    instance type) uses it."""
    from cognis_infra.sagemaker_endpoint import delete_endpoint

    assert program.one(CONFIG).options["retainOnDelete"] is True
    assert program.one(MODEL).options["retainOnDelete"] is True
    other = {"EndpointName": "cognis-test-reranker-ml-g5-2xlarge"}
    client, stub = _sagemaker([
        ("describe_endpoint", _described("config-old"), NAME),
        ("delete_endpoint", {}, NAME),
        ("describe_endpoint", _described("config-old", "Deleting"), NAME),
    ])  # fmt: skip
    stub.add_client_error("describe_endpoint", "ValidationException", "Could not find endpoint", expected_params=NAME)
    stub.add_response("list_endpoints", {"Endpoints": [
        {**{k: v for k, v in _described("config-2x").items() if k != "EndpointConfigName"}, **other}]}, {})  # fmt: skip
    stub.add_response("describe_endpoint", {**_described("config-2x"), **other}, other)
    stub.add_response("describe_endpoint_config", _config_of("model-shared"), {"EndpointConfigName": "config-2x"})
    stub.add_response("describe_endpoint_config", _config_of("model-shared"), {"EndpointConfigName": "config-old"})
    stub.add_response("delete_endpoint_config", {}, {"EndpointConfigName": "config-old"})
    props = {"name": NAME["EndpointName"], "endpointConfigName": "config-old", "region": "eu-west-1"}
    with stub:
        delete_endpoint(props, client=client, poll_s=0)
        stub.assert_no_pending_responses()


def test_a_new_endpoint_is_created_and_an_unchanged_one_left_alone():
    from botocore.exceptions import ClientError  # noqa: F401 - the stub raises it

    from cognis_infra.sagemaker_endpoint import apply_endpoint

    name = {"EndpointName": "cognis-test-reranker-ml-g5-xlarge"}
    client, stub = _sagemaker([])
    stub.add_client_error("describe_endpoint", "ValidationException", "Could not find endpoint", expected_params=name)
    stub.add_response("create_endpoint", {"EndpointArn": _described("c")["EndpointArn"]},
                      {**name, "EndpointConfigName": "c", "Tags": [{"Key": "Stack", "Value": "test"}]})  # fmt: skip
    stub.add_response("describe_endpoint", _described("c"), name)
    props = {"name": name["EndpointName"], "endpointConfigName": "c", "region": "eu-west-1", "tags": {"Stack": "test"}}
    with stub:
        apply_endpoint(props, client=client, poll_s=0)
        stub.assert_no_pending_responses()
    client, stub = _sagemaker(
        [("describe_endpoint", _described("c"), name), ("describe_endpoint", _described("c"), name)]
    )
    with stub:  # same configuration: no UpdateEndpoint call at all
        apply_endpoint(props, client=client, poll_s=0)
        stub.assert_no_pending_responses()
