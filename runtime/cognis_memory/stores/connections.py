"""How the server-backed stores reach their servers, from :class:`~cognis_memory.config.Settings`.

* PostgreSQL (the dual store): the DSN from ``postgres_dsn``, or from ``postgres_host``/``postgres_port``/
  ``postgres_db`` plus the ``{username, password}`` of the Secrets Manager secret ``postgres_secret_arn``
  (:func:`postgres_dsn`). With ``postgres_app_user`` those credentials only migrate: the pool signs in as that
  role (:func:`postgres_app_dsn`, with an RDS IAM token when ``postgres_iam_auth``), which the migration
  creates with data privileges only. TLS as ``postgres_sslmode``/``postgres_sslrootcert``.
* OpenSearch (the dual and OpenSearch-only stores): :func:`opensearch_client` over ``opensearch_url``;
  ``opensearch_auth="sigv4"`` signs requests with the ambient AWS credentials (service ``es``).

Nothing here connects when imported or called: the clients and DSN providers are used by the stores' ``open()``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..config import Settings

if TYPE_CHECKING:
    from opensearchpy import OpenSearch


def _tls_params(settings: Settings) -> dict[str, Any]:
    """sslmode and, when given, the CA file libpq verifies the server certificate with."""
    params: dict[str, Any] = {"sslmode": settings.postgres.sslmode}
    if settings.postgres.sslrootcert:
        params["sslrootcert"] = settings.postgres.sslrootcert
    return params


def postgres_dsn(settings: Settings) -> str | Callable[[], str]:
    """The libpq DSN: ``postgres_dsn`` as given, or a provider built from the host settings and
    the Secrets Manager secret. The provider re-reads the secret at most every
    ``SECRET_REFRESH_S`` seconds, so new connections pick up a rotated password (Aurora's managed
    master secret rotates every 7 days by default) without a restart."""
    if settings.postgres.dsn is not None:
        return settings.postgres.dsn.get_secret_value()
    if not settings.postgres.host or not settings.postgres.secret_arn:
        raise ValueError(
            "postgres_dsn: store 'dual' needs COGNIS_POSTGRES_DSN, or COGNIS_POSTGRES_HOST with "
            "COGNIS_POSTGRES_SECRET_ARN (a Secrets Manager secret holding {username, password})"
        )
    return SecretDsn(settings)


def postgres_app_dsn(settings: Settings) -> AppRoleDsn | None:
    """DSN provider of the least-privilege application role, or None without ``postgres_app_user``."""
    if settings.postgres.app_user is None:
        if settings.postgres.iam_auth:
            raise ValueError("postgres_iam_auth: IAM authentication needs COGNIS_POSTGRES_APP_USER")
        return None
    return AppRoleDsn(settings)


class AppRoleDsn:
    """Callable DSN of ``postgres_app_user``: the owner's host, port, database and sslmode, the role as
    user, and as password a fresh RDS IAM token (``postgres_iam_auth``; tokens live 15 minutes and
    are only checked when a connection opens) or none (``.pgpass``, ``PGPASSWORD`` or trust)."""

    def __init__(self, settings: Settings) -> None:
        from psycopg.conninfo import conninfo_to_dict

        if settings.postgres.dsn is not None:
            params = conninfo_to_dict(settings.postgres.dsn.get_secret_value())
            params.pop("user", None)
            params.pop("password", None)
        elif settings.postgres.host:
            params = {
                "host": settings.postgres.host,
                "port": settings.postgres.port,
                "dbname": settings.postgres.db,
                **_tls_params(settings),
            }
        else:
            raise ValueError("postgres_app_user: needs COGNIS_POSTGRES_HOST or COGNIS_POSTGRES_DSN")
        self.user = str(settings.postgres.app_user)
        self._params = params
        self._token: Callable[[], str] | None = None
        if settings.postgres.iam_auth:
            if not params.get("host") or not settings.aws_region:
                raise ValueError("postgres_iam_auth: needs a PostgreSQL host and COGNIS_AWS_REGION")
            self._token = RdsIamToken(
                str(params["host"]), int(params.get("port") or 5432), self.user, settings.aws_region
            )

    def __call__(self) -> str:
        from psycopg.conninfo import make_conninfo

        params = {**self._params, "user": self.user}
        if self._token is not None:
            params["password"] = self._token()
        return make_conninfo("", **params)


class RdsIamToken:
    """RDS IAM authentication tokens for one host, port and user (signed locally with SigV4)."""

    def __init__(self, host: str, port: int, user: str, region: str) -> None:
        self.host, self.port, self.user, self.region = host, port, user, region
        self._client: Any = None
        self._lock = threading.Lock()

    def __call__(self) -> str:
        with self._lock:
            if self._client is None:
                import boto3

                self._client = boto3.client("rds", region_name=self.region)
        return self._client.generate_db_auth_token(
            DBHostname=self.host, Port=self.port, DBUsername=self.user, Region=self.region
        )


#: How long a DSN built from a Secrets Manager secret is reused before the secret is read again.
SECRET_REFRESH_S = 60.0


class SecretDsn:
    """Callable DSN provider backed by a Secrets Manager secret (cached for ``SECRET_REFRESH_S``)."""

    def __init__(self, settings: Settings, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings, self._clock = settings, clock
        self._dsn: str | None = None
        self._read_at = 0.0
        self._lock = threading.Lock()

    def __call__(self) -> str:
        from psycopg.conninfo import make_conninfo

        with self._lock:
            if self._dsn is None or self._clock() - self._read_at >= SECRET_REFRESH_S:
                s = self.settings
                assert s.postgres.secret_arn is not None
                secret = read_db_secret(s.postgres.secret_arn, region=s.aws_region)
                self._dsn = make_conninfo(
                    host=s.postgres.host,
                    port=s.postgres.port,
                    dbname=s.postgres.db,
                    user=secret["username"],
                    password=secret["password"],
                    **_tls_params(s),
                )
                self._read_at = self._clock()
            return self._dsn


def read_db_secret(secret_arn: str, *, region: str | None = None) -> dict[str, Any]:
    """``{username, password, ...}`` of a Secrets Manager secret (e.g. Aurora's managed master secret)."""
    import boto3

    client = boto3.client("secretsmanager", region_name=region) if region else boto3.client("secretsmanager")
    raw = client.get_secret_value(SecretId=secret_arn)
    try:
        value = json.loads(raw["SecretString"])
    except (KeyError, TypeError, json.JSONDecodeError) as e:
        raise ValueError(f"postgres_secret_arn: secret {secret_arn} is not a JSON object") from e
    if not isinstance(value, dict) or not value.get("username") or not value.get("password"):
        raise ValueError(f"postgres_secret_arn: secret {secret_arn} lacks 'username' and 'password'")
    return value


def opensearch_client(settings: Settings) -> OpenSearch:
    """A synchronous OpenSearch client for ``opensearch_url`` (SigV4-signed when ``opensearch_auth='sigv4'``)."""
    from opensearchpy import OpenSearch

    if not settings.opensearch.url:
        raise ValueError(f"opensearch_url: store {settings.store!r} needs COGNIS_OPENSEARCH_URL")
    url = settings.opensearch.url
    kwargs: dict[str, Any] = {
        "hosts": [url],
        "use_ssl": url.startswith("https://"),
        "verify_certs": url.startswith("https://"),
        "timeout": settings.opensearch.timeout_s,
        "max_retries": 1,
        "retry_on_timeout": False,
        "pool_maxsize": 16,
    }
    if settings.opensearch.ca_certs:
        kwargs["ca_certs"] = settings.opensearch.ca_certs
    if settings.opensearch.auth == "sigv4":
        import boto3
        from opensearchpy import AWSV4SignerAuth, RequestsHttpConnection

        session = boto3.Session(region_name=settings.aws_region) if settings.aws_region else boto3.Session()
        region = settings.aws_region or session.region_name
        credentials = session.get_credentials()
        if not region or credentials is None:
            raise ValueError("opensearch_auth: sigv4 needs an AWS region (COGNIS_AWS_REGION) and AWS credentials")
        kwargs["http_auth"] = AWSV4SignerAuth(credentials, region, "es")
        kwargs["connection_class"] = RequestsHttpConnection
    return OpenSearch(**kwargs)
