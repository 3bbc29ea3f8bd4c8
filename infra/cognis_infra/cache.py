"""Cache: an ElastiCache Redis replication group (query embeddings, search results).

Multi-AZ with automatic failover (a primary and a replica in different AZs by default),
encrypted at rest and in transit (TLS required: the API connects with ``rediss://``),
AUTH token from stack config kept in Secrets Manager for the ECS task
(``COGNIS_REDIS_PASSWORD``), slow log shipped to CloudWatch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from .base import CognisComponent

PORT = 6379


@dataclass(frozen=True)
class CacheSettings:
    """Sizing of the Redis replication group (stack config)."""

    node_type: str = "cache.t4g.medium"
    engine_version: str = "7.1"
    node_count: int = 2
    snapshot_retention_days: int = 1
    log_retention_days: int = 30

    def __post_init__(self) -> None:
        if not self.node_type.startswith("cache."):
            raise ValueError(f"cognis:redisNodeType must be a cache.* node type, got {self.node_type}")
        if self.node_count < 2:
            raise ValueError("cognis:redisNodes must be at least 2 (multi-AZ needs a replica)")


@dataclass
class CacheArgs:
    settings: CacheSettings
    subnet_ids: Sequence[pulumi.Input[str]]
    security_group_id: pulumi.Input[str]
    #: AUTH token (16-128 printable characters, no ``@``, ``"`` or ``/``); a secret.
    auth_token: pulumi.Input[str]
    log_kms_key_arn: pulumi.Input[str]
    tags: Mapping[str, str] = field(default_factory=dict)


def validate_auth_token(token: str) -> str:
    """ElastiCache's AUTH token rules, checked before AWS rejects them mid-deployment."""
    if not 16 <= len(token) <= 128:
        raise ValueError("cognis:redisAuthToken must be 16 to 128 characters long")
    bad = set(token) & set('@"/ ')
    if bad or not token.isprintable():
        raise ValueError("cognis:redisAuthToken must be printable ASCII without '@', '\"', '/' or spaces")
    return token


class Cache(CognisComponent):
    """Redis (cluster mode disabled) with a primary and replicas across AZs."""

    primary_endpoint: pulumi.Output[str]
    url: pulumi.Output[str]
    auth_secret_arn: pulumi.Output[str]
    replication_group_id: pulumi.Output[str]

    def __init__(self, name: str, args: CacheArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("cognis:cache:Cache", name, args.tags, opts)
        s = args.settings

        auth_secret = aws.secretsmanager.Secret(
            f"{name}-auth",
            description="cognis-memory: Redis AUTH token (COGNIS_REDIS_PASSWORD)",
            recovery_window_in_days=7,
            tags=self.tags(f"{name}-auth"),
            opts=self.child_opts(),
        )
        aws.secretsmanager.SecretVersion(
            f"{name}-auth",
            secret_id=auth_secret.id,
            secret_string=pulumi.Output.secret(args.auth_token),
            opts=self.child_opts(),
        )
        subnet_group = aws.elasticache.SubnetGroup(
            f"{name}-subnets",
            description="cognis-memory Redis: private subnets",
            subnet_ids=list(args.subnet_ids),
            tags=self.tags(f"{name}-subnets"),
            opts=self.child_opts(),
        )
        slow_log = aws.cloudwatch.LogGroup(
            f"{name}-slow-log",
            retention_in_days=s.log_retention_days,
            kms_key_id=args.log_kms_key_arn,
            tags=self.tags(f"{name}-slow-log"),
            opts=self.child_opts(),
        )
        group = aws.elasticache.ReplicationGroup(
            f"{name}-redis",
            description="cognis-memory cache",
            engine="redis",
            engine_version=s.engine_version,
            node_type=s.node_type,
            num_cache_clusters=s.node_count,
            port=PORT,
            automatic_failover_enabled=True,
            multi_az_enabled=True,
            at_rest_encryption_enabled=True,
            transit_encryption_enabled=True,
            transit_encryption_mode="required",
            auth_token=pulumi.Output.secret(args.auth_token),
            auth_token_update_strategy="ROTATE",
            subnet_group_name=subnet_group.name,
            security_group_ids=[args.security_group_id],
            snapshot_retention_limit=s.snapshot_retention_days,
            snapshot_window="02:00-03:00",
            maintenance_window="sun:05:30-sun:06:30",
            auto_minor_version_upgrade=True,
            apply_immediately=False,
            log_delivery_configurations=[
                aws.elasticache.ReplicationGroupLogDeliveryConfigurationArgs(
                    destination=slow_log.name,
                    destination_type="cloudwatch-logs",
                    log_format="json",
                    log_type="slow-log",
                )
            ],
            tags=self.tags(f"{name}-redis"),
            opts=self.child_opts(),
        )

        self.replication_group_id = group.id
        self.primary_endpoint = group.primary_endpoint_address
        self.url = pulumi.Output.concat("rediss://", group.primary_endpoint_address, f":{PORT}/0")
        self.auth_secret_arn = auth_secret.arn
        self.register_outputs(
            {
                "replicationGroupId": self.replication_group_id,
                "primaryEndpoint": self.primary_endpoint,
                "url": self.url,
                "authSecretArn": self.auth_secret_arn,
            }
        )
