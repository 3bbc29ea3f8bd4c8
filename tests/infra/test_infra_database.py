"""Database: Aurora PostgreSQL (a pgvector >= 0.8 line) Serverless v2, encrypted, protected, IAM auth."""

from __future__ import annotations

import pytest

from cognis_infra.database import Database, DatabaseArgs, DatabaseSettings
from tests.infra.infra_harness import ACCOUNT, REGION, parse_json, run_component, run_program

CLUSTER = "aws:rds/cluster:Cluster"
INSTANCE = "aws:rds/clusterInstance:ClusterInstance"


@pytest.fixture(scope="module")
def cluster(program):
    return program.one(CLUSTER)


def test_engine_is_a_major_line_with_pgvector_0_8(cluster, program):
    """A partial version lets Aurora pick the line's default minor; the family follows the major."""
    assert cluster["engine"] == "aurora-postgresql"
    assert cluster["engineMode"] == "provisioned"
    assert cluster["engineVersion"] == "17"
    assert program.one("aws:rds/clusterParameterGroup:ClusterParameterGroup")["family"] == "aurora-postgresql17"
    assert cluster["serverlessv2ScalingConfiguration"] == {"minCapacity": 0.5, "maxCapacity": 16}


def test_sixteen_and_full_versions_are_accepted():
    run = run_program({"auroraEngineVersion": "16"})
    assert run.one(CLUSTER)["engineVersion"] == "16"
    assert run.one("aws:rds/clusterParameterGroup:ClusterParameterGroup")["family"] == "aurora-postgresql16"
    assert DatabaseSettings(engine_version="17.5").parameter_group_family == "aurora-postgresql17"


@pytest.mark.parametrize("version", ["15.4", "16.x", "aurora-17", "18"])
def test_other_versions_are_refused(version):
    with pytest.raises(ValueError, match="auroraEngineVersion"):
        DatabaseSettings(engine_version=version)


def test_storage_encrypted_deletion_protected_with_final_snapshot(cluster):
    assert cluster["clusterIdentifier"] == "cognis-test-aurora"
    assert cluster["storageEncrypted"] is True
    assert cluster["deletionProtection"] is True
    assert cluster["skipFinalSnapshot"] is False
    assert cluster["finalSnapshotIdentifier"] == "cognis-test-final"
    assert cluster["backupRetentionPeriod"] == 7
    assert cluster["copyTagsToSnapshot"] is True


def test_cluster_is_protected_but_instances_are_replaceable(program, cluster):
    assert cluster.options["protect"] is True
    assert all(i.options["protect"] is False for i in program.of_type(INSTANCE))
    assert run_program({"protect": False}).one(CLUSTER).options["protect"] is False


def test_master_password_is_managed_by_rds_and_the_app_signs_in_with_iam(cluster):
    assert cluster["manageMasterUserPassword"] is True
    assert "masterPassword" not in cluster.inputs
    assert cluster["masterUsername"] == "cognis_admin"
    assert cluster["databaseName"] == "cognis"
    assert cluster["iamDatabaseAuthenticationEnabled"] is True


def test_task_connects_as_the_app_role_not_the_master_user(program, cluster):
    (container, _) = parse_json(
        program.one("aws:ecs/taskDefinition:TaskDefinition", "api-task")["containerDefinitions"]
    )
    env = {e["name"]: e["value"] for e in container["environment"]}
    assert env["COGNIS_POSTGRES_APP_USER"] == "cognis_app" and env["COGNIS_POSTGRES_IAM_AUTH"] == "true"
    task = parse_json(
        next(p for p in program.of_type("aws:iam/rolePolicy:RolePolicy") if p.name == "api-task")["policy"]
    )
    stmts = {s["Sid"]: s for s in task["Statement"]}
    resource_id = cluster.outputs["clusterResourceId"]
    assert stmts["ConnectAsAppRole"]["Action"] == ["rds-db:connect"]
    assert stmts["ConnectAsAppRole"]["Resource"] == [
        f"arn:aws:rds-db:{REGION}:{ACCOUNT}:dbuser:{resource_id}/cognis_app"
    ]


def test_parameter_group_forces_tls(program, cluster):
    params = program.one("aws:rds/clusterParameterGroup:ClusterParameterGroup")
    values = {p["name"]: p["value"] for p in params["parameters"]}
    assert values["rds.force_ssl"] == "1"
    assert cluster["dbClusterParameterGroupName"] == params.outputs["name"]


def test_postgresql_log_export_goes_to_a_group_the_stack_owns(program, cluster):
    group = next(g for g in program.of_type("aws:cloudwatch/logGroup:LogGroup") if g.name == "database-postgresql-log")
    assert group["name"] == "/aws/rds/cluster/cognis-test-aurora/postgresql"
    assert group["retentionInDays"] == 30
    assert group["kmsKeyId"] == program.one("aws:kms/key:Key").outputs["arn"]
    assert cluster["enabledCloudwatchLogsExports"] == ["postgresql"]
    assert any(group.name in dep for dep in cluster.options["dependencies"])  # exists before RDS writes


def test_cluster_sits_in_private_subnets_behind_its_security_group(program, cluster):
    subnet_group = program.one("aws:rds/subnetGroup:SubnetGroup")
    assert sorted(subnet_group["subnetIds"]) == [f"subnet-network-private-{i}" for i in range(3)]
    assert cluster["dbSubnetGroupName"] == subnet_group.outputs["name"]
    assert cluster["vpcSecurityGroupIds"] == ["sg-network-database-sg"]


def test_two_private_serverless_instances(program, cluster):
    instances = sorted(program.of_type(INSTANCE), key=lambda r: r.name)
    assert len(instances) == 2
    for tier, inst in enumerate(instances):
        assert inst["instanceClass"] == "db.serverless"
        assert inst["engine"] == "aurora-postgresql"
        assert inst["clusterIdentifier"] == cluster.id
        assert inst["publiclyAccessible"] is False
        assert inst["promotionTier"] == tier


def test_capacity_and_protection_come_from_config():
    run = run_program({"auroraMinAcu": 1, "auroraMaxAcu": 32, "auroraInstances": 3, "dbDeletionProtection": False})
    cluster = run.one(CLUSTER)
    assert cluster["serverlessv2ScalingConfiguration"] == {"minCapacity": 1, "maxCapacity": 32}
    assert cluster["deletionProtection"] is False
    assert len(run.of_type(INSTANCE)) == 3


def test_settings_validation():
    with pytest.raises(ValueError, match="capacity"):
        DatabaseSettings(min_acu=8, max_acu=4)
    with pytest.raises(ValueError, match="auroraBackupRetentionDays"):
        DatabaseSettings(backup_retention_days=0)


def test_component_exposes_the_managed_secret_arn():
    def build():
        db = Database(
            "db",
            DatabaseArgs(
                settings=DatabaseSettings(),
                subnet_ids=["subnet-1", "subnet-2"],
                security_group_id="sg-1",
                cluster_identifier="cognis-unit-aurora",
                final_snapshot_identifier="final",
                log_kms_key_arn="arn:aws:kms:k",
            ),
        )
        return {"secret": db.secret_arn, "endpoint": db.endpoint, "port": db.port}

    _, out = run_component(build)
    assert out["secret"].startswith("arn:aws:secretsmanager:") and "rds!cluster-cognis-unit-aurora" in out["secret"]
    assert out["endpoint"].startswith("cognis-unit-aurora.") and out["port"] == 5432


def test_no_statement_text_reaches_the_log(program):
    """The group logs no statement (log_min_duration_statement -1, a parameter Aurora documents) and sets no
    parameter Aurora's parameter pages do not list (log_parameter_max_length*, fact 67)."""
    params = program.one("aws:rds/clusterParameterGroup:ClusterParameterGroup")
    values = {p["name"]: p["value"] for p in params["parameters"]}
    assert values == {"rds.force_ssl": "1", "log_min_duration_statement": "-1"}


def test_slow_statement_logging_comes_only_with_the_bind_parameter_settings():
    from cognis_infra.database import LOG_PARAMETERS, log_parameters

    assert log_parameters(-1) == {"log_min_duration_statement": "-1"}
    assert log_parameters(1000) == {"log_min_duration_statement": "1000", **LOG_PARAMETERS}


def test_a_major_upgrade_of_a_running_cluster_is_refused_without_the_flag():
    running = {"cognis-test-aurora": "16.6"}
    with pytest.raises(Exception, match="auroraEngineVersion '17' would upgrade the running cluster"):
        run_program(running_clusters=running)
    with pytest.raises(Exception, match="cannot downgrade"):
        run_program({"auroraEngineVersion": "16"}, running_clusters={"cognis-test-aurora": "17.5"})
    same = run_program({"auroraEngineVersion": "16"}, running_clusters=running)  # a minor change is no upgrade
    assert same.one(CLUSTER)["allowMajorVersionUpgrade"] is False


def test_a_major_upgrade_is_allowed_deliberately():
    run = run_program({"auroraAllowMajorVersionUpgrade": True}, running_clusters={"cognis-test-aurora": "16.6"})
    cluster = run.one(CLUSTER)
    assert cluster["engineVersion"] == "17" and cluster["allowMajorVersionUpgrade"] is True
    # the new major line gets its own parameter group family (a new group, the cluster moves to it)
    assert run.one("aws:rds/clusterParameterGroup:ClusterParameterGroup")["family"] == "aurora-postgresql17"
    lookups = [a for t, a in run.calls if t == "aws:rds/getCluster:getCluster"]
    assert lookups == [{"clusterIdentifier": "cognis-test-aurora"}]


def _urn_names(res):
    return {d.rsplit("::", 1)[-1] for d in res.options["dependencies"]}


def test_an_engine_change_is_applied_in_the_update_before_the_migration_runs():
    """Without ApplyImmediately the new engine waits for the maintenance window (fact 60) and the migration's
    ALTER EXTENSION vector UPDATE runs on the old one. The upgrade update applies it now; the migration run
    waits for the instances, which wait for the cluster's update."""
    run = run_program({"auroraAllowMajorVersionUpgrade": True}, running_clusters={"cognis-test-aurora": "16.6"})
    cluster = run.one(CLUSTER)
    assert cluster["applyImmediately"] is True
    instances = run.of_type("aws:rds/clusterInstance:ClusterInstance")
    assert instances and all("database-cluster" in _urn_names(i) for i in instances)
    migration = [r for r in run.of_type("pulumi-python:dynamic:Resource") if r.name.endswith("-migrate")]
    assert len(migration) == 1
    assert {i.name for i in instances} <= _urn_names(migration[0])


@pytest.mark.parametrize(
    "configured, running, applies_now",
    [("17", "17.5", False), ("17.6", "17.5", True), ("17.5", "17.5", False), ("17", "16.6", True)],
)
def test_only_an_engine_change_is_applied_immediately(configured, running, applies_now):
    from cognis_infra.database import DatabaseSettings, engine_changes

    settings = DatabaseSettings(engine_version=configured, allow_major_version_upgrade=True)
    assert engine_changes(settings, running) is applies_now
    assert engine_changes(settings, None) is False  # a new cluster


def test_an_update_without_engine_change_keeps_the_maintenance_window(program):
    assert program.one(CLUSTER)["applyImmediately"] is False
    same = run_program(running_clusters={"cognis-test-aurora": "17.5"})
    assert same.one(CLUSTER)["applyImmediately"] is False


def test_a_first_deployment_looks_up_no_cluster(program):
    assert not [a for t, a in program.calls if t == "aws:rds/getCluster:getCluster"]
    assert [t for t, _ in program.calls].count("aws:rds/getClusters:getClusters") == 1
