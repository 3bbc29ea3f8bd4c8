"""Search: the OpenSearch domain's sizing, encryption, TLS, placement and access policy."""

from __future__ import annotations

import re

import pulumi
import pytest

from cognis_infra.context import AwsContext
from cognis_infra.search import Search, SearchArgs, SearchSettings, domain_name_for
from tests.infra.infra_harness import ACCOUNT, REGION, parse_json, run_component, run_program

DOMAIN = "aws:opensearch/domain:Domain"


@pytest.fixture(scope="module")
def domain(program):
    return program.one(DOMAIN)


def test_engine_and_sizing_defaults(domain):
    assert domain["engineVersion"] == "OpenSearch_2.19"
    cc = domain["clusterConfig"]
    assert cc["instanceType"] == "r6g.large.search"
    assert cc["instanceCount"] == 3
    assert cc["zoneAwarenessEnabled"] is True
    assert cc["zoneAwarenessConfig"] == {"availabilityZoneCount": 3}
    assert cc["dedicatedMasterEnabled"] is False
    assert domain["ebsOptions"] == {
        "ebsEnabled": True,
        "volumeType": "gp3",
        "volumeSize": 100,
        "iops": 3000,
        "throughput": 250,
    }


def test_encryption_and_tls(domain):
    assert domain["encryptAtRest"] == {"enabled": True}
    assert domain["nodeToNodeEncryption"] == {"enabled": True}
    assert domain["domainEndpointOptions"] == {
        "enforceHttps": True,
        "tlsSecurityPolicy": "Policy-Min-TLS-1-2-PFS-2023-10",
    }


def test_auto_tune_and_updates(domain):
    assert domain["autoTuneOptions"]["desiredState"] == "ENABLED"
    assert domain["offPeakWindowOptions"]["enabled"] is True
    assert domain["softwareUpdateOptions"] == {"autoSoftwareUpdateEnabled": True}


def test_domain_is_protected(domain):
    assert domain.options["protect"] is True


def test_one_small_node_runs_without_zone_awareness_or_auto_tune():
    settings = SearchSettings(instance_type="t3.small.search", instance_count=1, zone_count=1)
    assert not settings.zone_awareness and not settings.auto_tune
    assert SearchSettings().auto_tune and SearchSettings().zone_awareness


def test_domain_is_in_the_private_subnets_behind_its_security_group(domain):
    assert domain["vpcOptions"]["subnetIds"] == [f"subnet-network-private-{i}" for i in range(3)]
    assert domain["vpcOptions"]["securityGroupIds"] == ["sg-network-search-sg"]


def test_access_policy_allows_only_the_task_role_http_verbs(program, domain):
    task_role = next(r for r in program.of_type("aws:iam/role:Role") if r.name == "identity-task")
    policy = parse_json(domain["accessPolicies"])
    assert len(policy["Statement"]) == 1
    stmt = policy["Statement"][0]
    assert stmt["Effect"] == "Allow"
    assert stmt["Principal"] == {"AWS": task_role.outputs["arn"]}
    assert sorted(stmt["Action"]) == sorted(
        ["es:ESHttpGet", "es:ESHttpHead", "es:ESHttpPost", "es:ESHttpPut", "es:ESHttpDelete", "es:ESHttpPatch"]
    )
    assert stmt["Resource"] == f"arn:aws:es:{REGION}:{ACCOUNT}:domain/cognis-test/*"


def test_slow_and_application_logs_go_to_encrypted_groups(program, domain):
    groups = {g.outputs["arn"]: g for g in program.of_type("aws:cloudwatch/logGroup:LogGroup")}
    key_arn = program.one("aws:kms/key:Key").outputs["arn"]
    published = {o["logType"]: o for o in domain["logPublishingOptions"]}
    assert set(published) == {"INDEX_SLOW_LOGS", "SEARCH_SLOW_LOGS", "ES_APPLICATION_LOGS"}
    for option in published.values():
        assert option["enabled"] is True
        group = groups[option["cloudwatchLogGroupArn"]]
        assert group["name"].startswith("/aws/opensearch/cognis-test/")
        assert group["kmsKeyId"] == key_arn
    policy = parse_json(program.one("aws:cloudwatch/logResourcePolicy:LogResourcePolicy")["policyDocument"])
    stmt = policy["Statement"][0]
    assert stmt["Principal"] == {"Service": "es.amazonaws.com"}
    assert sorted(stmt["Resource"]) == sorted(f"{arn}:*" for arn in published_arns(domain))
    assert stmt["Condition"]["StringEquals"] == {"aws:SourceAccount": ACCOUNT}


def published_arns(domain):
    return [o["cloudwatchLogGroupArn"] for o in domain["logPublishingOptions"]]


def test_domain_name_rules():
    assert domain_name_for("prod") == "cognis-prod"
    assert domain_name_for("My_Stack.Name") == "cognis-my-stack-name"
    assert len(domain_name_for("a" * 60)) == 28


def test_long_stack_names_get_different_domains_and_log_policies():
    """Two long stack names that share their first 28 characters: a cut without a hash gave both the same
    domain name, so the second stack's account-wide log resource policy (named after the domain) replaced
    the first's. Each name stays within OpenSearch's rules (3-28 characters, [a-z][a-z0-9-]+)."""
    a, b = domain_name_for("customer-memory-production-eu-1"), domain_name_for("customer-memory-production-eu-2")
    assert a != b
    for name in (a, b, domain_name_for("x" * 200), domain_name_for("prod--" + "-" * 40 + "z")):
        assert 3 <= len(name) <= 28 and re.fullmatch(r"[a-z][a-z0-9-]+", name) and not name.endswith("-"), name
    assert domain_name_for("customer-memory-production-eu-1") == a  # the same stack keeps its domain
    policies = {
        stack: run_program(stack=stack).one("aws:cloudwatch/logResourcePolicy:LogResourcePolicy")["policyName"]
        for stack in ("customer-memory-production-eu-1", "customer-memory-production-eu-2")
    }
    assert len(set(policies.values())) == 2, policies


def test_instance_count_must_fill_the_zones():
    with pytest.raises(ValueError, match="multiple of the AZ count"):
        SearchSettings(instance_count=4)
    with pytest.raises(ValueError, match=r"\.search"):
        SearchSettings(instance_type="r6g.large")


def test_dedicated_masters_when_configured(program):
    from tests.infra.infra_harness import run_program

    run = run_program({"opensearchDedicatedMasterType": "m6g.large.search"})
    cc = run.one(DOMAIN)["clusterConfig"]
    assert cc["dedicatedMasterEnabled"] is True
    assert cc["dedicatedMasterType"] == "m6g.large.search" and cc["dedicatedMasterCount"] == 3


def test_component_url_is_https_on_443():
    """The component on its own, asserted after @pulumi.runtime.test resolved its outputs."""
    ctx = AwsContext(REGION, ACCOUNT, "aws", "amazonaws.com", ("a", "b", "c"))

    def build():
        search = Search(
            "s",
            SearchArgs(
                settings=SearchSettings(),
                context=ctx,
                domain_name="cognis-unit",
                subnet_ids=["subnet-1", "subnet-2", "subnet-3"],
                security_group_id="sg-1",
                access_role_arn=pulumi.Output.from_input(f"arn:aws:iam::{ACCOUNT}:role/task"),
                log_kms_key_arn="arn:aws:kms:k",
            ),
        )
        return {"url": search.url, "arn": search.domain_arn}

    mocks, out = run_component(build)
    assert out["url"] == f"https://vpc-cognis-unit-abcdefghijklmnop.{REGION}.es.amazonaws.com:443"
    assert out["arn"] == f"arn:aws:es:{REGION}:{ACCOUNT}:domain/cognis-unit"
    assert len([r for r in mocks.resources if r.type == DOMAIN]) == 1
