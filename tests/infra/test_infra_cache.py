"""Cache: a Valkey or Redis OSS replication group, multi-AZ, encrypted at rest and in transit, AUTH."""

from __future__ import annotations

import pytest

from cognis_infra.cache import Cache, CacheArgs, CacheSettings, validate_auth_token
from tests.infra.infra_harness import CACHE_TOKEN, is_secret, parse_json, reveal, run_component, run_program

GROUP = "aws:elasticache/replicationGroup:ReplicationGroup"
SERVICE = "aws:ecs/service:Service"


@pytest.fixture(scope="module")
def group(program):
    return program.one(GROUP)


def test_multi_az_with_failover_and_a_stack_named_group(group):
    assert group["replicationGroupId"] == "cognis-test-cache"
    assert group["engine"] == "redis"
    assert group["engineVersion"] == "7.1"
    assert group["nodeType"] == "cache.t4g.medium"
    assert group["numCacheClusters"] == 2
    assert group["multiAzEnabled"] is True
    assert group["automaticFailoverEnabled"] is True
    assert group["port"] == 6379
    assert group["snapshotRetentionLimit"] >= 1


def test_encrypted_at_rest_and_in_transit(group):
    assert group["atRestEncryptionEnabled"] is True
    assert group["transitEncryptionEnabled"] is True
    assert group["transitEncryptionMode"] == "required"


def test_auth_token_is_a_secret_from_config(program, group):
    assert is_secret(group["authToken"]) and reveal(group["authToken"]) == CACHE_TOKEN
    assert group["authTokenUpdateStrategy"] == "ROTATE"
    version = next(
        v for v in program.of_type("aws:secretsmanager/secretVersion:SecretVersion") if v.name == "cache-auth"
    )
    assert is_secret(version["secretString"]) and reveal(version["secretString"]) == CACHE_TOKEN
    secret = next(s for s in program.of_type("aws:secretsmanager/secret:Secret") if s.name == "cache-auth")
    assert version["secretId"] == secret.id
    assert secret["namePrefix"] == "cognis-test/cache-auth-"


def test_rotation_is_rotate_then_set_and_redeploys_the_tasks(program):
    """Step 1: a new token with ROTATE (both tokens accepted) gets a new secret version, and the ECS
    service's trigger changes with it, so the tasks restart onto the new token in the same update.
    Step 2: SET with the same token makes ElastiCache drop the old one; the tasks are not touched."""
    new_token = "cache-Token-rotated-0123456789"
    rotate = run_program({"cacheAuthToken": new_token})
    finish = run_program({"cacheAuthToken": new_token, "cacheAuthTokenUpdateStrategy": "SET"})

    assert rotate.one(GROUP)["authTokenUpdateStrategy"] == "ROTATE"
    assert reveal(rotate.one(GROUP)["authToken"]) == new_token
    assert finish.one(GROUP)["authTokenUpdateStrategy"] == "SET"
    assert reveal(finish.one(GROUP)["authToken"]) == new_token

    def trigger(run):
        version = next(
            v for v in run.of_type("aws:secretsmanager/secretVersion:SecretVersion") if v.name == "cache-auth"
        )
        service = run.one(SERVICE)
        assert service["forceNewDeployment"] is True
        assert service["triggers"]["cacheAuthSecretVersion"] == version.outputs["versionId"]
        return service["triggers"]["cacheAuthSecretVersion"]

    assert trigger(program) != trigger(rotate) == trigger(finish)


def test_valkey_is_selectable():
    run = run_program({"cacheEngine": "valkey"})
    group = run.one(GROUP)
    assert (group["engine"], group["engineVersion"]) == ("valkey", "8.0")
    assert run_program({"cacheEngine": "valkey", "cacheEngineVersion": "7.2"}).one(GROUP)["engineVersion"] == "7.2"


def test_one_node_runs_without_failover():
    group = run_program({"cacheNodes": 1, "cacheNodeType": "cache.t4g.micro"}).one(GROUP)
    assert group["numCacheClusters"] == 1
    assert group["automaticFailoverEnabled"] is False and group["multiAzEnabled"] is False


def test_private_placement_and_security_group(program, group):
    subnets = program.one("aws:elasticache/subnetGroup:SubnetGroup")
    assert sorted(subnets["subnetIds"]) == [f"subnet-network-private-{i}" for i in range(3)]
    assert group["subnetGroupName"] == subnets.outputs["name"]
    assert group["securityGroupIds"] == ["sg-network-cache-sg"]


def test_slow_log_is_delivered_to_an_encrypted_group(program, group):
    (delivery,) = group["logDeliveryConfigurations"]
    assert delivery["logType"] == "slow-log" and delivery["destinationType"] == "cloudwatch-logs"
    log_group = next(
        g for g in program.of_type("aws:cloudwatch/logGroup:LogGroup") if g.outputs["name"] == delivery["destination"]
    )
    assert log_group["kmsKeyId"] == program.one("aws:kms/key:Key").outputs["arn"]


def test_task_reads_the_token_secret(program):
    (container, _) = parse_json(
        program.one("aws:ecs/taskDefinition:TaskDefinition", "api-task")["containerDefinitions"]
    )
    secrets = {s["name"]: s["valueFrom"] for s in container["secrets"]}
    secret = next(s for s in program.of_type("aws:secretsmanager/secret:Secret") if s.name == "cache-auth")
    assert secrets["COGNIS_REDIS_PASSWORD"] == secret.outputs["arn"]


@pytest.mark.parametrize(
    "token", ["short", "x" * 129, "has@sign-0123456789", "has/slash-0123456789", 'quote"0123456789abc']
)
def test_bad_auth_tokens_are_rejected(token):
    with pytest.raises(ValueError, match="cacheAuthToken"):
        validate_auth_token(token)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"node_count": 0}, "cacheNodes"),
        ({"engine": "memcached"}, "cacheEngine"),
        ({"auth_token_update_strategy": "DELETE"}, "ROTATE or SET"),
        ({"node_type": "t4g.micro"}, "cacheNodeType"),
    ],
)
def test_settings_validation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CacheSettings(**kwargs)


def test_component_url_uses_tls_scheme():
    def build():
        cache = Cache(
            "c",
            CacheArgs(
                settings=CacheSettings(),
                subnet_ids=["subnet-1", "subnet-2"],
                security_group_id="sg-1",
                group_id="cognis-unit-cache",
                auth_token="0123456789abcdef0123",
                log_kms_key_arn="arn:aws:kms:k",
                secret_name_prefix="cognis-unit/cache-auth-",
            ),
        )
        return {"url": cache.url, "secret": cache.auth_secret_arn}

    _, out = run_component(build)
    assert out["url"] == "rediss://master.cognis-unit-cache.abcdef.euw1.cache.amazonaws.com:6379/0"
    assert out["secret"].startswith("arn:aws:secretsmanager:")
