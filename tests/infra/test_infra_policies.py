"""Policy pack: the real program passes every policy; each policy catches a planted violation.

Resources are handed to the rules exactly as pulumi-policy would: deserialised with
``pulumi_policy.deserialize.deserialize_properties`` (secrets unwrapped), wrapped in its
``unknown_checking_proxy``, with the resource options the engine received (``protect``),
through the same ``resource_validator``/``stack_validator`` adapters that
``infra/policies/__main__.py`` registers. What a preview with unknown values does is shown
with pulumi-policy's own analyzer servicer (the gRPC service the CLI calls), not a model of it.
"""

from __future__ import annotations

import copy
import json
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import cognis_policies as rules
import pulumi_aws
import pytest
import yaml
from google.protobuf import struct_pb2
from pulumi.runtime.proto import analyzer_pb2
from pulumi_policy import (
    EnforcementLevel,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    StackValidationArgs,
)
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.policy import _PolicyAnalyzerServicer
from pulumi_policy.proxy import (
    UNKNOWN_BOOLEAN_VALUE,
    UNKNOWN_STRING_VALUE,
    UnknownValueError,
    unknown_checking_proxy,
)

from tests.infra.infra_harness import POLICIES, REPO, ProgramRun, run_program

RULES = {r.name: r for r in rules.RESOURCE_RULES}
STACK_RULES = {r.name: r for r in rules.STACK_RULES}


def _opts(protect: bool = False) -> PolicyResourceOptions:
    return PolicyResourceOptions(protect, [], None, [], None, [], None)


def _props(raw: dict) -> Any:
    return unknown_checking_proxy(deserialize_properties(copy.deepcopy(raw)))


def resource_violations(rule_name: str, type_: str, inputs: dict, *, protect: bool = False) -> list[str]:
    """Run one rule through the pack's adapter with real ResourceValidationArgs."""
    reported: list[str] = []
    urn = f"urn:pulumi:test::cognis::{type_}::r"
    args = ResourceValidationArgs(type_, _props(inputs), urn, "r", _opts(protect), None)
    rules.resource_validator(RULES[rule_name])(args, lambda message, urn=None: reported.append(message))
    return reported


def stack_violations(run_resources: list[tuple[str, dict, str]]) -> list[tuple[str, str]]:
    reported: list[tuple[str, str]] = []
    resources = [PolicyResource(t, _props(p), urn, urn, _opts(), None, None, [], {}) for t, p, urn in run_resources]
    for rule in rules.STACK_RULES:
        rules.stack_validator(rule)(StackValidationArgs(resources), lambda m, urn=None: reported.append((m, urn)))
    return reported


def _all_violations(run: ProgramRun) -> list[str]:
    found = []
    for r in run.resources:
        if not r.custom:
            continue
        for name in RULES:
            found += [
                f"{name}: {r.type} {r.name}: {m}"
                for m in resource_violations(name, r.type, r.inputs, protect=r.options.get("protect", False))
            ]
    found += [
        f"{m} ({urn})" for m, urn in stack_violations([(r.type, r.outputs, r.name) for r in run.resources if r.custom])
    ]
    return found


# --- the real program passes ------------------------------------------------------------------


def test_program_passes_every_policy(program):
    assert _all_violations(program) == []


def _dev_profile() -> dict:
    config = yaml.safe_load((REPO / "Pulumi.dev.yaml").read_text())["config"]
    return {k.removeprefix("cognis:"): v for k, v in config.items() if k.startswith("cognis:")}


@pytest.mark.parametrize(
    "overrides, drop",
    [
        ({"rerankerEnabled": False}, ("rerankerModelS3Uri",)),
        ({"image": "ghcr.io/acme/cognis-memory:1"}, ()),
        ({"natGateways": 1, "alarmEmail": None, "cacheEngine": "valkey"}, ()),
        ("dev", ("rerankerModelS3Uri", "certificateArn")),
        ({"traces": True}, ()),
    ],
    ids=["no-reranker", "image-from-ci", "one-nat-valkey", "dev-profile", "traces-on"],
)
def test_program_variants_pass_every_policy(overrides, drop):
    overrides = _dev_profile() if overrides == "dev" else overrides
    assert _all_violations(run_program(overrides, drop=drop)) == []


def test_unprotected_stateful_resources_are_caught_on_the_real_program():
    """``cognis:protect: false`` (the first step of a teardown) is exactly what the policy refuses."""
    found = _all_violations(run_program({"protect": False}))
    flagged = sorted(m.split(" ")[2].rstrip(":") for m in found if m.startswith("stateful-resources-protected"))
    assert flagged == ["database-cluster", "encryption-key", "registry-api", "search-domain"]


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
    assert {r.type for r in program.resources if r.options.get("protect")} == rules.PROTECTED_TYPES
    assert program.of_type("aws:sagemaker/model:Model")  # sagemaker-in-vpc had a model to check


def test_taggable_types_match_the_provider(program):
    """Every type the program uses is listed as taggable exactly when pulumi-aws accepts tags."""
    import importlib
    import inspect

    for type_ in sorted({r.type for r in program.resources if r.custom and r.type.startswith("aws:")}):
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
MODEL = "aws:sagemaker/model:Model"

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
    (
        "no-bind-parameters-in-logs",
        lambda p: _mutate(
            p,
            "aws:rds/clusterParameterGroup:ClusterParameterGroup",
            parameters=[
                {"name": "rds.force_ssl", "value": "1"},
                {"name": "log_min_duration_statement", "value": "1000"},
            ],
        ),
        "log_parameter_max_length",
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
    # iam:PassRole on "*"
    (
        "no-passrole-on-star",
        lambda p: _mutate(
            p,
            "aws:iam/rolePolicy:RolePolicy",
            "api-task",
            policy=json.dumps(
                {"Statement": [{"Sid": "P", "Effect": "Allow", "Action": "iam:PassRole", "Resource": "*"}]}
            ),
        ),
        "iam:PassRole",
    ),
    (
        "no-passrole-on-star",
        lambda p: _mutate(
            p,
            "aws:iam/rolePolicy:RolePolicy",
            "reranker-role",
            policy=json.dumps(
                {"Statement": [{"Effect": "Allow", "Action": ["s3:GetObject", "iam:Pass*"], "Resource": ["*"]}]}
            ),  # fmt: skip
        ),
        "iam:PassRole",
    ),
    # backups
    ("backups", lambda p: _mutate(p, CLUSTER, backupRetentionPeriod=1), "7 days"),
    ("backups", lambda p: _mutate(p, CLUSTER, backupRetentionPeriod=DELETE), "7 days"),
    ("backups", lambda p: _mutate(p, REDIS, snapshotRetentionLimit=0), "snapshots"),
    # protect (the options travel with the case: see test_policy_catches_violating_resource)
    ("stateful-resources-protected", lambda p: _mutate(p, CLUSTER), "protect"),
    ("stateful-resources-protected", lambda p: _mutate(p, DOMAIN), "protect"),
    ("stateful-resources-protected", lambda p: _mutate(p, "aws:kms/key:Key"), "protect"),
    ("stateful-resources-protected", lambda p: _mutate(p, "aws:ecr/repository:Repository"), "protect"),
    # SageMaker in the VPC, isolated
    ("sagemaker-in-vpc", lambda p: _mutate(p, MODEL, enableNetworkIsolation=False), "network isolation"),
    ("sagemaker-in-vpc", lambda p: _mutate(p, MODEL, vpcConfig=DELETE), "VPC"),
    ("sagemaker-in-vpc", lambda p: _mutate(p, MODEL, vpcConfig__subnets=[]), "VPC"),
]


@pytest.mark.parametrize("rule, make, expected", BAD_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(BAD_CASES)])
def test_policy_catches_violating_resource(program, rule, make, expected):
    """The planted violation is caught; the same resource as the program declares it is not. Planted
    cases keep the program's ``protect`` except the protect cases, which drop it."""
    type_, inputs = make(program)
    protect = rule != "stateful-resources-protected"
    found = resource_violations(rule, type_, inputs, protect=protect)
    assert any(expected in m for m in found), found
    original = next((r for r in program.of_type(type_)), None)
    if original is not None:
        assert resource_violations(rule, type_, original.inputs, protect=original.options["protect"] or protect) == []


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
    """During preview an unknown flag raises (it is never read as false or true)."""
    _, inputs = _mutate(program, DOMAIN, encryptAtRest__enabled=UNKNOWN_BOOLEAN_VALUE)
    with pytest.raises(UnknownValueError):
        resource_violations("encryption-at-rest", DOMAIN, inputs)


# --- what a preview with unknown values really does ---------------------------------------------------


def _registered_pack() -> dict[str, Any]:
    """What infra/policies/__main__.py passes to ``PolicyPack``: name, policies, enforcement level."""
    captured: dict[str, Any] = {}

    class RecordingPack:
        def __init__(self, name, policies, enforcement_level=None, **kwargs):
            captured.update(name=name, policies=policies, level=enforcement_level)

    with mock.patch("pulumi_policy.PolicyPack", RecordingPack):
        runpy.run_path(str(POLICIES / "__main__.py"), run_name="__main__")
    return captured


@pytest.fixture(scope="module")
def analyzer():
    """pulumi-policy's analyzer servicer (the gRPC service `pulumi preview --policy-pack` calls),
    loaded with the policies exactly as infra/policies/__main__.py registers them."""
    pack = _registered_pack()
    return _PolicyAnalyzerServicer(pack["name"], "0.0.1", pack["policies"], pack["level"])


def _analyze(analyzer, type_: str, properties: dict, *, protect: bool = True) -> list:
    struct = struct_pb2.Struct()
    struct.update(properties)
    request = analyzer_pb2.AnalyzeRequest(
        type=type_, properties=struct, urn=f"urn:pulumi:dev::cognis::{type_}::r", name="r",
        options=analyzer_pb2.AnalyzerResourceOptions(protect=protect),
    )  # fmt: skip
    return list(analyzer.Analyze(request, None).diagnostics)


def _levels(diagnostics) -> dict[str, str]:
    return {d.policyName: analyzer_pb2.EnforcementLevel.Name(d.enforcementLevel) for d in diagnostics}


def test_preview_with_an_unknown_value_reports_an_advisory_skip_not_a_pass_or_a_failure(program, analyzer):
    """The engine sends a value computed from another resource as an unknown. A mandatory rule that
    reads it is not run: pulumi-policy reports "can't run policy ... during preview" at level
    ADVISORY, so the preview neither fails nor claims the resource passed. The same violation with
    the value known, as `pulumi up` sends it, is MANDATORY."""
    inputs = copy.deepcopy(program.one(DOMAIN).inputs)
    inputs["encryptAtRest"] = {"enabled": UNKNOWN_STRING_VALUE}
    diagnostics = _analyze(analyzer, DOMAIN, inputs)
    skipped = [d for d in diagnostics if d.policyName == "encryption-at-rest"]
    assert len(skipped) == 1 and _levels(skipped) == {"encryption-at-rest": "ADVISORY"}
    assert "can't run policy 'encryption-at-rest'" in skipped[0].message and "during preview" in skipped[0].message
    assert not [d for d in diagnostics if d.enforcementLevel == analyzer_pb2.MANDATORY]

    inputs["encryptAtRest"] = {"enabled": False}
    known = _analyze(analyzer, DOMAIN, inputs)
    assert _levels(known) == {"encryption-at-rest": "MANDATORY"}
    assert "OpenSearch domain must enable encryptAtRest" in known[0].message


def test_first_preview_of_this_stack_skips_rules_on_not_yet_known_documents(program, analyzer):
    """On a stack's first preview the OpenSearch access policy names a task role that does not
    exist yet: the rules that read it are skipped (advisory), the others run and pass."""
    inputs = copy.deepcopy(program.one(DOMAIN).inputs)
    inputs["accessPolicies"] = UNKNOWN_STRING_VALUE
    levels = _levels(_analyze(analyzer, DOMAIN, inputs))
    assert levels == {"no-public-data-stores": "ADVISORY", "no-wildcard-iam": "ADVISORY",
                      "no-passrole-on-star": "ADVISORY"}  # fmt: skip
    assert _analyze(analyzer, DOMAIN, program.one(DOMAIN).inputs) == []


def test_protect_comes_from_the_resource_options_the_engine_sends(program, analyzer):
    cluster = program.one(CLUSTER).inputs
    assert _analyze(analyzer, CLUSTER, cluster, protect=True) == []
    assert _levels(_analyze(analyzer, CLUSTER, cluster, protect=False)) == {"stateful-resources-protected": "MANDATORY"}


# --- the pack itself ---------------------------------------------------------------------------------


def test_pack_registers_every_rule_as_mandatory():
    captured = _registered_pack()
    assert captured["name"] == "cognis-memory"
    assert captured["level"] == EnforcementLevel.MANDATORY
    names = [p.name for p in captured["policies"]]
    assert names == [r.name for r in rules.RESOURCE_RULES] + [r.name for r in rules.STACK_RULES]
    # The registered validate functions are the adapters over the same rules.
    domain_policy = next(p for p in captured["policies"] if p.name == "encryption-at-rest")
    reported = []
    args = ResourceValidationArgs(DOMAIN, _props({"encryptAtRest": {"enabled": False}}), "urn", "d", _opts(), None)
    domain_policy.validate(args, lambda m, urn=None: reported.append(m))
    assert reported == ["OpenSearch domain must enable encryptAtRest"]


def test_pack_project_files(tmp_path):
    meta = yaml.safe_load((POLICIES / "PulumiPolicy.yaml").read_text())
    assert meta["runtime"]["name"] == "python"
    requirements = (POLICIES / "requirements.txt").read_text()
    assert "pulumi-policy" in requirements
    # The rules module needs nothing but the standard library (imported as installed; the pack's
    # own virtualenv finds it next to __main__.py, see infra/policies/__main__.py).
    code = (
        "import sys, cognis_policies; print(cognis_policies.__file__); "
        "print(sorted(m for m in sys.modules if m.startswith(('pulumi', 'cognis_infra'))))"
    )
    location, loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    ).stdout.splitlines()
    assert Path(location) == POLICIES / "cognis_policies.py"
    assert loaded == "[]"
