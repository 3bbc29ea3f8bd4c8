"""Guardrails for the cognis-memory stack, as plain functions.

Each resource rule is ``check(resource_type, props) -> list[str]`` (one message per
violation) over a resource's inputs as Pulumi sends them to policy packs: camelCase
property names, JSON documents as strings; rules about resource *options* (``protect``)
are ``check(resource_type, props, options)``. Each stack rule is
``check(resources) -> list[(message, urn)]`` over ``(type, props, urn)`` triples of
resource outputs. ``__main__.py`` registers every rule in ``RESOURCE_RULES`` and
``STACK_RULES`` with pulumi-policy through ``resource_validator``/``stack_validator``;
the tests call the same functions over the resources the mocked program records.

This module imports nothing outside the standard library, so the pack's virtualenv
needs only ``pulumi-policy``.

Rules:

* ``encryption-at-rest`` - OpenSearch, Aurora/RDS, ElastiCache, EBS, SNS, CloudWatch
  log groups (customer-managed KMS key), ECR (KMS), KMS keys rotate.
* ``tls-only`` - OpenSearch HTTPS with a TLS 1.2+ policy and node-to-node encryption,
  Redis in-transit encryption required, Aurora PostgreSQL ``rds.force_ssl = 1``, load
  balancer listeners HTTPS with a TLS 1.2+ policy or HTTP that only redirects to HTTPS (except
  an HTTP listener tagged ``CognisHttpOnly=true``: a development stack's ``cognis:httpOnly``).
* ``no-bind-parameters-in-logs`` - a PostgreSQL parameter group that logs statements sets
  ``log_parameter_max_length`` and ``log_parameter_max_length_on_error`` to 0.
* ``no-public-data-stores`` - OpenSearch inside a VPC and no anonymous access policy,
  RDS not publicly accessible, ElastiCache in a subnet group.
* ``no-world-ingress`` - 0.0.0.0/0 or ::/0 ingress only on TCP 80/443;
  ``world-ingress-only-on-load-balancers`` (stack) - and only on a load balancer's
  security group.
* ``database-deletion-protection`` - RDS clusters/instances keep deletion protection
  and a final snapshot.
* ``required-tags`` - every taggable resource carries Project, Stack and ManagedBy.
* ``no-wildcard-iam`` - no Allow statement with a wildcard action on resource ``*``
  (nor ``NotAction``), in IAM and resource policies; no admin managed policies.
  KMS key policies are exempt: there ``"Resource": "*"`` means "this key".
* ``no-passrole-on-star`` - ``iam:PassRole`` (named, or through ``iam:Pass*``/``iam:*``)
  is never allowed on resource ``*``: that would let the holder hand any role to a service.
* ``backups`` - Aurora/RDS keep automated backups at least 7 days; ElastiCache keeps
  daily snapshots (at least 1 day).
* ``stateful-resources-protected`` - the Aurora cluster, the OpenSearch domain, the KMS
  key and the ECR repository carry Pulumi's ``protect`` option (a rename or a destroy must
  not silently replace them with empty ones).
* ``sagemaker-in-vpc`` - SageMaker models run with network isolation and a VPC config.

During a preview, inputs computed from other resources are *unknown*. A rule that reads an
unknown value raises pulumi-policy's ``UnknownValueError``; the pack then reports "can't run
policy ... during preview" as an ADVISORY diagnostic, whatever the policy's own level, and
the preview does not fail. ``pulumi up`` runs the rules again on the resolved inputs, where
a mandatory violation stops the update.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

REQUIRED_TAGS: tuple[str, ...] = ("Project", "Stack", "ManagedBy")
WORLD_CIDRS = frozenset({"0.0.0.0/0", "::/0"})
WORLD_PORTS = frozenset({80, 443})
OPENSEARCH_TLS_POLICIES = frozenset({"Policy-Min-TLS-1-2-2019-07", "Policy-Min-TLS-1-2-PFS-2023-10"})
ELB_TLS12_PREFIXES: tuple[str, ...] = (
    "ELBSecurityPolicy-TLS13-1-2-",
    "ELBSecurityPolicy-TLS13-1-3-",
    "ELBSecurityPolicy-TLS-1-2-",
    "ELBSecurityPolicy-FS-1-2-",
)
ADMIN_POLICY_SUFFIXES: tuple[str, ...] = (
    ":policy/AdministratorAccess",
    ":policy/PowerUserAccess",
    ":policy/IAMFullAccess",
)

#: Resource types (as Pulumi names them) that accept tags; keep in sync with the program
#: (a test checks every taggable type the program uses is listed).
TAGGABLE_TYPES = frozenset(
    {
        "aws:appautoscaling/target:Target",
        "aws:cloudwatch/logGroup:LogGroup",
        "aws:cloudwatch/metricAlarm:MetricAlarm",
        "aws:ec2/eip:Eip",
        "aws:ec2/flowLog:FlowLog",
        "aws:ec2/instance:Instance",
        "aws:ec2/internetGateway:InternetGateway",
        "aws:ec2/natGateway:NatGateway",
        "aws:ec2/routeTable:RouteTable",
        "aws:ec2/securityGroup:SecurityGroup",
        "aws:ec2/subnet:Subnet",
        "aws:ec2/vpc:Vpc",
        "aws:ec2/vpcEndpoint:VpcEndpoint",
        "aws:ebs/volume:Volume",
        "aws:ecr/repository:Repository",
        "aws:ecs/cluster:Cluster",
        "aws:ecs/service:Service",
        "aws:ecs/taskDefinition:TaskDefinition",
        "aws:elasticache/replicationGroup:ReplicationGroup",
        "aws:elasticache/subnetGroup:SubnetGroup",
        "aws:iam/role:Role",
        "aws:iam/policy:Policy",
        "aws:kms/key:Key",
        "aws:lb/listener:Listener",
        "aws:lb/loadBalancer:LoadBalancer",
        "aws:lb/targetGroup:TargetGroup",
        "aws:opensearch/domain:Domain",
        "aws:rds/cluster:Cluster",
        "aws:rds/clusterInstance:ClusterInstance",
        "aws:rds/clusterParameterGroup:ClusterParameterGroup",
        "aws:rds/instance:Instance",
        "aws:rds/subnetGroup:SubnetGroup",
        "aws:s3/bucket:Bucket",
        "aws:s3/bucketV2:BucketV2",
        "aws:sagemaker/endpoint:Endpoint",
        "aws:sagemaker/endpointConfiguration:EndpointConfiguration",
        "aws:sagemaker/model:Model",
        "aws:secretsmanager/secret:Secret",
        "aws:sns/topic:Topic",
        "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
        "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
    }
)

# Types holding IAM policy documents: type -> property names (documents as JSON strings).
_POLICY_DOCUMENTS: dict[str, tuple[str, ...]] = {
    "aws:iam/rolePolicy:RolePolicy": ("policy",),
    "aws:iam/policy:Policy": ("policy",),
    "aws:iam/userPolicy:UserPolicy": ("policy",),
    "aws:iam/groupPolicy:GroupPolicy": ("policy",),
    "aws:opensearch/domain:Domain": ("accessPolicies",),
    "aws:opensearch/domainPolicy:DomainPolicy": ("accessPolicies",),
    "aws:sns/topicPolicy:TopicPolicy": ("policy",),
    "aws:secretsmanager/secretPolicy:SecretPolicy": ("policy",),
    "aws:cloudwatch/logResourcePolicy:LogResourcePolicy": ("policyDocument",),
    "aws:ecr/repositoryPolicy:RepositoryPolicy": ("policy",),
}


# --- helpers --------------------------------------------------------------------------------


#: Tag of a development stack's forwarding HTTP listener (cognis_infra.service.HTTP_ONLY_TAG).
HTTP_ONLY_TAG = "CognisHttpOnly"


def _get(props: Any, *path: Any) -> Any:
    """Nested lookup that tolerates missing keys, lists of one object, and non-dicts."""
    cur = props
    for key in path:
        if isinstance(cur, Mapping):
            cur = cur.get(key)
        elif isinstance(key, int) and _is_list(cur) and len(cur) > key:
            cur = cur[key]
        else:
            return None
    return cur


def _is_list(v: Any) -> bool:
    return isinstance(v, Sequence) and not isinstance(v, (str, bytes))


def _as_list(v: Any) -> list:
    if v is None:
        return []
    return list(v) if _is_list(v) else [v]


def _object(v: Any) -> Any:
    """Nested objects arrive as a mapping or, from some providers, a list of one."""
    if _is_list(v):
        return v[0] if len(v) else None
    return v


def _is_true(v: Any) -> bool:
    return v is True or (isinstance(v, str) and v.lower() == "true")


def _num(v: Any) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _document(value: Any) -> Mapping | None:
    if value is None:
        return None
    if isinstance(value, Mapping):
        return value
    return json.loads(value)


# --- rules ------------------------------------------------------------------------------------


def check_encryption_at_rest(rtype: str, props: Mapping) -> list[str]:
    v: list[str] = []
    if rtype == "aws:opensearch/domain:Domain":
        if not _is_true(_get(_object(props.get("encryptAtRest")), "enabled")):
            v.append("OpenSearch domain must enable encryptAtRest")
    elif rtype in ("aws:rds/cluster:Cluster", "aws:rds/instance:Instance"):
        if not _is_true(props.get("storageEncrypted")):
            v.append("RDS storage must be encrypted (storageEncrypted: true)")
    elif rtype == "aws:elasticache/replicationGroup:ReplicationGroup":
        if not _is_true(props.get("atRestEncryptionEnabled")):
            v.append("ElastiCache replication group must enable atRestEncryptionEnabled")
    elif rtype == "aws:ebs/volume:Volume":
        if not _is_true(props.get("encrypted")):
            v.append("EBS volume must be encrypted")
    elif rtype == "aws:sns/topic:Topic":
        if not props.get("kmsMasterKeyId"):
            v.append("SNS topic must be encrypted with a KMS key (kmsMasterKeyId)")
    elif rtype == "aws:cloudwatch/logGroup:LogGroup":
        if not props.get("kmsKeyId"):
            v.append("CloudWatch log group must be encrypted with the stack's KMS key (kmsKeyId)")
    elif rtype == "aws:ecr/repository:Repository":
        enc = _object(props.get("encryptionConfigurations"))
        if _get(enc, "encryptionType") != "KMS":
            v.append("ECR repository must use KMS encryption (encryptionConfigurations: [{encryptionType: KMS}])")
    elif rtype == "aws:kms/key:Key":
        spec = props.get("customerMasterKeySpec") or "SYMMETRIC_DEFAULT"
        if spec == "SYMMETRIC_DEFAULT" and not _is_true(props.get("enableKeyRotation")):
            v.append("KMS key must enable automatic rotation (enableKeyRotation: true)")
    return v


def check_tls_only(rtype: str, props: Mapping) -> list[str]:
    v: list[str] = []
    if rtype == "aws:opensearch/domain:Domain":
        if not _is_true(_get(_object(props.get("nodeToNodeEncryption")), "enabled")):
            v.append("OpenSearch domain must enable node-to-node encryption")
        endpoint = _object(props.get("domainEndpointOptions"))
        if not _is_true(_get(endpoint, "enforceHttps")):
            v.append("OpenSearch domain must enforce HTTPS (domainEndpointOptions.enforceHttps)")
        if _get(endpoint, "tlsSecurityPolicy") not in OPENSEARCH_TLS_POLICIES:
            v.append(f"OpenSearch TLS policy must be one of {sorted(OPENSEARCH_TLS_POLICIES)}")
    elif rtype == "aws:elasticache/replicationGroup:ReplicationGroup":
        if not _is_true(props.get("transitEncryptionEnabled")):
            v.append("ElastiCache replication group must enable transitEncryptionEnabled")
        elif props.get("transitEncryptionMode") == "preferred":
            v.append("ElastiCache transitEncryptionMode must be 'required', not 'preferred'")
    elif rtype == "aws:rds/clusterParameterGroup:ClusterParameterGroup":
        family = str(props.get("family") or "")
        if family.startswith(("aurora-postgresql", "postgres")):
            params = {str(_get(p, "name")): str(_get(p, "value")) for p in _as_list(props.get("parameters"))}
            if params.get("rds.force_ssl") != "1":
                v.append("PostgreSQL parameter group must set rds.force_ssl = 1")
    elif rtype == "aws:lb/listener:Listener":
        protocol = str(props.get("protocol") or "").upper()
        if protocol in ("HTTPS", "TLS"):
            policy = str(props.get("sslPolicy") or "")
            if not policy.startswith(ELB_TLS12_PREFIXES):
                v.append(f"{protocol} listener must use a TLS 1.2+ security policy, got {policy or 'the default'}")
        elif protocol == "HTTP" and _is_true(_get(props, "tags", HTTP_ONLY_TAG)):
            pass  # a development stack that chose cognis:httpOnly: its port 80 forwards, and it says so
        elif protocol == "HTTP":
            for action in _as_list(props.get("defaultActions")):
                redirect = _object(_get(action, "redirect"))
                if _get(action, "type") != "redirect" or str(_get(redirect, "protocol") or "").upper() != "HTTPS":
                    v.append("HTTP listener may only redirect to HTTPS")
                    break
    return v


def check_no_bind_parameters_in_logs(rtype: str, props: Mapping) -> list[str]:
    """A PostgreSQL parameter group that logs statements must not log their bind parameters (the data)."""
    v: list[str] = []
    if rtype in ("aws:rds/clusterParameterGroup:ClusterParameterGroup", "aws:rds/parameterGroup:ParameterGroup"):
        family = str(props.get("family") or "")
        params = {str(_get(p, "name")): str(_get(p, "value")) for p in _as_list(props.get("parameters"))}
        logs_statements = (
            params.get("log_min_duration_statement", "-1") != "-1" or params.get("log_statement", "none") != "none"
        )
        if family.startswith(("aurora-postgresql", "postgres")) and logs_statements:
            for key in ("log_parameter_max_length", "log_parameter_max_length_on_error"):
                if params.get(key) != "0":
                    v.append(f"PostgreSQL statement logging must not log bind parameters: set {key} = 0")
    return v


def check_no_public_data_stores(rtype: str, props: Mapping) -> list[str]:
    v: list[str] = []
    if rtype == "aws:opensearch/domain:Domain":
        if not _as_list(_get(_object(props.get("vpcOptions")), "subnetIds")):
            v.append("OpenSearch domain must be placed in a VPC (vpcOptions.subnetIds)")
        doc = _document(props.get("accessPolicies"))
        for stmt in _as_list(_get(doc, "Statement")):
            principal = _get(stmt, "Principal")
            anonymous = principal == "*" or _get(principal, "AWS") == "*" or "*" in _as_list(_get(principal, "AWS"))
            if _get(stmt, "Effect") == "Allow" and anonymous and not _get(stmt, "Condition"):
                v.append("OpenSearch access policy must not allow anonymous principals ('*')")
    elif rtype in ("aws:rds/cluster:Cluster", "aws:rds/clusterInstance:ClusterInstance", "aws:rds/instance:Instance"):
        if _is_true(props.get("publiclyAccessible")):
            v.append("RDS must not be publicly accessible")
    elif rtype == "aws:elasticache/replicationGroup:ReplicationGroup" and not props.get("subnetGroupName"):
        v.append("ElastiCache replication group must use a subnet group in private subnets")
    return v


def _world_ingress_violation(protocol: Any, from_port: Any, to_port: Any) -> str | None:
    proto = str(protocol).lower()
    lo, hi = _num(from_port), _num(to_port)
    if proto in ("tcp", "6") and lo is not None and lo == hi and int(lo) in WORLD_PORTS:
        return None
    return f"ingress from anywhere is allowed only on TCP 80/443 (got {proto} {from_port}-{to_port})"


def world_ingress(rtype: str, props: Mapping) -> list[tuple[str | None, str | None]]:
    """``(security group id, violation or None)`` for each world-open ingress rule."""
    found: list[tuple[str | None, str | None]] = []
    if rtype == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule":
        if props.get("cidrIpv4") in WORLD_CIDRS or props.get("cidrIpv6") in WORLD_CIDRS:
            found.append(
                (
                    props.get("securityGroupId"),
                    _world_ingress_violation(props.get("ipProtocol"), props.get("fromPort"), props.get("toPort")),
                )
            )
    elif rtype == "aws:ec2/securityGroupRule:SecurityGroupRule":
        if props.get("type") == "ingress":
            cidrs = set(_as_list(props.get("cidrBlocks"))) | set(_as_list(props.get("ipv6CidrBlocks")))
            if cidrs & WORLD_CIDRS:
                found.append(
                    (
                        props.get("securityGroupId"),
                        _world_ingress_violation(props.get("protocol"), props.get("fromPort"), props.get("toPort")),
                    )
                )
    elif rtype == "aws:ec2/securityGroup:SecurityGroup":
        for rule in _as_list(props.get("ingress")):
            cidrs = set(_as_list(_get(rule, "cidrBlocks"))) | set(_as_list(_get(rule, "ipv6CidrBlocks")))
            if cidrs & WORLD_CIDRS:
                found.append(
                    (
                        props.get("id"),
                        _world_ingress_violation(_get(rule, "protocol"), _get(rule, "fromPort"), _get(rule, "toPort")),
                    )
                )
    return found


def check_no_world_ingress(rtype: str, props: Mapping) -> list[str]:
    return [msg for _, msg in world_ingress(rtype, props) if msg]


def check_database_deletion_protection(rtype: str, props: Mapping) -> list[str]:
    v: list[str] = []
    if rtype in ("aws:rds/cluster:Cluster", "aws:rds/instance:Instance"):
        if not _is_true(props.get("deletionProtection")):
            v.append("database must enable deletionProtection")
        if _is_true(props.get("skipFinalSnapshot")):
            v.append("database must take a final snapshot on delete (skipFinalSnapshot: false)")
    return v


#: Automated backup retention the ``backups`` rule requires of databases, in days.
MIN_DATABASE_BACKUP_DAYS = 7
#: Types whose loss loses data or access to data: they must be ``protect``-ed.
PROTECTED_TYPES = frozenset(
    {
        "aws:rds/cluster:Cluster",
        "aws:opensearch/domain:Domain",
        "aws:kms/key:Key",
        "aws:ecr/repository:Repository",
    }
)


def check_backups(rtype: str, props: Mapping) -> list[str]:
    v: list[str] = []
    if rtype in ("aws:rds/cluster:Cluster", "aws:rds/instance:Instance"):
        days = _num(props.get("backupRetentionPeriod"))
        if days is None or days < MIN_DATABASE_BACKUP_DAYS:
            v.append(f"database must keep automated backups at least {MIN_DATABASE_BACKUP_DAYS} days "
                     f"(backupRetentionPeriod, got {props.get('backupRetentionPeriod')})")  # fmt: skip
    elif rtype in ("aws:elasticache/replicationGroup:ReplicationGroup", "aws:elasticache/cluster:Cluster"):
        days = _num(props.get("snapshotRetentionLimit"))
        if days is None or days < 1:
            v.append("cache must keep daily snapshots (snapshotRetentionLimit >= 1)")
    return v


def check_protected(rtype: str, props: Mapping, options: Any) -> list[str]:
    if rtype in PROTECTED_TYPES and not _is_true(getattr(options, "protect", False)):
        return [f"{rtype.split(':')[-1]} holds state: set the protect resource option (cognis:protect)"]
    return []


def check_sagemaker_in_vpc(rtype: str, props: Mapping) -> list[str]:
    v: list[str] = []
    if rtype == "aws:sagemaker/model:Model":
        if not _is_true(props.get("enableNetworkIsolation")):
            v.append("SageMaker model must enable network isolation (enableNetworkIsolation: true)")
        vpc = _object(props.get("vpcConfig"))
        if not _as_list(_get(vpc, "subnets")) or not _as_list(_get(vpc, "securityGroupIds")):
            v.append("SageMaker model must run in the VPC (vpcConfig with subnets and security groups)")
    return v


def _passrole_on_star(doc: Mapping | None) -> list[str]:
    v: list[str] = []
    for stmt in _as_list(_get(doc, "Statement")):
        if _get(stmt, "Effect") != "Allow":
            continue
        actions = [str(a).lower() for a in _as_list(_get(stmt, "Action"))]
        grants = [a for a in actions if a in ("*", "iam:*", "iam:passrole") or (a.startswith("iam:pas") and "*" in a)]
        resources = [str(r) for r in _as_list(_get(stmt, "Resource"))]
        if grants and ("*" in resources or _get(stmt, "NotResource") is not None):
            v.append(f"statement {_get(stmt, 'Sid') or '(no Sid)'}: iam:PassRole on resource '*'")
    return v


def check_no_passrole_on_star(rtype: str, props: Mapping) -> list[str]:
    v: list[str] = []
    for prop in _POLICY_DOCUMENTS.get(rtype, ()):
        try:
            v.extend(_passrole_on_star(_document(props.get(prop))))
        except (TypeError, ValueError):
            continue  # no-wildcard-iam reports documents that are not JSON
    if rtype == "aws:iam/role:Role":
        for inline in _as_list(props.get("inlinePolicies")):
            v.extend(_passrole_on_star(_document(_get(inline, "policy"))))
    return v


def check_required_tags(rtype: str, props: Mapping) -> list[str]:
    if rtype not in TAGGABLE_TYPES:
        return []
    tags = props.get("tags") or {}
    missing = [k for k in REQUIRED_TAGS if not (isinstance(tags, Mapping) and tags.get(k))]
    return [f"missing required tags: {', '.join(missing)}"] if missing else []


def _wildcard_statements(doc: Mapping | None) -> list[str]:
    v: list[str] = []
    for stmt in _as_list(_get(doc, "Statement")):
        if _get(stmt, "Effect") != "Allow":
            continue
        sid = _get(stmt, "Sid") or "(no Sid)"
        if _get(stmt, "NotAction") is not None:
            v.append(f"statement {sid}: Allow with NotAction grants everything else")
            continue
        actions = [str(a) for a in _as_list(_get(stmt, "Action"))]
        resources = [str(r) for r in _as_list(_get(stmt, "Resource"))]
        wild = [a for a in actions if "*" in a]
        if wild and ("*" in resources or _get(stmt, "NotResource") is not None):
            v.append(f"statement {sid}: wildcard action(s) {wild} on resource '*'")
    return v


def check_no_wildcard_iam(rtype: str, props: Mapping) -> list[str]:
    v: list[str] = []
    for prop in _POLICY_DOCUMENTS.get(rtype, ()):
        try:
            doc = _document(props.get(prop))
        except (TypeError, ValueError):
            v.append(f"{prop} is not a valid JSON policy document")
            continue
        v.extend(_wildcard_statements(doc))
    if rtype == "aws:iam/role:Role":
        for inline in _as_list(props.get("inlinePolicies")):
            v.extend(_wildcard_statements(_document(_get(inline, "policy"))))
        for arn in _as_list(props.get("managedPolicyArns")):
            if str(arn).endswith(ADMIN_POLICY_SUFFIXES):
                v.append(f"role must not attach {arn}")
    attachments = ("aws:iam/rolePolicyAttachment:RolePolicyAttachment", "aws:iam/policyAttachment:PolicyAttachment")
    if rtype in attachments and str(props.get("policyArn") or "").endswith(ADMIN_POLICY_SUFFIXES):
        v.append(f"must not attach {props.get('policyArn')}")
    return v


# --- stack rules --------------------------------------------------------------------------------

StackResource = tuple[str, Mapping, str]  # (type, outputs, urn)


def check_world_ingress_on_load_balancers(resources: Iterable[StackResource]) -> list[tuple[str, str]]:
    """World-open ingress may exist only on security groups attached to a load balancer."""
    resources = list(resources)
    lb_groups = {
        str(sg)
        for rtype, props, _ in resources
        if rtype in ("aws:lb/loadBalancer:LoadBalancer", "aws:alb/loadBalancer:LoadBalancer")
        for sg in _as_list(props.get("securityGroups"))
    }
    v: list[tuple[str, str]] = []
    for rtype, props, urn in resources:
        for sg, _ in world_ingress(rtype, props):
            if str(sg) not in lb_groups:
                v.append((f"ingress from anywhere on security group {sg}, which no load balancer uses", urn))
    return v


# --- registry ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    name: str
    description: str
    check: Callable[..., list[str]]
    #: The check takes the resource options as a third argument.
    uses_options: bool = False

    def evaluate(self, rtype: str, props: Mapping, options: Any = None) -> list[str]:
        return self.check(rtype, props, options) if self.uses_options else self.check(rtype, props)


@dataclass(frozen=True)
class StackRule:
    name: str
    description: str
    check: Callable[[Iterable[StackResource]], list[tuple[str, str]]]


RESOURCE_RULES: tuple[Rule, ...] = (
    Rule(
        "encryption-at-rest",
        "Data stores, logs, topics, images and keys are encrypted at rest.",
        check_encryption_at_rest,
    ),
    Rule(
        "tls-only",
        "Clients and nodes talk TLS 1.2+ only; HTTP only redirects to HTTPS (a tagged HTTP-only dev listener aside).",
        check_tls_only,
    ),
    Rule(
        "no-bind-parameters-in-logs",
        "PostgreSQL statement logs carry no bind parameters (the memory text).",
        check_no_bind_parameters_in_logs,
    ),
    Rule("no-public-data-stores", "OpenSearch, RDS and ElastiCache are private.", check_no_public_data_stores),
    Rule("no-world-ingress", "Ingress from 0.0.0.0/0 or ::/0 only on TCP 80/443.", check_no_world_ingress),
    Rule(
        "database-deletion-protection",
        "Databases keep deletion protection and a final snapshot.",
        check_database_deletion_protection,
    ),
    Rule("required-tags", f"Taggable resources carry {', '.join(REQUIRED_TAGS)}.", check_required_tags),
    Rule("no-wildcard-iam", "No Allow of wildcard actions on resource '*', no admin policies.", check_no_wildcard_iam),
    Rule("no-passrole-on-star", "iam:PassRole is never allowed on resource '*'.", check_no_passrole_on_star),
    Rule(
        "backups",
        f"Databases keep {MIN_DATABASE_BACKUP_DAYS}+ days of automated backups; caches keep daily snapshots.",
        check_backups,
    ),
    Rule(
        "stateful-resources-protected",
        "Aurora, OpenSearch, the KMS key and ECR carry the protect option.",
        check_protected,
        uses_options=True,
    ),
    Rule("sagemaker-in-vpc", "SageMaker models run in the VPC with network isolation.", check_sagemaker_in_vpc),
)
STACK_RULES: tuple[StackRule, ...] = (
    StackRule(
        "world-ingress-only-on-load-balancers",
        "Only load balancer security groups accept traffic from anywhere.",
        check_world_ingress_on_load_balancers,
    ),
)


def resource_validator(rule: Rule) -> Callable[[Any, Callable[..., None]], None]:
    """Adapt a rule to pulumi-policy's ``validate(args, report_violation)``."""

    def validate(args: Any, report_violation: Callable[..., None]) -> None:
        for message in rule.evaluate(args.resource_type, args.props, args.opts):
            report_violation(message)

    return validate


def stack_validator(rule: StackRule) -> Callable[[Any, Callable[..., None]], None]:
    """Adapt a stack rule to pulumi-policy's stack ``validate(args, report_violation)``."""

    def validate(args: Any, report_violation: Callable[..., None]) -> None:
        triples = [(r.resource_type, r.props, r.urn) for r in args.resources]
        for message, urn in rule.check(triples):
            report_violation(message, urn)

    return validate
