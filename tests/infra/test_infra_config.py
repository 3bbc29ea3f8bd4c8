"""Stack configuration: validation, variants, the config schema and the two documented profiles."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pulumi
import pytest
import yaml

from cognis_infra import config as stack_config
from tests.infra.infra_harness import API_KEY, CACHE_TOKEN, CERT_ARN, REPO, parse_json, run_program

EXAMPLE = REPO / "Pulumi.example.yaml"
DEV = REPO / "Pulumi.dev.yaml"
PROJECT_FILE = REPO / "Pulumi.yaml"
SECRETS = {"apiKey": API_KEY, "cacheAuthToken": CACHE_TOKEN}


def _expect_failure(
    overrides: dict[str, Any] | None = None, drop: tuple[str, ...] = (), match: str = "", **run: Any
) -> None:
    with pytest.raises(Exception) as info:
        run_program(overrides, drop=drop, **run)
    assert re.search(match, str(info.value)), str(info.value)


def test_certificate_is_required():
    _expect_failure(drop=("certificateArn",), match="certificateArn")


def test_secrets_are_required():
    _expect_failure(drop=("apiKey",), match="apiKey")
    _expect_failure(drop=("cacheAuthToken",), match="cacheAuthToken")


def test_weak_api_key_is_rejected():
    _expect_failure({"apiKey": "short"}, match="apiKey")


def test_image_and_tag_are_exclusive():
    _expect_failure({"image": "ghcr.io/acme/cognis:1", "imageTag": "x"}, match="either cognis:image")


def test_more_azs_than_the_region_has():
    _expect_failure({"azCount": 4, "natGateways": 4, "opensearchInstanceCount": 3}, match="available AZs")


def test_reranker_needs_its_staged_model():
    _expect_failure(drop=("rerankerModelS3Uri",), match="rerankerModelS3Uri.*stage_reranker_model")
    _expect_failure({"rerankerModelS3Uri": "https://example.com/model"}, match="s3://")


def test_reranker_can_be_disabled():
    run = run_program({"rerankerEnabled": False}, drop=("rerankerModelS3Uri",))
    assert not [r for r in run.resources if r.type.startswith("aws:sagemaker/")]
    (container, _) = parse_json(run.one("aws:ecs/taskDefinition:TaskDefinition", "api-task")["containerDefinitions"])
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
    td = run.one("aws:ecs/taskDefinition:TaskDefinition", "api-task")
    assert td["runtimePlatform"]["cpuArchitecture"] == "ARM64"
    assert (td["cpu"], td["memory"]) == ("2048", "4096")
    assert run.one("aws:ecs/service:Service")["desiredCount"] == 3
    assert run.one("docker-build:index:Image")["platforms"] == ["linux/arm64"]  # the build follows the tasks


def test_default_tags_reach_every_resource():
    run = run_program({"aws:defaultTags": {"tags": {"CostCenter": "cc-42"}}})
    tagged = [r for r in run.resources if r.custom and r.type.startswith("aws:") and "tags" in r.inputs]
    assert tagged and all(r["tags"]["CostCenter"] == "cc-42" for r in tagged)
    assert all(r["tags"]["Stack"] == "test" and r["tags"]["Project"] == "cognis-memory" for r in tagged)


def test_zones_are_chosen_by_zone_id(program):
    """AZ names map to different zones per account; zone ids do not. The default is the first
    three zone ids; ``availabilityZoneIds`` pins others, in that order."""
    subnets = sorted(
        (s for s in program.of_type("aws:ec2/subnet:Subnet") if s["tags"]["Tier"] == "private"), key=lambda s: s.name
    )
    # mocked: euw1-az1 -> eu-west-1b, euw1-az2 -> eu-west-1c, euw1-az3 -> eu-west-1a
    assert [s["availabilityZone"] for s in subnets] == ["eu-west-1b", "eu-west-1c", "eu-west-1a"]
    pinned = run_program({"azCount": 2, "natGateways": 1, "availabilityZoneIds": ["euw1-az3", "euw1-az2"],
                          "opensearchInstanceCount": 2})  # fmt: skip
    zones = sorted(
        (s for s in pinned.of_type("aws:ec2/subnet:Subnet") if s["tags"]["Tier"] == "private"), key=lambda s: s.name
    )
    assert [s["availabilityZone"] for s in zones] == ["eu-west-1a", "eu-west-1c"]
    _expect_failure({"availabilityZoneIds": ["euw1-az9", "euw1-az1", "euw1-az2"]}, match="euw1-az9")


def _private_zones(run):
    subnets = sorted((s for s in run.of_type("aws:ec2/subnet:Subnet") if s["tags"]["Tier"] == "private"),
                     key=lambda s: s.name)  # fmt: skip
    return [s["availabilityZone"] for s in subnets]


TWO_ZONES = {"azCount": 2, "natGateways": 1, "opensearchInstanceCount": 2}


@pytest.mark.parametrize(
    "gaps",
    [
        {"euw1-az1": {"r6g.large"}},  # OpenSearch's r6g.large.search (its EC2 type)
        {"euw1-az1": {"t4g.medium"}},  # ElastiCache's cache.t4g.medium
        {"euw1-az1": {"db.serverless"}},  # Aurora Serverless v2 (RDS's orderable zones)
    ],
)
def test_a_zone_lacking_a_configured_type_is_skipped(gaps):
    """The first zone id (euw1-az1 = eu-west-1b) lacks a type the stack places there: the zones are the next
    two that offer everything (euw1-az2 = eu-west-1c, euw1-az3 = eu-west-1a), not the first two."""
    assert _private_zones(run_program(TWO_ZONES)) == ["eu-west-1b", "eu-west-1c"]
    run = run_program(TWO_ZONES, type_gaps=gaps)
    assert _private_zones(run) == ["eu-west-1c", "eu-west-1a"]
    offerings = [a for t, a in run.calls if t == "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings"]
    assert {a["locationType"] for a in offerings} == {"availability-zone-id"}
    asked = {v for a in offerings for f in a["filters"] for v in f["values"]}
    assert asked == {"r6g.large", "t4g.medium"}
    (orderable,) = [a for t, a in run.calls if t == "aws:rds/getOrderableDbInstance:getOrderableDbInstance"]
    assert (orderable["engine"], orderable["instanceClass"]) == ("aurora-postgresql", "db.serverless")


def test_a_type_ec2_offers_nowhere_is_not_checked():
    """A service-only type (EC2 offers its name in no zone of the Region) says nothing about zones: skipped."""
    gaps = {z: {"r6g.large"} for z in ("euw1-az1", "euw1-az2", "euw1-az3")}
    assert _private_zones(run_program(TWO_ZONES, type_gaps=gaps)) == ["eu-west-1b", "eu-west-1c"]


def test_a_pinned_zone_or_too_few_zones_without_the_types_stop_the_preview():
    _expect_failure({**TWO_ZONES, "availabilityZoneIds": ["euw1-az1", "euw1-az2"]}, match="euw1-az1 lacks r6g.large",
                    type_gaps={"euw1-az1": {"r6g.large"}})  # fmt: skip
    _expect_failure({}, match="2 available AZs that offer", type_gaps={"euw1-az3": {"t4g.medium"}})


# --- the config schema in Pulumi.yaml ---------------------------------------------------------------


class _RecordingConfig:
    """A pulumi.Config stand-in that answers from a dict and records every key asked."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values, self.asked = values, set()

    def _get(self, key):
        self.asked.add(key)
        v = self.values.get(key)
        return None if v == "" else v

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


def _schema() -> dict[str, dict]:
    return yaml.safe_load(PROJECT_FILE.read_text())["config"]


def _cognis_keys(schema: dict[str, dict]) -> dict[str, dict]:
    return {k.removeprefix("cognis:"): v for k, v in schema.items() if k.startswith("cognis:")}


def test_project_and_config_namespace_agree():
    """Pulumi accepts a type/description/default only for keys in the project's own namespace."""
    project = yaml.safe_load(PROJECT_FILE.read_text())
    assert project["name"] == stack_config.NAMESPACE
    for key, spec in project["config"].items():
        namespace = key.split(":")[0] if ":" in key else project["name"]
        if namespace != project["name"]:
            assert set(spec) == {"value"}, f"{key}: another namespace may only carry a value"


def test_schema_describes_and_types_every_key_the_program_reads():
    schema = _cognis_keys(_schema())
    recorder = _RecordingConfig({**{k: v.get("default") for k, v in schema.items()}, "certificateArn": CERT_ARN,
                                 **SECRETS, "rerankerModelS3Uri": "s3://model-bucket/p/"})  # fmt: skip
    stack_config.load(recorder, stack="schema", project="cognis")
    assert recorder.asked == set(schema), recorder.asked ^ set(schema)
    for key, spec in schema.items():
        assert spec.get("description"), key
        assert spec.get("type") in ("string", "integer", "boolean", "array", "object"), key
        if spec["type"] == "array":
            assert spec.get("items"), key


def test_required_keys_have_no_default_and_secrets_are_marked():
    schema = _cognis_keys(_schema())
    required = {k for k, v in schema.items() if "default" not in v}
    assert required == {"apiKey", "cacheAuthToken"}
    assert {k for k, v in schema.items() if v.get("secret")} == {"apiKey", "cacheAuthToken"}
    # The certificate has an empty default only for httpOnly dev stacks; empty is refused otherwise (below).
    assert schema["certificateArn"]["default"] == "" and schema["httpOnly"]["default"] is False


@pytest.mark.parametrize(
    "certificate, match",
    [
        (None, "certificateArn is required.*httpOnly"),
        ("", "certificateArn is required"),
        ("arn:aws:acm:eu-west-1:123456789012:certificate/00000000-0000-0000-0000-000000000000", "placeholder"),
        ("arn:aws:iam::123456789012:server-certificate/x", "ACM certificate ARN"),
        # the previous example profile's value: another Region than the stack's (and a placeholder)
        ("arn:aws:acm:us-east-1:123456789012:certificate/0f0e0d0c-1111-2222-3333-444455556666", "this stack's Region"),
        ("arn:aws:acm:eu-west-1:210987654321:certificate/0f0e0d0c-1111-2222-3333-444455556666", "account"),
    ],
)
def test_a_missing_or_placeholder_certificate_fails_before_any_resource(certificate, match):
    """No working-looking default: a forgotten certificate stops the preview, not the HTTPS listener."""
    with pytest.raises(Exception) as info:
        run_program({"certificateArn": certificate}, drop=("certificateArn",) if certificate is None else ())
    assert re.search(match, str(info.value)), str(info.value)


def test_http_only_needs_no_certificate_and_refuses_one():
    run = run_program({"httpOnly": True}, drop=("certificateArn",))
    (listener,) = run.of_type("aws:lb/listener:Listener")
    assert (listener["port"], listener["protocol"]) == (80, "HTTP")
    assert listener["defaultActions"][0]["type"] == "forward" and listener["tags"]["CognisHttpOnly"] == "true"
    assert run.exports["apiUrl"].startswith("http://")
    _expect_failure({"httpOnly": True}, match="httpOnly serves plain HTTP")


def test_schema_defaults_are_the_programs_defaults():
    """The CLI applies the schema defaults to every stack; the program falls back to its own.
    Both must give the same stack (the mocked tests exercise the program's)."""
    schema = _cognis_keys(_schema())
    base = {"certificateArn": CERT_ARN, **SECRETS, "rerankerModelS3Uri": "s3://model-bucket/p/"}
    with_defaults = {**{k: v["default"] for k, v in schema.items() if "default" in v}, **base}
    from_schema = stack_config.load(_RecordingConfig(with_defaults), stack="s", project="cognis")
    from_code = stack_config.load(_RecordingConfig(base), stack="s", project="cognis")
    secretless = {"api_key": None, "cache_auth_token": None}
    assert replace(from_schema, **secretless) == replace(from_code, **secretless)


# --- the documented profiles --------------------------------------------------------------------------


def _profile(path) -> dict[str, Any]:
    config = yaml.safe_load(path.read_text())["config"]
    values = {}
    for key, value in config.items():
        if key.startswith("cognis:"):
            values[key.removeprefix("cognis:")] = value
        elif key.startswith("aws:") and key != "aws:region":
            values[key] = value
    return values


def _documented(path) -> set[str]:
    text = path.read_text()
    return set(_profile(path)) | set(re.findall(r"^\s*#\s*cognis:(\w+)", text, flags=re.M))


def test_example_documents_every_key_of_the_schema():
    schema = _cognis_keys(_schema())
    documented = {k for k in _documented(EXAMPLE) if not k.startswith("aws:")}
    assert documented == set(schema), documented ^ set(schema)


@pytest.mark.parametrize("path", [EXAMPLE, DEV], ids=["example", "dev"])
def test_profiles_are_valid_for_the_schema(path):
    schema = _cognis_keys(_schema())
    for key, value in _profile(path).items():
        if key.startswith("aws:"):
            continue
        assert key in schema, f"{path.name}: {key} is not in Pulumi.yaml"
        kind = schema[key]["type"]
        ok = {
            "string": isinstance(value, str),
            "integer": isinstance(value, int) or (isinstance(value, str) and value.lstrip("-").isdigit()),
            "boolean": value in (True, False, "true", "false"),
            "array": isinstance(value, list),
            "object": isinstance(value, dict),
        }[kind]
        assert ok, f"{path.name}: {key}={value!r} is not a {kind}"
    assert not set(SECRETS) & set(_profile(path)), "secrets are set with `pulumi config set --secret`, not here"
    assert "aws:defaultTags" in _profile(path)


def test_example_profile_deploys(example_run):
    assert example_run.one("aws:ecs/service:Service")
    assert example_run.one("aws:opensearch/domain:Domain")["domainName"] == "cognis-example"


def test_the_example_profile_refuses_to_deploy_with_its_placeholders():
    """Copied without edits, the production profile stops at its first missing setting, naming it (the staged
    model, then the certificate); with both but the example alarm address, it names that."""
    with pytest.raises(Exception, match="rerankerModelS3Uri is required"):
        run_program({**_profile(EXAMPLE), **SECRETS}, stack="example", base={})
    with pytest.raises(Exception, match="certificateArn is required"):
        run_program({**_profile(EXAMPLE), **SECRETS, "rerankerModelS3Uri": EXAMPLE_REQUIRED["rerankerModelS3Uri"]},
                    stack="example", base={})  # fmt: skip
    with pytest.raises(Exception, match="alarmEmail oncall@example.com is an example address"):
        run_program({**_profile(EXAMPLE), **SECRETS, **EXAMPLE_REQUIRED}, stack="example", base={})


#: What the example profile leaves for the operator to set (it names them; the alarm address is refused as is).
EXAMPLE_REQUIRED = {
    "certificateArn": CERT_ARN,
    "rerankerModelS3Uri": "s3://cognis-models-123456789012-eu-west-1/models/BAAI/bge-reranker-v2-m3/0123abcd/",
}


@pytest.fixture(scope="module")
def example_run():
    overrides = {**_profile(EXAMPLE), **SECRETS, **EXAMPLE_REQUIRED, "alarmEmail": "oncall@acme-memory.io"}
    return run_program(overrides, stack="example", base={})


@pytest.fixture(scope="module")
def dev_run():
    return run_program({**_profile(DEV), **SECRETS}, stack="dev", base={})


def test_dev_profile_is_small(dev_run):
    assert len(dev_run.of_type("aws:ec2/natGateway:NatGateway")) == 1
    endpoints = [e for e in dev_run.of_type("aws:ec2/vpcEndpoint:VpcEndpoint") if e["vpcEndpointType"] == "Interface"]
    assert endpoints == []
    domain = dev_run.one("aws:opensearch/domain:Domain")
    cc = domain["clusterConfig"]
    assert cc["instanceCount"] == 1 and cc["zoneAwarenessEnabled"] is False
    assert cc["instanceType"].startswith("t3.")
    # The OpenSearch API rejects Auto-Tune on t2/t3 instance types.
    assert domain["autoTuneOptions"]["desiredState"] == "DISABLED"
    assert dev_run.one("aws:elasticache/replicationGroup:ReplicationGroup")["numCacheClusters"] == 1
    assert not [r for r in dev_run.resources if r.type.startswith("aws:sagemaker/")]
    assert len(dev_run.of_type("aws:rds/clusterInstance:ClusterInstance")) == 1
    assert dev_run.one("aws:ecs/service:Service")["desiredCount"] == 1
    # plain HTTP without a certificate: the flag says so; no HTTPS listener
    assert [(r["port"], r["protocol"]) for r in dev_run.of_type("aws:lb/listener:Listener")] == [(80, "HTTP")]


def test_example_profile_is_the_production_profile(example_run):
    cc = example_run.one("aws:opensearch/domain:Domain")["clusterConfig"]
    assert (cc["dedicatedMasterEnabled"], cc["dedicatedMasterCount"]) == (True, 3)
    assert cc["dedicatedMasterType"] == "m6g.large.search"
    (variant,) = example_run.one("aws:sagemaker/endpointConfiguration:EndpointConfiguration")["productionVariants"]
    assert variant["initialInstanceCount"] == 2  # a second reranker instance
    subscription = example_run.one("aws:sns/topicSubscription:TopicSubscription")
    assert subscription["endpoint"] == "oncall@acme-memory.io"
