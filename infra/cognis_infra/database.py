"""Database: Aurora PostgreSQL Serverless v2, the system of record (pgvector).

* 2 ``db.serverless`` instances in different AZs (writer + reader for failover),
  scaling between 0.5 and 16 ACU by default;
* the engine is a major-version line (``"17"`` by default; ``"16"`` or a full ``"17.x"``
  also work): Aurora picks that line's default minor version, and the service refuses to
  start on pgvector older than 0.8 (its migration runs ``ALTER EXTENSION vector UPDATE`` first);
* storage encrypted, deletion protection on, the cluster ``protect``-ed in Pulumi, a final
  snapshot on delete, 7 days of automated backups, PostgreSQL logs exported to a log group
  the stack creates (retention, the stack's KMS key);
* the master password is generated and rotated by RDS in Secrets Manager
  (``manage_master_user_password``); the migration task (service.py, its own role) signs in
  with it, creates the application role ``cognis_app`` and grants it data privileges only; the
  API tasks sign in as that role with IAM authentication tokens
  (``iam_database_authentication_enabled``) and cannot read the master secret;
* a cluster parameter group that forces TLS (``rds.force_ssl = 1``) and logs slow
  statements without their bind parameters (``log_parameter_max_length = 0``: no memory text in
  CloudWatch);
* a major version change of a running cluster is refused before anything is touched unless
  ``cognis:auroraAllowMajorVersionUpgrade`` is set for that update (``check_engine_change``).

The pgvector schema (``CREATE EXTENSION vector``, tables, HNSW indexes) is applied by the
migration task in every ``pulumi up`` that changes the image: there is no manual step and no bastion.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from .base import CognisComponent

ENGINE = "aurora-postgresql"
INSTANCE_CLASS = "db.serverless"
#: Major versions whose current minors the stack supports (pgvector >= 0.8; see docs/deploy.md).
SUPPORTED_MAJORS: tuple[str, ...] = ("16", "17")
#: The application role the service's pool signs in as (created by the migration).
APP_USER = "cognis_app"


@dataclass(frozen=True)
class DatabaseSettings:
    """Sizing and safety of the Aurora cluster (stack config)."""

    engine_version: str = "17"
    min_acu: float = 0.5
    max_acu: float = 16.0
    instance_count: int = 2
    backup_retention_days: int = 7
    database_name: str = "cognis"
    master_username: str = "cognis_admin"
    app_user: str = APP_USER
    deletion_protection: bool = True
    slow_statement_ms: int = 1000
    log_retention_days: int = 30
    #: Let this update move the running cluster to another major version (docs/deploy.md, "Aurora major
    #: version upgrade"); without it the program refuses a major change before anything is touched.
    allow_major_version_upgrade: bool = False

    def __post_init__(self) -> None:
        if not re.fullmatch(r"\d+(\.\d+)?", self.engine_version) or self.major_version not in SUPPORTED_MAJORS:
            raise ValueError(
                f"cognis:auroraEngineVersion must be a PostgreSQL {' or '.join(SUPPORTED_MAJORS)} line or version "
                f'(e.g. "17" or "17.5"), got {self.engine_version!r}'
            )
        if not 0 <= self.min_acu <= self.max_acu <= 256:
            raise ValueError("Aurora capacity must satisfy 0 <= cognis:auroraMinAcu <= cognis:auroraMaxAcu <= 256")
        if self.instance_count < 1:
            raise ValueError("cognis:auroraInstances must be at least 1")
        if not 1 <= self.backup_retention_days <= 35:
            raise ValueError("cognis:auroraBackupRetentionDays must be 1..35")

    @property
    def major_version(self) -> str:
        return self.engine_version.split(".")[0]

    @property
    def parameter_group_family(self) -> str:
        return f"aurora-postgresql{self.major_version}"


@dataclass
class DatabaseArgs:
    settings: DatabaseSettings
    subnet_ids: Sequence[pulumi.Input[str]]
    security_group_id: pulumi.Input[str]
    #: Cluster identifier (carries the stack name).
    cluster_identifier: str
    final_snapshot_identifier: str
    log_kms_key_arn: pulumi.Input[str]
    protect: bool = True
    tags: Mapping[str, str] = field(default_factory=dict)


#: Slow statements are logged with their text only: PostgreSQL writes a statement's bind parameters (the
#: memory text the service sends) next to it unless log_parameter_max_length is 0, and those lines are
#: exported to CloudWatch. The statement text itself carries only placeholders ($1, $2, ...).
LOG_PARAMETERS: dict[str, str] = {"log_parameter_max_length": "0", "log_parameter_max_length_on_error": "0"}

UPGRADE_PROCEDURE = "docs/deploy.md, 'Aurora major version upgrade'"


def check_engine_change(settings: DatabaseSettings, running_version: str | None, cluster_identifier: str) -> None:
    """Refuse a configured major version other than the running cluster's, unless the upgrade is allowed;
    never a downgrade. ``running_version`` is None for a cluster that does not exist yet."""
    if not running_version:
        return
    running, wanted = int(running_version.split(".")[0]), int(settings.major_version)
    if wanted < running:
        raise ValueError(
            f"cognis:auroraEngineVersion {settings.engine_version!r} is older than the running cluster "
            f"{cluster_identifier} ({running_version}); Aurora cannot downgrade a major version"
        )
    if wanted > running and not settings.allow_major_version_upgrade:
        raise ValueError(
            f"cognis:auroraEngineVersion {settings.engine_version!r} would upgrade the running cluster "
            f"{cluster_identifier} from {running_version} to another major version; Aurora refuses that without "
            f"AllowMajorVersionUpgrade. Follow {UPGRADE_PROCEDURE} (snapshot, pgvector on the new line, "
            "cognis:auroraAllowMajorVersionUpgrade true for that one update)"
        )


def running_engine_version(cluster_identifier: str) -> str | None:
    """The engine version of the stack's cluster if it exists (provider look-ups: no error when absent)."""
    found = aws.rds.get_clusters(filters=[{"name": "db-cluster-id", "values": [cluster_identifier]}])
    if cluster_identifier not in (found.cluster_identifiers or []):
        return None
    return aws.rds.get_cluster(cluster_identifier=cluster_identifier).engine_version


def postgresql_log_group(cluster_identifier: str) -> str:
    """The log group RDS exports an Aurora PostgreSQL cluster's ``postgresql`` log to."""
    return f"/aws/rds/cluster/{cluster_identifier}/postgresql"


class Database(CognisComponent):
    """An Aurora PostgreSQL Serverless v2 cluster with two instances."""

    cluster_identifier: pulumi.Output[str]
    cluster_resource_id: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    reader_endpoint: pulumi.Output[str]
    port: pulumi.Output[int]
    database_name: str
    app_user: str
    secret_arn: pulumi.Output[str]
    max_acu: float

    def __init__(self, name: str, args: DatabaseArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("cognis:database:Database", name, args.tags, opts)
        s = args.settings
        check_engine_change(s, running_engine_version(args.cluster_identifier), args.cluster_identifier)

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
            description="cognis-memory: TLS only, slow statement log without parameters",
            parameters=[
                aws.rds.ClusterParameterGroupParameterArgs(name="rds.force_ssl", value="1"),
                aws.rds.ClusterParameterGroupParameterArgs(
                    name="log_min_duration_statement", value=str(s.slow_statement_ms)
                ),
                *(aws.rds.ClusterParameterGroupParameterArgs(name=k, value=v) for k, v in LOG_PARAMETERS.items()),
            ],
            tags=self.tags(f"{name}-params"),
            opts=self.child_opts(),
        )
        # Created before the cluster so RDS writes into a group with retention and the stack's key.
        logs = self.log_group(
            f"{name}-postgresql-log",
            retention_days=s.log_retention_days,
            kms_key_arn=args.log_kms_key_arn,
            physical_name=postgresql_log_group(args.cluster_identifier),
        )
        cluster = aws.rds.Cluster(
            f"{name}-cluster",
            cluster_identifier=args.cluster_identifier,
            engine=ENGINE,
            engine_mode="provisioned",  # Serverless v2 runs on provisioned clusters
            engine_version=s.engine_version,
            allow_major_version_upgrade=s.allow_major_version_upgrade,
            database_name=s.database_name,
            master_username=s.master_username,
            manage_master_user_password=True,
            iam_database_authentication_enabled=True,
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
            tags=self.tags(args.cluster_identifier),
            opts=self.child_opts(protect=args.protect, depends_on=[logs]),
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
        self.cluster_resource_id = cluster.cluster_resource_id
        self.endpoint = cluster.endpoint
        self.reader_endpoint = cluster.reader_endpoint
        self.port = cluster.port
        self.database_name = s.database_name
        self.app_user = s.app_user
        self.max_acu = s.max_acu
        self.secret_arn = cluster.master_user_secrets.apply(_secret_arn)
        self.log_group_name = logs.name
        self.instance_identifiers = [inst.identifier for inst in instances]
        #: The instances: a cluster accepts connections only once one is available (the service waits for them).
        self.instances = instances
        self.register_outputs(
            {
                "clusterIdentifier": self.cluster_identifier,
                "clusterResourceId": self.cluster_resource_id,
                "endpoint": self.endpoint,
                "readerEndpoint": self.reader_endpoint,
                "port": self.port,
                "databaseName": self.database_name,
                "appUser": self.app_user,
                "secretArn": self.secret_arn,
            }
        )


def _secret_arn(secrets) -> str:
    if not secrets:
        raise ValueError("the Aurora cluster reports no managed master user secret")
    return secrets[0].secret_arn
