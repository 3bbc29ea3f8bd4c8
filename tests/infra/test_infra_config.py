"""Stack configuration: validation, variants, and the documented example config."""

from __future__ import annotations

import json
import re
from typing import Any

import pulumi
import pytest
import yaml
from cognis_infra import config as stack_config

from tests.infra.infra_harness import API_KEY, BASE_CONFIG, REDIS_TOKEN, REPO, parse_json, run_program

EXAMPLE = REPO / "Pulumi.example.yaml"


def _expect_failure(overrides: dict[str, Any] | None = None, drop: tuple[str, ...] = (), match: str = "") -> None:
    with pytest.raises(Exception) as info:
        run_program(overrides, drop=drop)
    assert re.search(match, str(info.value)), str(info.value)


def test_certificate_is_required():
    _expect_failure(drop=("certificateArn",), match="certificateArn")


def test_secrets_are_required():
    _expect_failure(drop=("apiKey",), match="apiKey")
    _expect_failure(drop=("redisAuthToken",), match="redisAuthToken")


def test_weak_api_key_is_rejected():
    _expect_failure({"apiKey": "short"}, match="apiKey")


def test_image_and_tag_are_exclusive():
    _expect_failure({"image": "ghcr.io/acme/cognis:1"}, match="either cognis:image")


def test_more_azs_than_the_region_has():
    _expect_failure({"azCount": 4, "natGateways": 4, "opensearchInstanceCount": 3}, match="available AZs")


def test_without_an_image_everything_but_the_ecs_service_is_created():
    run = run_program(drop=("imageTag",))
    assert not run.of_type("aws:ecs/taskDefinition:TaskDefinition")
    assert not run.of_type("aws:ecs/service:Service")
    assert not [t for t in run.of_type("aws:appautoscaling/target:Target") if t["serviceNamespace"] == "ecs"]
    # The rest is there: the image can be pushed to the repository and the ALB has a URL.
    assert run.of_type("aws:ecr/repository:Repository") and run.of_type("aws:lb/loadBalancer:LoadBalancer")
    assert run.exports["ecrRepositoryUrl"] and run.exports["apiUrl"].startswith("https://")
    assert run.exports["ecsServiceName"] is None
    stmts = parse_json(
        next(p for p in run.of_type("aws:iam/rolePolicy:RolePolicy") if p.name == "api-execution")["policy"]
    )
    assert "PullApiImage" not in {s["Sid"] for s in stmts["Statement"]}


def test_full_image_uri_from_elsewhere():
    run = run_program({"image": "ghcr.io/acme/cognis-memory:1.2.3"}, drop=("imageTag",))
    (container,) = parse_json(run.one("aws:ecs/taskDefinition:TaskDefinition")["containerDefinitions"])
    assert container["image"] == "ghcr.io/acme/cognis-memory:1.2.3"


def test_reranker_can_be_disabled():
    run = run_program({"rerankerEnabled": False})
    assert not [r for r in run.resources if r.type.startswith("aws:sagemaker/")]
    (container,) = parse_json(run.one("aws:ecs/taskDefinition:TaskDefinition")["containerDefinitions"])
    env = {e["name"]: e["value"] for e in container["environment"]}
    assert env["COGNIS_RERANKER"] == "none" and "COGNIS_SAGEMAKER_ENDPOINT" not in env
    task = parse_json(next(p for p in run.of_type("aws:iam/rolePolicy:RolePolicy") if p.name == "api-task")["policy"])
    assert not any("sagemaker:" in a for s in task["Statement"] for a in s["Action"])
    assert not [
        a for a in run.of_type("aws:cloudwatch/metricAlarm:MetricAlarm") if a.get("namespace") == "AWS/SageMaker"
    ]
    assert run.exports["rerankerEndpointName"] is None


def test_arm64_and_sizes_from_config():
    run = run_program(
        {"cpuArchitecture": "ARM64", "cpu": 2048, "memory": 4096, "desiredCount": 3, "minCount": 3, "maxCount": 6}
    )
    td = run.one("aws:ecs/taskDefinition:TaskDefinition")
    assert td["runtimePlatform"]["cpuArchitecture"] == "ARM64"
    assert (td["cpu"], td["memory"]) == ("2048", "4096")
    assert run.one("aws:ecs/service:Service")["desiredCount"] == 3


def test_extra_tags_reach_every_resource():
    run = run_program({"tags": {"CostCenter": "cc-42"}})
    tagged = [r for r in run.resources if r.custom and "tags" in r.inputs]
    assert tagged and all(r["tags"]["CostCenter"] == "cc-42" for r in tagged)


class _RecordingConfig:
    """A pulumi.Config stand-in that answers from a dict and records every key asked."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values, self.asked = values, set()

    def _get(self, key):
        self.asked.add(key)
        return self.values.get(key)

    def get(self, key):
        v = self._get(key)
        return None if v is None else str(v)

    def get_int(self, key):
        v = self._get(key)
        return None if v is None else int(v)

    def get_float(self, key):
        v = self._get(key)
        return None if v is None else float(v)

    def get_bool(self, key):
        v = self._get(key)
        return None if v is None else str(v).lower() == "true"

    def get_object(self, key):
        return self._get(key)

    def require(self, key):
        v = self.get(key)
        assert v is not None, key
        return v

    def require_secret(self, key):
        return pulumi.Output.secret(self.require(key))


def _example() -> tuple[dict[str, Any], set[str]]:
    text = EXAMPLE.read_text()
    values = {
        k.removeprefix("cognis:"): v for k, v in yaml.safe_load(text)["config"].items() if k.startswith("cognis:")
    }
    commented = set(re.findall(r"^\s*#\s*cognis:(\w+)", text, flags=re.M))
    return values, commented


def test_example_config_documents_every_key_the_program_reads():
    values, commented = _example()
    recorder = _RecordingConfig({**values, "apiKey": API_KEY, "redisAuthToken": REDIS_TOKEN})
    stack_config.load(recorder, stack="example", project="cognis-memory")
    documented = set(values) | commented
    assert recorder.asked - documented == set(), "read but not documented in Pulumi.example.yaml"
    assert documented - recorder.asked == set(), "documented but never read"


def test_example_config_deploys():
    values, _ = _example()
    overrides = {k: (v if isinstance(v, str) else json.loads(json.dumps(v))) for k, v in values.items()}
    run = run_program({**overrides, "imageTag": BASE_CONFIG["imageTag"]}, stack="example")
    assert run.one("aws:ecs/service:Service")
    assert run.one("aws:opensearch/domain:Domain")["domainName"] == "cognis-example"
