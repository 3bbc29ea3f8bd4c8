"""Policy pack: the real program passes every policy; each policy catches a bad resource.

Resources are handed to the rules exactly as pulumi-policy would: deserialised with
``pulumi_policy.deserialize.deserialize_properties`` (secrets unwrapped) and wrapped in
its ``unknown_checking_proxy``, through the same ``resource_validator``/``stack_validator``
adapters that ``infra/policies/__main__.py`` registers.
"""

from __future__ import annotations

import copy
import json
import runpy
import subprocess
import sys
from typing import Any
from unittest import mock

import cognis_policies as rules
import pulumi_aws
import pytest
import yaml
from pulumi_policy import (
    EnforcementLevel,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    StackValidationArgs,
)
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.proxy import UNKNOWN_BOOLEAN_VALUE, UnknownValueError, unknown_checking_proxy

from tests.infra.infra_harness import POLICIES, ProgramRun, run_program

RULES = {r.name: r for r in rules.RESOURCE_RULES}
STACK_RULES = {r.name: r for r in rules.STACK_RULES}
OPTS = PolicyResourceOptions(False, [], None, [], None, [])


def _props(raw: dict) -> Any:
    return unknown_checking_proxy(deserialize_properties(copy.deepcopy(raw)))


def resource_violations(rule_name: str, type_: str, inputs: dict) -> list[str]:
    """Run one rule through the pack's adapter with real ResourceValidationArgs."""
    reported: list[str] = []
    args = ResourceValidationArgs(type_, _props(inputs), f"urn:pulumi:test::cognis-memory::{type_}::r", "r", OPTS, None)
    rules.resource_validator(RULES[rule_name])(args, lambda message, urn=None: reported.append(message))
    return reported


def stack_violations(run_resources: list[tuple[str, dict, str]]) -> list[tuple[str, str]]:
    reported: list[tuple[str, str]] = []
    resources = [PolicyResource(t, _props(p), urn, urn, OPTS, None, None, [], {}) for t, p, urn in run_resources]
    for rule in rules.STACK_RULES:
        rules.stack_validator(rule)(StackValidationArgs(resources), lambda m, urn=None: reported.append((m, urn)))
    return reported


def _all_violations(run: ProgramRun) -> list[str]:
    found = []
    for r in run.resources:
        if not r.custom:
            continue
        for name in RULES:
            found += [f"{name}: {r.type} {r.name}: {m}" for m in resource_violations(name, r.type, r.inputs)]
    found += [
        f"{m} ({urn})" for m, urn in stack_violations([(r.type, r.outputs, r.name) for r in run.resources if r.custom])
    ]
    return found


# --- the real program passes ------------------------------------------------------------------


def test_program_passes_every_policy(program):
    assert _all_violations(program) == []


@pytest.mark.parametrize(
    "overrides, drop",
    [({"rerankerEnabled": False}, ()), ({}, ("imageTag",)), ({"natGateways": 1, "alarmEmail": None}, ())],
)
def test_program_variants_pass_every_policy(overrides, drop):
    assert _all_violations(run_program(overrides, drop=drop)) == []


def test_policies_are_not_vacuous_on_the_program(program):
    """The rules did look at the resources they guard."""
    world = [
        (sg, msg)
        for r in program.resources
        for sg, msg in rules.world_ingress(r.type, deserialize_properties(r.outputs))
    ]
    assert sorted(world) == [("sg-network-alb-sg", None), ("sg-network-alb-sg", None)]
    taggable = [r for r in program.resources if r.type in rules.TAGGABLE_TYPES]
    assert len(taggable) > 60
    documents = [r for r in program.resources if r.type in rules._POLICY_DOCUMENTS]
    assert {r.type for r in documents} >= {"aws:iam/rolePolicy:RolePolicy", "aws:opensearch/domain:Domain"}


def test_taggable_types_match_the_provider(program):
    """Every type the program uses is listed as taggable exactly when pulumi-aws accepts tags."""
    import importlib
    import inspect

    for type_ in sorted({r.type for r in program.resources if r.custom}):
        _, module, cls = type_.split(":")
        klass = getattr(importlib.import_module(f"pulumi_aws.{module.split('/')[0]}"), cls)
        accepts_tags = "tags" in inspect.signature(klass._internal_init).parameters
        assert accepts_tags == (type_ in rules.TAGGABLE_TYPES), type_
    assert pulumi_aws  # the provider SDK is the reference


# --- each policy catches a violating resource ---------------------------------------------------


def _mutate(program, type_, name=None, **changes):
    r = next(x for x in program.of_type(type_) if name is None or x.name == name)
    inputs = copy.deepcopy(r.inputs)
    for path, value in changes.items():
        keys = path.split("__")
        cur = inputs
        for k in keys[:-1]:
            cur = cur[int(k)] if isinstance(cur, list) else cur.setdefault(k, {})
        if value is DELETE:
            cur.pop(keys[-1], None)
        else:
            cur[keys[-1]] = value
    return type_, inputs


DELETE = object()
DOMAIN = "aws:opensearch/domain:Domain"
CLUSTER = "aws:rds/cluster:Cluster"
REDIS = "aws:elasticache/replicationGroup:ReplicationGroup"
LISTENER = "aws:lb/listener:Listener"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"

BAD_CASES = [
    # encryption at rest
    ("encryption-at-rest", lambda p: _mutate(p, DOMAIN, encryptAtRest__enabled=False), "encryptAtRest"),
    ("encryption-at-rest", lambda p: _mutate(p, CLUSTER, storageEncrypted=False), "storageEncrypted"),
    ("encryption-at-rest", lambda p: _mutate(p, REDIS, atRestEncryptionEnabled=False), "atRestEncryption"),
    ("encryption-at-rest", lambda p: _mutate(p, "aws:sns/topic:Topic", kmsMasterKeyId=DELETE), "kmsMasterKeyId"),
    ("encryption-at-rest", lambda p: _mutate(p, "aws:cloudwatch/logGroup:LogGroup", kmsKeyId=DELETE), "kmsKeyId"),
    (
        "encryption-at-rest",
        lambda p: _mutate(p, "aws:ecr/repository:Repository", encryptionConfigurations=[{"encryptionType": "AES256"}]),
        "KMS",
    ),
    ("encryption-at-rest", lambda p: _mutate(p, "aws:kms/key:Key", enableKeyRotation=False), "rotation"),
    ("encryption-at-rest", lambda p: ("aws:ebs/volume:Volume", {"size": 10, "tags": {}}), "EBS"),
    # TLS only
    (
        "tls-only",
        lambda p: _mutate(p, DOMAIN, domainEndpointOptions__tlsSecurityPolicy="Policy-Min-TLS-1-0-2019-07"),
        "TLS policy",
    ),
    ("tls-only", lambda p: _mutate(p, DOMAIN, domainEndpointOptions__enforceHttps=False), "enforce HTTPS"),
    ("tls-only", lambda p: _mutate(p, DOMAIN, nodeToNodeEncryption__enabled=False), "node-to-node"),
    ("tls-only", lambda p: _mutate(p, REDIS, transitEncryptionEnabled=False), "transitEncryption"),
    ("tls-only", lambda p: _mutate(p, REDIS, transitEncryptionMode="preferred"), "required"),
    (
        "tls-only",
        lambda p: _mutate(p, "aws:rds/clusterParameterGroup:ClusterParameterGroup", parameters=[]),
        "force_ssl",
    ),
    ("tls-only", lambda p: _mutate(p, LISTENER, "api-https", sslPolicy="ELBSecurityPolicy-2016-08"), "TLS 1.2"),
    (
        "tls-only",
        lambda p: _mutate(p, LISTENER, "api-http", defaultActions=[{"type": "forward", "targetGroupArn": "tg"}]),
        "redirect",
    ),
    # private data stores
    ("no-public-data-stores", lambda p: _mutate(p, DOMAIN, vpcOptions=DELETE), "VPC"),
    (
        "no-public-data-stores",
        lambda p: _mutate(
            p,
            DOMAIN,
            accessPolicies=json.dumps(
                {
                    "Statement": [
                        {"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "es:ESHttpGet", "Resource": "*"}
                    ]
                }
            ),
        ),
        "anonymous",
    ),
    (
        "no-public-data-stores",
        lambda p: _mutate(p, "aws:rds/clusterInstance:ClusterInstance", "database-instance-0", publiclyAccessible=True),
        "publicly",
    ),
    ("no-public-data-stores", lambda p: _mutate(p, REDIS, subnetGroupName=DELETE), "subnet group"),
    # world ingress
    (
        "no-world-ingress",
        lambda p: _mutate(
            p, INGRESS, "network-database-from-service", referencedSecurityGroupId=DELETE, cidrIpv4="0.0.0.0/0"
        ),
        "80/443",
    ),
    (
        "no-world-ingress",
        lambda p: _mutate(p, INGRESS, "network-alb-https-in-0", ipProtocol="-1", fromPort=-1, toPort=-1),
        "80/443",
    ),
    (
        "no-world-ingress",
        lambda p: _mutate(
            p, INGRESS, "network-alb-https-in-0", cidrIpv4=DELETE, cidrIpv6="::/0", fromPort=22, toPort=22
        ),
        "80/443",
    ),
    (
        "no-world-ingress",
        lambda p: (
            "aws:ec2/securityGroup:SecurityGroup",
            {"ingress": [{"protocol": "tcp", "fromPort": 22, "toPort": 22, "cidrBlocks": ["0.0.0.0/0"]}]},
        ),
        "80/443",
    ),
    (
        "no-world-ingress",
        lambda p: (
            "aws:ec2/securityGroupRule:SecurityGroupRule",
            {"type": "ingress", "protocol": "tcp", "fromPort": 0, "toPort": 65535, "cidrBlocks": ["0.0.0.0/0"]},
        ),
        "80/443",
    ),
    # database protection
    ("database-deletion-protection", lambda p: _mutate(p, CLUSTER, deletionProtection=False), "deletionProtection"),
    ("database-deletion-protection", lambda p: _mutate(p, CLUSTER, skipFinalSnapshot=True), "final snapshot"),
    (
        "database-deletion-protection",
        lambda p: ("aws:rds/instance:Instance", {"storageEncrypted": True}),
        "deletionProtection",
    ),
    # tags
    ("required-tags", lambda p: _mutate(p, "aws:ec2/vpc:Vpc", tags__Project=DELETE), "Project"),
    ("required-tags", lambda p: _mutate(p, "aws:opensearch/domain:Domain", tags=DELETE), "Project, Stack, ManagedBy"),
    # IAM wildcards
    (
        "no-wildcard-iam",
        lambda p: _mutate(
            p,
            "aws:iam/rolePolicy:RolePolicy",
            "api-task",
            policy=json.dumps({"Statement": [{"Sid": "S3", "Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}),
        ),
        "wildcard",
    ),
    (
        "no-wildcard-iam",
        lambda p: _mutate(
            p,
            "aws:iam/rolePolicy:RolePolicy",
            "api-task",
            policy=json.dumps({"Statement": [{"Effect": "Allow", "Action": ["*"], "Resource": ["*"]}]}),
        ),
        "wildcard",
    ),
    (
        "no-wildcard-iam",
        lambda p: _mutate(
            p,
            "aws:iam/rolePolicy:RolePolicy",
            "api-task",
            policy=json.dumps({"Statement": [{"Sid": "N", "Effect": "Allow", "NotAction": "iam:*", "Resource": "*"}]}),
        ),
        "NotAction",
    ),
    ("no-wildcard-iam", lambda p: _mutate(p, "aws:iam/rolePolicy:RolePolicy", "api-task", policy="{not json"), "JSON"),
    (
        "no-wildcard-iam",
        lambda p: (
            "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
            {"role": "r", "policyArn": "arn:aws:iam::aws:policy/AdministratorAccess"},
        ),
        "AdministratorAccess",
    ),
]


@pytest.mark.parametrize("rule, make, expected", BAD_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(BAD_CASES)])
def test_policy_catches_violating_resource(program, rule, make, expected):
    type_, inputs = make(program)
    found = resource_violations(rule, type_, inputs)
    assert any(expected in m for m in found), found


def test_every_policy_has_a_violating_case():
    assert {c[0] for c in BAD_CASES} == set(RULES)


def test_wildcard_actions_on_specific_resources_and_kms_key_policies_are_fine(program):
    ok = {"Statement": [{"Effect": "Allow", "Action": "es:ESHttp*", "Resource": "arn:aws:es:eu-west-1:1:domain/d/*"}]}
    assert resource_violations("no-wildcard-iam", "aws:iam/rolePolicy:RolePolicy", {"policy": json.dumps(ok)}) == []
    key = program.one("aws:kms/key:Key")
    assert '"kms:*"' in key["policy"]  # the account-root statement every key policy needs
    assert resource_violations("no-wildcard-iam", key.type, key.inputs) == []


def test_stack_policy_catches_world_ingress_off_the_load_balancer(program):
    resources = [(r.type, copy.deepcopy(r.outputs), r.name) for r in program.resources if r.custom]
    bad = copy.deepcopy(next(r for r in program.of_type(INGRESS) if r.name == "network-alb-https-in-0").outputs)
    bad["securityGroupId"] = "sg-network-service-sg"  # 443 from anywhere straight to the tasks
    resources.append((INGRESS, bad, "urn:bad"))
    found = stack_violations(resources)
    assert found == [
        ("ingress from anywhere on security group sg-network-service-sg, which no load balancer uses", "urn:bad")
    ]


def test_unknown_values_are_not_silently_accepted(program):
    """During preview an unknown flag raises, so pulumi-policy reports it instead of passing."""
    _, inputs = _mutate(program, DOMAIN, encryptAtRest__enabled=UNKNOWN_BOOLEAN_VALUE)
    with pytest.raises(UnknownValueError):
        resource_violations("encryption-at-rest", DOMAIN, inputs)


# --- the pack itself ---------------------------------------------------------------------------------


def test_pack_registers_every_rule_as_mandatory():
    captured: dict[str, Any] = {}

    class RecordingPack:
        def __init__(self, name, policies, enforcement_level=None, **kwargs):
            captured.update(name=name, policies=policies, level=enforcement_level)

    with mock.patch("pulumi_policy.PolicyPack", RecordingPack):
        runpy.run_path(str(POLICIES / "__main__.py"), run_name="__main__")
    assert captured["name"] == "cognis-memory"
    assert captured["level"] == EnforcementLevel.MANDATORY
    names = [p.name for p in captured["policies"]]
    assert names == [r.name for r in rules.RESOURCE_RULES] + [r.name for r in rules.STACK_RULES]
    # The registered validate functions are the adapters over the same rules.
    domain_policy = next(p for p in captured["policies"] if p.name == "encryption-at-rest")
    reported = []
    args = ResourceValidationArgs(DOMAIN, _props({"encryptAtRest": {"enabled": False}}), "urn", "d", OPTS, None)
    domain_policy.validate(args, lambda m, urn=None: reported.append(m))
    assert reported == ["OpenSearch domain must enable encryptAtRest"]


def test_pack_project_files():
    meta = yaml.safe_load((POLICIES / "PulumiPolicy.yaml").read_text())
    assert meta["runtime"]["name"] == "python"
    requirements = (POLICIES / "requirements.txt").read_text()
    assert "pulumi-policy" in requirements
    # The rules module needs nothing but the standard library.
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import cognis_policies; "
        "print(sorted(m for m in sys.modules if m.startswith(('pulumi', 'cognis_infra'))))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(POLICIES)], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
