"""Cache: Redis replication group, multi-AZ, encrypted at rest and in transit, AUTH."""

from __future__ import annotations

import pytest
from cognis_infra.cache import Cache, CacheArgs, CacheSettings, validate_auth_token

from tests.infra.infra_harness import REDIS_TOKEN, is_secret, reveal, run_component

GROUP = "aws:elasticache/replicationGroup:ReplicationGroup"


@pytest.fixture(scope="module")
def group(program):
    return program.one(GROUP)


def test_redis_multi_az_with_failover(group):
    assert group["engine"] == "redis"
    assert group["engineVersion"] == "7.1"
    assert group["nodeType"] == "cache.t4g.medium"
    assert group["numCacheClusters"] == 2
    assert group["multiAzEnabled"] is True
    assert group["automaticFailoverEnabled"] is True
    assert group["port"] == 6379


def test_encrypted_at_rest_and_in_transit(group):
    assert group["atRestEncryptionEnabled"] is True
    assert group["transitEncryptionEnabled"] is True
    assert group["transitEncryptionMode"] == "required"


def test_auth_token_is_a_secret_from_config(program, group):
    assert is_secret(group["authToken"]) and reveal(group["authToken"]) == REDIS_TOKEN
    assert group["authTokenUpdateStrategy"] == "ROTATE"
    version = next(
        v for v in program.of_type("aws:secretsmanager/secretVersion:SecretVersion") if v.name == "cache-auth"
    )
    assert is_secret(version["secretString"]) and reveal(version["secretString"]) == REDIS_TOKEN
    secret = next(s for s in program.of_type("aws:secretsmanager/secret:Secret") if s.name == "cache-auth")
    assert version["secretId"] == secret.id


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


@pytest.mark.parametrize(
    "token", ["short", "x" * 129, "has@sign-0123456789", "has/slash-0123456789", 'quote"0123456789abc']
)
def test_bad_auth_tokens_are_rejected(token):
    with pytest.raises(ValueError):
        validate_auth_token(token)


def test_settings_need_a_replica():
    with pytest.raises(ValueError, match="at least 2"):
        CacheSettings(node_count=1)


def test_component_url_uses_tls_scheme():
    def build():
        cache = Cache(
            "c",
            CacheArgs(
                settings=CacheSettings(),
                subnet_ids=["subnet-1", "subnet-2"],
                security_group_id="sg-1",
                auth_token="0123456789abcdef0123",
                log_kms_key_arn="arn:aws:kms:k",
            ),
        )
        return {"url": cache.url, "secret": cache.auth_secret_arn}

    _, out = run_component(build)
    assert out["url"] == "rediss://master.c-redis-a1b2c3d.abcdef.euw1.cache.amazonaws.com:6379/0"
    assert out["secret"].startswith("arn:aws:secretsmanager:")
