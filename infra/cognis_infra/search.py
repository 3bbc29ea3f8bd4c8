"""Search: the OpenSearch domain holding the BM25 index (and optional k-NN).

Defaults follow ARCHITECTURE.md section 9: three ``r6g.large.search`` data nodes with
zone awareness over three AZs, gp3 volumes (100 GB, 3000 IOPS, 250 MiB/s), encryption
at rest and node-to-node, HTTPS only with a TLS 1.2+ policy, Auto-Tune, inside the VPC,
with slow logs and application logs in CloudWatch. Automated hourly snapshots are
built into the service (no setting needed on OpenSearch engines). One node (the dev
profile) runs without zone awareness; Auto-Tune is off on t2/t3 nodes, which do not
support it. The domain is ``protect``-ed: renaming it would otherwise replace it with an
empty index.

Access: the domain's resource policy allows HTTP calls only from the API task role;
requests are SigV4-signed (``COGNIS_OPENSEARCH_AUTH=sigv4``). The security group admits
port 443 from the API tasks only.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from .base import CognisComponent
from .context import AwsContext

#: HTTP verbs the task role may use on the domain (no ``es:*``, no control plane).
DATA_PLANE_ACTIONS: tuple[str, ...] = (
    "es:ESHttpGet",
    "es:ESHttpHead",
    "es:ESHttpPost",
    "es:ESHttpPut",
    "es:ESHttpDelete",
    "es:ESHttpPatch",
)
TLS_POLICY = "Policy-Min-TLS-1-2-PFS-2023-10"
LOG_TYPES: tuple[str, ...] = ("INDEX_SLOW_LOGS", "SEARCH_SLOW_LOGS", "ES_APPLICATION_LOGS")


@dataclass(frozen=True)
class SearchSettings:
    """Sizing of the OpenSearch domain (stack config)."""

    engine_version: str = "OpenSearch_2.19"
    instance_type: str = "r6g.large.search"
    instance_count: int = 3
    zone_count: int = 3
    volume_size_gb: int = 100
    volume_iops: int = 3000
    volume_throughput_mibps: int = 250
    dedicated_master_type: str | None = None
    dedicated_master_count: int = 3
    log_retention_days: int = 30

    def __post_init__(self) -> None:
        if not self.engine_version.startswith("OpenSearch_"):
            raise ValueError(f"cognis:opensearchEngineVersion must be OpenSearch_x.y, got {self.engine_version}")
        if not self.instance_type.endswith(".search"):
            raise ValueError(f"cognis:opensearchInstanceType must end in .search, got {self.instance_type}")
        if self.zone_count not in (1, 2, 3):
            raise ValueError("OpenSearch runs in 1 AZ or, with zone awareness, 2 or 3 AZs")
        if self.instance_count % self.zone_count:
            raise ValueError(
                f"cognis:opensearchInstanceCount ({self.instance_count}) must be a multiple of the AZ count "
                f"({self.zone_count}) for zone awareness"
            )

    @property
    def zone_awareness(self) -> bool:
        return self.zone_count > 1

    @property
    def node_count(self) -> int:
        """Nodes of the domain as the ``Nodes`` metric counts them: data nodes and dedicated masters."""
        return self.instance_count + (self.dedicated_master_count if self.dedicated_master_type else 0)

    @property
    def auto_tune(self) -> bool:
        """Auto-Tune is not available on t2/t3 instance types."""
        return not self.instance_type.startswith(("t2.", "t3."))


@dataclass
class SearchArgs:
    settings: SearchSettings
    context: AwsContext
    domain_name: str
    subnet_ids: Sequence[pulumi.Input[str]]
    security_group_id: pulumi.Input[str]
    #: The only principal allowed to call the domain (the API task role).
    access_role_arn: pulumi.Input[str]
    log_kms_key_arn: pulumi.Input[str]
    protect: bool = True
    tags: Mapping[str, str] = field(default_factory=dict)


#: OpenSearch domain names: 3-28 characters of ``[a-z][a-z0-9-]+`` (fact 61).
DOMAIN_NAME_MAX = 28
DOMAIN_NAME = re.compile(r"[a-z][a-z0-9-]{2,27}")


def domain_name_for(stack: str, prefix: str = "cognis") -> str:
    """A valid OpenSearch domain name for a stack (3-28 characters, lower case, starts with a letter).

    A name that fits is ``<prefix>-<stack>``; a longer one is cut and ends in ``-`` + 6 hex digits of the
    full name's SHA-256, so two long stack names that share their first characters still get different
    domains, and different CloudWatch Logs resource policies (named after the domain, account-wide)."""
    raw = re.sub(r"[^a-z0-9-]+", "-", f"{prefix}-{stack}".lower()).strip("-")
    if len(raw) <= DOMAIN_NAME_MAX:
        name = raw
    else:
        digest = hashlib.sha256(raw.encode()).hexdigest()[:6]
        name = f"{raw[: DOMAIN_NAME_MAX - len(digest) - 1].rstrip('-')}-{digest}"
    if not DOMAIN_NAME.fullmatch(name):
        raise ValueError(f"cannot derive an OpenSearch domain name from stack {stack!r}")
    return name


class Search(CognisComponent):
    """An OpenSearch domain in the private subnets, reachable only by the API."""

    endpoint: pulumi.Output[str]
    url: pulumi.Output[str]
    domain_name: str
    domain_arn: pulumi.Output[str]

    def __init__(self, name: str, args: SearchArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("cognis:search:Search", name, args.tags, opts)
        s = args.settings
        ctx = args.context
        domain_arn = ctx.arn("es", f"domain/{args.domain_name}")

        # --- logs ---------------------------------------------------------------------------
        groups = {}
        for log_type in LOG_TYPES:
            short = log_type.lower().replace("_logs", "").replace("_", "-")
            groups[log_type] = self.log_group(
                f"{name}-{short}",
                retention_days=s.log_retention_days,
                kms_key_arn=args.log_kms_key_arn,
                physical_name=f"/aws/opensearch/{args.domain_name}/{short}",
            )
        log_policy = aws.cloudwatch.LogResourcePolicy(
            f"{name}-logs",
            policy_name=f"opensearch-{args.domain_name}",
            policy_document=pulumi.Output.json_dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Sid": "OpenSearchLogs",
                            "Effect": "Allow",
                            "Principal": {"Service": ctx.service_principal("es")},
                            "Action": ["logs:PutLogEvents", "logs:CreateLogStream"],
                            "Resource": [pulumi.Output.concat(g.arn, ":*") for g in groups.values()],
                            "Condition": {
                                "StringEquals": {"aws:SourceAccount": ctx.account_id},
                                "ArnLike": {"aws:SourceArn": domain_arn},
                            },
                        }
                    ],
                }
            ),
            opts=self.child_opts(),
        )

        # --- domain ---------------------------------------------------------------------------
        access_policy = pulumi.Output.json_dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Sid": "ApiTaskRoleOnly",
                        "Effect": "Allow",
                        "Principal": {"AWS": args.access_role_arn},
                        "Action": list(DATA_PLANE_ACTIONS),
                        "Resource": f"{domain_arn}/*",
                    }
                ],
            }
        )
        osd = aws.opensearch
        domain = osd.Domain(
            f"{name}-domain",
            domain_name=args.domain_name,
            engine_version=s.engine_version,
            cluster_config=osd.DomainClusterConfigArgs(
                instance_type=s.instance_type,
                instance_count=s.instance_count,
                zone_awareness_enabled=s.zone_awareness,
                zone_awareness_config=(
                    osd.DomainClusterConfigZoneAwarenessConfigArgs(availability_zone_count=s.zone_count)
                    if s.zone_awareness
                    else None
                ),
                multi_az_with_standby_enabled=False,
                dedicated_master_enabled=s.dedicated_master_type is not None,
                dedicated_master_type=s.dedicated_master_type,
                dedicated_master_count=s.dedicated_master_count if s.dedicated_master_type else None,
            ),
            ebs_options=osd.DomainEbsOptionsArgs(
                ebs_enabled=True,
                volume_type="gp3",
                volume_size=s.volume_size_gb,
                iops=s.volume_iops,
                throughput=s.volume_throughput_mibps,
            ),
            encrypt_at_rest=osd.DomainEncryptAtRestArgs(enabled=True),
            node_to_node_encryption=osd.DomainNodeToNodeEncryptionArgs(enabled=True),
            domain_endpoint_options=osd.DomainDomainEndpointOptionsArgs(
                enforce_https=True, tls_security_policy=TLS_POLICY
            ),
            vpc_options=osd.DomainVpcOptionsArgs(
                subnet_ids=list(args.subnet_ids)[: s.zone_count],
                security_group_ids=[args.security_group_id],
            ),
            access_policies=access_policy,
            auto_tune_options=osd.DomainAutoTuneOptionsArgs(
                desired_state="ENABLED" if s.auto_tune else "DISABLED",
                rollback_on_disable="NO_ROLLBACK",
                use_off_peak_window=s.auto_tune,
            ),
            off_peak_window_options=osd.DomainOffPeakWindowOptionsArgs(
                enabled=True,
                off_peak_window=osd.DomainOffPeakWindowOptionsOffPeakWindowArgs(
                    window_start_time=osd.DomainOffPeakWindowOptionsOffPeakWindowWindowStartTimeArgs(hours=2, minutes=0)
                ),
            ),
            software_update_options=osd.DomainSoftwareUpdateOptionsArgs(auto_software_update_enabled=True),
            log_publishing_options=[
                osd.DomainLogPublishingOptionArgs(log_type=log_type, cloudwatch_log_group_arn=group.arn, enabled=True)
                for log_type, group in groups.items()
            ],
            tags=self.tags(args.domain_name),
            opts=self.child_opts(protect=args.protect, depends_on=[log_policy]),
        )

        self.domain_name = args.domain_name
        self.domain_arn = domain.arn
        self.endpoint = domain.endpoint
        self.url = pulumi.Output.concat("https://", domain.endpoint, ":443")
        self.register_outputs(
            {"domainName": self.domain_name, "domainArn": self.domain_arn, "endpoint": self.endpoint, "url": self.url}
        )
