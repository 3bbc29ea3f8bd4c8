"""Building stores and caches from Settings: Secrets Manager credentials (moto), SigV4 signing,
and a dual store built from settings working end to end on the real servers."""

from __future__ import annotations

import asyncio
import json

import boto3
import pytest
import requests
from cognis_dev.databases import create_database
from moto import mock_aws
from opensearchpy import AWSV4SignerAuth, RequestsHttpConnection
from psycopg.conninfo import conninfo_to_dict

from cognis_memory.caching.redis_cache import RedisCache
from cognis_memory.caching.result_cache import NullCache
from cognis_memory.config import Settings
from cognis_memory.domain import Owner
from cognis_memory.search_filter import SearchFilter
from cognis_memory.stores.connections import opensearch_client, postgres_dsn
from cognis_memory.stores.dual import DualStore
from cognis_memory.stores.opensearch import OpenSearchStore
from cognis_memory.stores.settings import OpenSearchSettings, PostgresSettings
from cognis_memory.wiring import build_cache, build_store
from tests.stores.helpers import DIM, DIM_SHORT, make_memory, new_owner, new_prefix


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
                 "AWS_DEFAULT_REGION": "eu-west-1"}.items():  # fmt: skip
        monkeypatch.setenv(k, v)


def test_dsn_from_host_and_secrets_manager(aws_env: None) -> None:
    with mock_aws():
        sm = boto3.client("secretsmanager", region_name="eu-west-1")
        arn = sm.create_secret(
            Name="aurora-master", SecretString=json.dumps({"username": "cognis", "password": "p@ss:w/rd"})
        )["ARN"]
        settings = Settings(store="dual", postgres_host="db.internal", postgres_port=5433, postgres_db="mem",
                            postgres_secret_arn=arn, postgres_sslmode="require", opensearch_url="https://search:443",
                            aws_region="eu-west-1")  # fmt: skip
        params = conninfo_to_dict(postgres_dsn(settings.postgres, aws_region=settings.aws_region)())
        assert params == {"host": "db.internal", "port": "5433", "dbname": "mem", "user": "cognis",
                          "password": "p@ss:w/rd", "sslmode": "require"}  # fmt: skip
        store = build_store(settings, dim=DIM, dim_short=DIM_SHORT).backend
        assert isinstance(store, DualStore) and conninfo_to_dict(store.pg._conninfo())["password"] == "p@ss:w/rd"

        bad = sm.create_secret(Name="not-json", SecretString="just a string")["ARN"]
        with pytest.raises(ValueError, match="postgres_secret_arn"):
            postgres_dsn(PostgresSettings(postgres_host="h", postgres_secret_arn=bad), aws_region="eu-west-1")()
        partial = sm.create_secret(Name="no-password", SecretString=json.dumps({"username": "u"}))["ARN"]
        with pytest.raises(ValueError, match="password"):
            postgres_dsn(PostgresSettings(postgres_host="h", postgres_secret_arn=partial), aws_region="eu-west-1")()


def test_rotated_secret_is_picked_up_after_the_refresh_interval(aws_env: None) -> None:
    from cognis_memory.stores.connections import SECRET_REFRESH_S, SecretDsn

    now = [1000.0]
    with mock_aws():
        sm = boto3.client("secretsmanager", region_name="eu-west-1")
        arn = sm.create_secret(Name="rotating", SecretString=json.dumps({"username": "u", "password": "one"}))["ARN"]
        dsn = SecretDsn(PostgresSettings(postgres_host="h", postgres_secret_arn=arn), aws_region="eu-west-1",
                        clock=lambda: now[0])  # fmt: skip
        assert conninfo_to_dict(dsn())["password"] == "one"
        sm.put_secret_value(SecretId=arn, SecretString=json.dumps({"username": "u", "password": "two"}))
        now[0] += SECRET_REFRESH_S / 2
        assert conninfo_to_dict(dsn())["password"] == "one"  # cached
        now[0] += SECRET_REFRESH_S
        assert conninfo_to_dict(dsn())["password"] == "two"  # re-read after the interval


def test_missing_settings_are_explained() -> None:
    with pytest.raises(ValueError, match="COGNIS_POSTGRES_DSN"):
        build_store(Settings(store="dual", opensearch_url="http://x:9200"), dim=DIM, dim_short=DIM_SHORT)
    with pytest.raises(ValueError, match="COGNIS_OPENSEARCH_URL"):
        build_store(Settings(store="opensearch"), dim=DIM, dim_short=DIM_SHORT)
    explicit = PostgresSettings(postgres_dsn="postgresql://u:secret@h/db")
    assert postgres_dsn(explicit, aws_region=None) == "postgresql://u:secret@h/db"


def test_sigv4_client_signs_for_the_es_service(aws_env: None) -> None:
    client = opensearch_client(OpenSearchSettings(opensearch_url="https://search.example:443", opensearch_auth="sigv4"),
                               store="opensearch", aws_region="eu-west-1")  # fmt: skip
    conn = client.transport.get_connection()
    assert isinstance(conn, RequestsHttpConnection) and conn.use_ssl
    auth = conn.session.auth
    assert isinstance(auth, AWSV4SignerAuth) and auth.service == "es"
    signed = auth(requests.Request("GET", "https://search.example/_search", data=b"{}").prepare())
    header = signed.headers["Authorization"]
    assert header.startswith("AWS4-HMAC-SHA256 Credential=testing/") and "/eu-west-1/es/aws4_request" in header
    assert signed.headers["X-Amz-Security-Token"] == "testing"


def test_cache_is_redis_only_when_configured() -> None:
    assert isinstance(build_cache(Settings()), NullCache)
    cache = build_cache(Settings(redis_url="redis://127.0.0.1:1/0", redis_password="pw", cache_ttl_s=42))
    assert isinstance(cache, RedisCache) and cache.ttl_s == 42


@pytest.mark.integration
async def test_settings_build_working_dual_and_opensearch_stores(postgres_server, opensearch_server, rng) -> None:
    dsn = create_database(postgres_server.dsn)
    for kind in ("dual", "opensearch"):
        settings = Settings(store=kind, postgres_dsn=dsn, opensearch_url=opensearch_server.url,
                            opensearch_index_prefix=new_prefix(), opensearch_shards=2)  # fmt: skip
        roles = build_store(settings, dim=DIM, dim_short=DIM_SHORT)
        store = roles.backend
        assert isinstance(store, DualStore if kind == "dual" else OpenSearchStore)
        if isinstance(store, OpenSearchStore):
            store.replicas, store.refresh = 0, True
        await store.open()
        try:
            o: Owner = new_owner()
            m = make_memory(o, "settings built me", rng)
            await roles.memories.insert_memories([m])
            if isinstance(store, DualStore):  # the inline or the background drain pushes it (refresh: 1 s)
                for _ in range(100):
                    if await store.outbox_size() == 0:
                        break
                    await asyncio.sleep(0.05)
                await store.keyword.refresh_now()
            assert [h.memory.id for h in await roles.keywords.keyword_search(SearchFilter(o), "settings", limit=3)] == [
                m.id
            ]
            assert all((await store.health()).values())
            # the indices it created have the configured primary shards
            index, search = (
                (store.keyword, store.keyword.alias) if isinstance(store, DualStore) else (store, store.memories)
            )
            found = await index.runner(index.client.indices.get_settings, index=search)
            assert [v["settings"]["index"]["number_of_shards"] for v in found.values()] == ["2"]
        finally:
            await store.close()


def test_the_registry_names_a_builder_for_every_store_kind_and_settings_accept_only_those() -> None:
    from cognis_memory.stores.registry import STORES

    for kind, entry in STORES.items():
        assert callable(entry.load()), kind
        assert all(name in Settings.model_fields for name in entry.sections), kind
        assert Settings(store=kind).store == kind
    with pytest.raises(ValueError, match="unknown store kind 'sqlite-vec'"):
        Settings(store="sqlite-vec")


def test_the_cli_offers_the_registered_store_kinds() -> None:
    from cognis_memory.cli import build_parser
    from cognis_memory.stores.registry import STORES

    for kind in STORES:
        assert build_parser().parse_args(["reconcile", "--store", kind]).store == kind
    with pytest.raises(SystemExit):
        build_parser().parse_args(["reconcile", "--store", "sqlite-vec"])
