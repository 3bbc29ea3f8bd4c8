"""Database: Aurora PostgreSQL 16 Serverless v2, the system of record (pgvector).

* 2 ``db.serverless`` instances in different AZs (writer + reader for failover),
  scaling between 0.5 and 16 ACU by default;
* storage encrypted, deletion protection on, a final snapshot on delete, 7 days of
  automated backups, PostgreSQL logs exported to CloudWatch;
* the master password is generated and rotated by RDS in Secrets Manager
  (``manage_master_user_password``); the API reads username and password from that
  secret (``COGNIS_POSTGRES_SECRET_ARN``) and re-reads it after a rotation;
* a cluster parameter group that forces TLS (``rds.force_ssl = 1``) and logs slow
  statements.

The pgvector schema (``CREATE EXTENSION vector``, tables, HNSW indexes) is applied by
the service's own migration at start-up: there is no manual step and no bastion.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from .base import CognisComponent

ENGINE = "aurora-postgresql"
INSTANCE_CLASS = "db.serverless"


@dataclass(frozen=True)
class DatabaseSettings:
    """Sizing and safety of the Aurora cluster (stack config)."""

    engine_version: str = "16.6"
    min_acu: float = 0.5
    max_acu: float = 16.0
    instance_count: int = 2
    backup_retention_days: int = 7
    database_name: str = "cognis"
    master_username: str = "cognis_admin"
    deletion_protection: bool = True
    slow_statement_ms: int = 1000

    def __post_init__(self) -> None:
        if not self.engine_version.startswith("16"):
            raise ValueError(f"cognis:auroraEngineVersion must be a PostgreSQL 16.x version, got {self.engine_version}")
        if not 0 <= self.min_acu <= self.max_acu <= 256:
            raise ValueError("Aurora capacity must satisfy 0 <= cognis:auroraMinAcu <= cognis:auroraMaxAcu <= 256")
        if self.instance_count < 1:
            raise ValueError("cognis:auroraInstances must be at least 1")
        if not 1 <= self.backup_retention_days <= 35:
            raise ValueError("cognis:auroraBackupRetentionDays must be 1..35")

    @property
    def parameter_group_family(self) -> str:
        return f"aurora-postgresql{self.engine_version.split('.')[0]}"


@dataclass
class DatabaseArgs:
    settings: DatabaseSettings
    subnet_ids: Sequence[pulumi.Input[str]]
    security_group_id: pulumi.Input[str]
    final_snapshot_identifier: str
    tags: Mapping[str, str] = field(default_factory=dict)


class Database(CognisComponent):
    """An Aurora PostgreSQL Serverless v2 cluster with two instances."""

    cluster_identifier: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    reader_endpoint: pulumi.Output[str]
    port: pulumi.Output[int]
    database_name: str
    secret_arn: pulumi.Output[str]
    max_acu: float

    def __init__(self, name: str, args: DatabaseArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("cognis:database:Database", name, args.tags, opts)
        s = args.settings

        subnet_group = aws.rds.SubnetGroup(
            f"{name}-subnets",
            description="cognis-memory Aurora: private subnets",
            subnet_ids=list(args.subnet_ids),
            tags=self.tags(f"{name}-subnets"),
            opts=self.child_opts(),
        )
        params = aws.rds.ClusterParameterGroup(
            f"{name}-params",
            family=s.parameter_group_family,
            description="cognis-memory: TLS only, slow statement log",
            parameters=[
                aws.rds.ClusterParameterGroupParameterArgs(name="rds.force_ssl", value="1"),
                aws.rds.ClusterParameterGroupParameterArgs(
                    name="log_min_duration_statement", value=str(s.slow_statement_ms)
                ),
            ],
            tags=self.tags(f"{name}-params"),
            opts=self.child_opts(),
        )
        cluster = aws.rds.Cluster(
            f"{name}-cluster",
            engine=ENGINE,
            engine_mode="provisioned",  # Serverless v2 runs on provisioned clusters
            engine_version=s.engine_version,
            database_name=s.database_name,
            master_username=s.master_username,
            manage_master_user_password=True,
            storage_encrypted=True,
            deletion_protection=s.deletion_protection,
            skip_final_snapshot=False,
            final_snapshot_identifier=args.final_snapshot_identifier,
            backup_retention_period=s.backup_retention_days,
            preferred_backup_window="03:00-04:00",
            preferred_maintenance_window="sun:04:30-sun:05:30",
            copy_tags_to_snapshot=True,
            db_subnet_group_name=subnet_group.name,
            db_cluster_parameter_group_name=params.name,
            vpc_security_group_ids=[args.security_group_id],
            port=5432,
            serverlessv2_scaling_configuration=aws.rds.ClusterServerlessv2ScalingConfigurationArgs(
                min_capacity=s.min_acu, max_capacity=s.max_acu
            ),
            enabled_cloudwatch_logs_exports=["postgresql"],
            tags=self.tags(f"{name}-cluster"),
            opts=self.child_opts(),
        )
        instances = []
        for i in range(s.instance_count):
            instances.append(
                aws.rds.ClusterInstance(
                    f"{name}-instance-{i}",
                    cluster_identifier=cluster.id,
                    engine=ENGINE,
                    engine_version=cluster.engine_version,
                    instance_class=INSTANCE_CLASS,
                    db_subnet_group_name=subnet_group.name,
                    publicly_accessible=False,
                    performance_insights_enabled=True,
                    auto_minor_version_upgrade=True,
                    promotion_tier=i,
                    tags=self.tags(f"{name}-instance-{i}"),
                    opts=self.child_opts(),
                )
            )

        self.cluster_identifier = cluster.cluster_identifier
        self.endpoint = cluster.endpoint
        self.reader_endpoint = cluster.reader_endpoint
        self.port = cluster.port
        self.database_name = s.database_name
        self.max_acu = s.max_acu
        self.secret_arn = cluster.master_user_secrets.apply(_secret_arn)
        self.instance_identifiers = [inst.identifier for inst in instances]
        self.register_outputs(
            {
                "clusterIdentifier": self.cluster_identifier,
                "endpoint": self.endpoint,
                "readerEndpoint": self.reader_endpoint,
                "port": self.port,
                "databaseName": self.database_name,
                "secretArn": self.secret_arn,
            }
        )


def _secret_arn(secrets) -> str:
    if not secrets:
        raise ValueError("the Aurora cluster reports no managed master user secret")
    return secrets[0].secret_arn
