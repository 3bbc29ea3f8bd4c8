"""Cache: an ElastiCache replication group, Valkey or Redis OSS (query embeddings, search results).

Multi-AZ with automatic failover when it has two or more nodes (a primary and a replica in
different AZs by default; the dev profile runs one node), encrypted at rest and in transit
(TLS required: the API connects with ``rediss://``), AUTH token from stack config kept in
Secrets Manager for the ECS task (``COGNIS_REDIS_PASSWORD``), slow log shipped to CloudWatch,
daily snapshots.

AUTH token rotation is two ``pulumi up`` runs (docs/deploy.md): a new ``cognis:cacheAuthToken``
with ``cognis:cacheAuthTokenUpdateStrategy: ROTATE`` (ElastiCache then accepts the old and the
new token; the ECS service redeploys onto the new secret version), then ``SET`` (only the new
token is accepted). Valkey is a drop-in replacement for Redis OSS 7: switching
``cognis:cacheEngine`` is an in-place engine upgrade.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from .base import CognisComponent

PORT = 6379
#: Default engine version per engine.
ENGINE_VERSIONS: dict[str, str] = {"redis": "7.1", "valkey": "8.0"}
#: ROTATE adds the new token next to the old one; SET (allowed only after ROTATE) drops the old one.
AUTH_STRATEGIES: tuple[str, ...] = ("ROTATE", "SET")


@dataclass(frozen=True)
class CacheSettings:
    """Engine and sizing of the replication group (stack config)."""

    engine: str = "redis"
    engine_version: str | None = None
    node_type: str = "cache.t4g.medium"
    node_count: int = 2
    auth_token_update_strategy: str = "ROTATE"
    snapshot_retention_days: int = 1
    log_retention_days: int = 30

    def __post_init__(self) -> None:
        if self.engine not in ENGINE_VERSIONS:
            raise ValueError(f"cognis:cacheEngine must be one of {', '.join(ENGINE_VERSIONS)}, got {self.engine}")
        if not self.node_type.startswith("cache."):
            raise ValueError(f"cognis:cacheNodeType must be a cache.* node type, got {self.node_type}")
        if self.node_count < 1:
            raise ValueError("cognis:cacheNodes must be at least 1")
        if self.auth_token_update_strategy not in AUTH_STRATEGIES:
            raise ValueError(
                f"cognis:cacheAuthTokenUpdateStrategy must be ROTATE or SET, got {self.auth_token_update_strategy}"
            )
        if self.snapshot_retention_days < 1:
            raise ValueError("cache snapshots are kept at least 1 day")

    @property
    def version(self) -> str:
        return self.engine_version or ENGINE_VERSIONS[self.engine]

    @property
    def multi_az(self) -> bool:
        """Failover needs a replica in another AZ."""
        return self.node_count >= 2


@dataclass
class CacheArgs:
    settings: CacheSettings
    subnet_ids: Sequence[pulumi.Input[str]]
    security_group_id: pulumi.Input[str]
    #: Replication group id (carries the stack name).
    group_id: str
    #: AUTH token (16-128 printable characters, no ``@``, ``"`` or ``/``); a secret.
    auth_token: pulumi.Input[str]
    log_kms_key_arn: pulumi.Input[str]
    #: Secrets Manager name prefix for the token's secret.
    secret_name_prefix: str
    tags: Mapping[str, str] = field(default_factory=dict)


def validate_auth_token(token: str) -> str:
    """ElastiCache's AUTH token rules, checked before AWS rejects them mid-deployment."""
    if not 16 <= len(token) <= 128:
        raise ValueError("cognis:cacheAuthToken must be 16 to 128 characters long")
    bad = set(token) & set('@"/ ')
    if bad or not token.isprintable():
        raise ValueError("cognis:cacheAuthToken must be printable ASCII without '@', '\"', '/' or spaces")
    return token


class Cache(CognisComponent):
    """Valkey/Redis (cluster mode disabled) with a primary and replicas across AZs."""

    primary_endpoint: pulumi.Output[str]
    url: pulumi.Output[str]
    auth_secret_arn: pulumi.Output[str]
    #: Changes with every new token: the ECS service redeploys on it.
    auth_secret_version: pulumi.Output[str]
    replication_group_id: pulumi.Output[str]

    def __init__(self, name: str, args: CacheArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("cognis:cache:Cache", name, args.tags, opts)
        s = args.settings

        auth_secret = aws.secretsmanager.Secret(
            f"{name}-auth",
            name_prefix=args.secret_name_prefix,
            description="cognis-memory: cache AUTH token (COGNIS_REDIS_PASSWORD)",
            recovery_window_in_days=7,
            tags=self.tags(f"{name}-auth"),
            opts=self.child_opts(),
        )
        version = aws.secretsmanager.SecretVersion(
            f"{name}-auth",
            secret_id=auth_secret.id,
            secret_string=pulumi.Output.secret(args.auth_token),
            opts=self.child_opts(),
        )
        subnet_group = aws.elasticache.SubnetGroup(
            f"{name}-subnets",
            description="cognis-memory cache: private subnets",
            subnet_ids=list(args.subnet_ids),
            tags=self.tags(f"{name}-subnets"),
            opts=self.child_opts(),
        )
        slow_log = self.log_group(
            f"{name}-slow-log",
            retention_days=s.log_retention_days,
            kms_key_arn=args.log_kms_key_arn,
        )
        group = aws.elasticache.ReplicationGroup(
            f"{name}-group",
            replication_group_id=args.group_id,
            description="cognis-memory cache",
            engine=s.engine,
            engine_version=s.version,
            node_type=s.node_type,
            num_cache_clusters=s.node_count,
            port=PORT,
            automatic_failover_enabled=s.multi_az,
            multi_az_enabled=s.multi_az,
            at_rest_encryption_enabled=True,
            transit_encryption_enabled=True,
            transit_encryption_mode="required",
            auth_token=pulumi.Output.secret(args.auth_token),
            auth_token_update_strategy=s.auth_token_update_strategy,
            subnet_group_name=subnet_group.name,
            security_group_ids=[args.security_group_id],
            snapshot_retention_limit=s.snapshot_retention_days,
            snapshot_window="02:00-03:00",
            maintenance_window="sun:05:30-sun:06:30",
            auto_minor_version_upgrade=True,
            # Size and version changes wait for the maintenance window; the provider applies AUTH
            # token changes immediately whatever this says (its ModifyReplicationGroup call for them).
            apply_immediately=False,
            log_delivery_configurations=[
                aws.elasticache.ReplicationGroupLogDeliveryConfigurationArgs(
                    destination=slow_log.name,
                    destination_type="cloudwatch-logs",
                    log_format="json",
                    log_type="slow-log",
                )
            ],
            tags=self.tags(args.group_id),
            opts=self.child_opts(),
        )

        self.replication_group_id = group.id
        #: One cache cluster per node (ElastiCache publishes its metrics per node).
        self.member_clusters = group.member_clusters
        self.node_count = s.node_count
        self.primary_endpoint = group.primary_endpoint_address
        self.url = pulumi.Output.concat("rediss://", group.primary_endpoint_address, f":{PORT}/0")
        self.auth_secret_arn = auth_secret.arn
        self.auth_secret_version = version.version_id
        self.register_outputs(
            {
                "replicationGroupId": self.replication_group_id,
                "primaryEndpoint": self.primary_endpoint,
                "url": self.url,
                "authSecretArn": self.auth_secret_arn,
            }
        )
