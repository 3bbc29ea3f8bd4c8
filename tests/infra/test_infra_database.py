"""Database: Aurora PostgreSQL 16 Serverless v2, encrypted, protected, managed secret."""

from __future__ import annotations

import pytest
from cognis_infra.database import Database, DatabaseArgs, DatabaseSettings

from tests.infra.infra_harness import run_component, run_program

CLUSTER = "aws:rds/cluster:Cluster"
INSTANCE = "aws:rds/clusterInstance:ClusterInstance"


@pytest.fixture(scope="module")
def cluster(program):
    return program.one(CLUSTER)


def test_engine_is_aurora_postgresql_16_serverless_v2(cluster):
    assert cluster["engine"] == "aurora-postgresql"
    assert cluster["engineMode"] == "provisioned"
    assert cluster["engineVersion"].split(".")[0] == "16"
    assert cluster["serverlessv2ScalingConfiguration"] == {"minCapacity": 0.5, "maxCapacity": 16}


def test_storage_encrypted_deletion_protected_with_final_snapshot(cluster):
    assert cluster["storageEncrypted"] is True
    assert cluster["deletionProtection"] is True
    assert cluster["skipFinalSnapshot"] is False
    assert cluster["finalSnapshotIdentifier"] == "cognis-test-final"
    assert cluster["backupRetentionPeriod"] == 7
    assert cluster["copyTagsToSnapshot"] is True


def test_master_password_is_managed_by_rds_in_secrets_manager(cluster):
    assert cluster["manageMasterUserPassword"] is True
    assert "masterPassword" not in cluster.inputs
    assert cluster["masterUsername"] == "cognis_admin"
    assert cluster["databaseName"] == "cognis"


def test_parameter_group_forces_tls(program, cluster):
    params = program.one("aws:rds/clusterParameterGroup:ClusterParameterGroup")
    assert params["family"] == "aurora-postgresql16"
    values = {p["name"]: p["value"] for p in params["parameters"]}
    assert values["rds.force_ssl"] == "1"
    assert cluster["dbClusterParameterGroupName"] == params.outputs["name"]


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
    with pytest.raises(ValueError, match="PostgreSQL 16"):
        DatabaseSettings(engine_version="15.4")
    with pytest.raises(ValueError, match="capacity"):
        DatabaseSettings(min_acu=8, max_acu=4)


def test_component_exposes_the_managed_secret_arn():
    def build():
        db = Database(
            "db",
            DatabaseArgs(
                settings=DatabaseSettings(),
                subnet_ids=["subnet-1", "subnet-2"],
                security_group_id="sg-1",
                final_snapshot_identifier="final",
            ),
        )
        return {"secret": db.secret_arn, "endpoint": db.endpoint, "port": db.port}

    _, out = run_component(build)
    assert out["secret"].startswith("arn:aws:secretsmanager:") and "rds!cluster-db-cluster" in out["secret"]
    assert out["endpoint"].startswith("db-cluster-") and out["port"] == 5432
