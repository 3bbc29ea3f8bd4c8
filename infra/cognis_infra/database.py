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
* a cluster parameter group that forces TLS (``rds.force_ssl = 1``) and logs no statements
  (``log_min_duration_statement = -1``): a logged statement carries its bind parameters, the memory
  text, unless ``log_parameter_max_length`` is 0, which Aurora's documentation does not list as a
  parameter it accepts (docs/deploy.md fact 67);
* a major version change of a running cluster is refused before anything is touched unless
  ``cognis:auroraAllowMajorVersionUpgrade`` is set for that update (``check_engine_change``); an
  update that changes the engine version applies it immediately (``engine_changes``), so the
  migration that follows runs on the new engine.

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
    #: Log statements slower than this, ms; -1 (the default) logs none. A value >= 0 also sets LOG_PARAMETERS,
    #: which Aurora's documentation does not list (fact 67): an update that Aurora refuses fails naming them.
    slow_statement_ms: int = -1
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


#: What a group that logs statements must also set so that no bind parameter (the memory text the service
#: sends) is written next to a statement: PostgreSQL writes them unless log_parameter_max_length is 0.
LOG_PARAMETERS: dict[str, str] = {"log_parameter_max_length": "0", "log_parameter_max_length_on_error": "0"}


def log_parameters(slow_statement_ms: int) -> dict[str, str]:
    """The parameter group's logging parameters: no statement logged by default (-1); slow statements, when
    asked for, only with LOG_PARAMETERS."""
    if slow_statement_ms < 0:
        return {"log_min_duration_statement": "-1"}
    return {"log_min_duration_statement": str(slow_statement_ms), **LOG_PARAMETERS}


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


def engine_changes(settings: DatabaseSettings, running_version: str | None) -> bool:
    """Whether this update moves the running cluster to another engine version: another major line, or a
    full version (``"17.6"``) other than the running one. A bare major line (``"17"``) on that line is no
    change: Aurora applies its minors in the maintenance window."""
    if not running_version:
        return False
    if settings.major_version != running_version.split(".")[0]:
        return True
    return "." in settings.engine_version and settings.engine_version != running_version


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
        running = running_engine_version(args.cluster_identifier)
        check_engine_change(s, running, args.cluster_identifier)

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
            # (the description is kept as created: changing it replaces the group)
            description="cognis-memory: TLS only, slow statement log without parameters",
            parameters=[
                aws.rds.ClusterParameterGroupParameterArgs(name="rds.force_ssl", value="1"),
                *(
                    aws.rds.ClusterParameterGroupParameterArgs(name=k, value=v)
                    for k, v in log_parameters(s.slow_statement_ms).items()
                ),
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
            # An engine change waits for the maintenance window unless applied immediately (fact 60). Applied
            # now, the provider waits until no modification is pending, so the instances, and the migration
            # run that waits for them, see the new engine: ALTER EXTENSION vector UPDATE runs on it. Only
            # for that update: other changes keep their usual timing.
            apply_immediately=engine_changes(s, running),
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
