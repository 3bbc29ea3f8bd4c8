"""How the server-backed stores reach their servers, from their settings (:mod:`.settings`).

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

from ..errors import SettingError
from .settings import OpenSearchSettings, PostgresSettings

if TYPE_CHECKING:
    from opensearchpy import OpenSearch


def _tls_params(settings: PostgresSettings) -> dict[str, Any]:
    """sslmode and, when given, the CA file libpq verifies the server certificate with."""
    params: dict[str, Any] = {"sslmode": settings.sslmode}
    if settings.sslrootcert:
        params["sslrootcert"] = settings.sslrootcert
    return params


def postgres_dsn(settings: PostgresSettings, *, aws_region: str | None) -> str | Callable[[], str]:
    """The libpq DSN: ``postgres_dsn`` as given, or a provider built from the host settings and
    the Secrets Manager secret. The provider re-reads the secret at most every
    ``SECRET_REFRESH_S`` seconds, so new connections pick up a rotated password (Aurora's managed
    master secret rotates every 7 days by default) without a restart. ``aws_region``: Secrets Manager's."""
    if settings.dsn is not None:
        return settings.dsn.get_secret_value()
    if not settings.host or not settings.secret_arn:
        raise SettingError(
            "postgres_dsn",
            "store 'dual' needs COGNIS_POSTGRES_DSN, or COGNIS_POSTGRES_HOST with "
            "COGNIS_POSTGRES_SECRET_ARN (a Secrets Manager secret holding {username, password})",
        )
    return SecretDsn(settings, aws_region=aws_region)


def postgres_app_dsn(settings: PostgresSettings, *, aws_region: str | None) -> AppRoleDsn | None:
    """DSN provider of the least-privilege application role, or None without ``postgres_app_user``."""
    if settings.app_user is None:
        if settings.iam_auth:
            raise SettingError("postgres_iam_auth", "IAM authentication needs COGNIS_POSTGRES_APP_USER")
        return None
    return AppRoleDsn(settings, aws_region=aws_region)


class AppRoleDsn:
    """Callable DSN of ``postgres_app_user``: the owner's host, port, database and sslmode, the role as
    user, and as password a fresh RDS IAM token (``postgres_iam_auth``; tokens live 15 minutes and
    are only checked when a connection opens) or none (``.pgpass``, ``PGPASSWORD`` or trust).
    ``aws_region``: the region the tokens are signed for."""

    def __init__(self, settings: PostgresSettings, *, aws_region: str | None) -> None:
        from psycopg.conninfo import conninfo_to_dict

        if settings.dsn is not None:
            params = conninfo_to_dict(settings.dsn.get_secret_value())
            params.pop("user", None)
            params.pop("password", None)
        elif settings.host:
            params = {
                "host": settings.host,
                "port": settings.port,
                "dbname": settings.db,
                **_tls_params(settings),
            }
        else:
            raise SettingError("postgres_app_user", "needs COGNIS_POSTGRES_HOST or COGNIS_POSTGRES_DSN")
        self.user = str(settings.app_user)
        self._params = params
        self._token: Callable[[], str] | None = None
        if settings.iam_auth:
            if not params.get("host") or not aws_region:
                raise SettingError("postgres_iam_auth", "needs a PostgreSQL host and COGNIS_AWS_REGION")
            self._token = RdsIamToken(str(params["host"]), int(params.get("port") or 5432), self.user, aws_region)

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
    """Callable DSN provider backed by a Secrets Manager secret (cached for ``SECRET_REFRESH_S``) in
    ``aws_region`` (None: the ambient region)."""

    def __init__(
        self, settings: PostgresSettings, *, aws_region: str | None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.settings, self.aws_region, self._clock = settings, aws_region, clock
        self._dsn: str | None = None
        self._read_at = 0.0
        self._lock = threading.Lock()

    def __call__(self) -> str:
        from psycopg.conninfo import make_conninfo

        with self._lock:
            if self._dsn is None or self._clock() - self._read_at >= SECRET_REFRESH_S:
                s = self.settings
                assert s.secret_arn is not None
                secret = read_db_secret(s.secret_arn, region=self.aws_region)
                self._dsn = make_conninfo(
                    host=s.host,
                    port=s.port,
                    dbname=s.db,
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
        raise SettingError("postgres_secret_arn", f"secret {secret_arn} is not a JSON object") from e
    if not isinstance(value, dict) or not value.get("username") or not value.get("password"):
        raise SettingError("postgres_secret_arn", f"secret {secret_arn} lacks 'username' and 'password'")
    return value


def opensearch_client(settings: OpenSearchSettings, *, store: str, aws_region: str | None) -> OpenSearch:
    """A synchronous OpenSearch client for ``opensearch_url`` (SigV4-signed in ``aws_region``, else the ambient
    region, when ``opensearch_auth='sigv4'``); ``store`` names the store kind that needs it."""
    from opensearchpy import OpenSearch

    if not settings.url:
        raise SettingError("opensearch_url", f"store {store!r} needs COGNIS_OPENSEARCH_URL")
    url = settings.url
    kwargs: dict[str, Any] = {
        "hosts": [url],
        "use_ssl": url.startswith("https://"),
        "verify_certs": url.startswith("https://"),
        "timeout": settings.timeout_s,
        "max_retries": 1,
        "retry_on_timeout": False,
        "pool_maxsize": 16,
    }
    if settings.ca_certs:
        kwargs["ca_certs"] = settings.ca_certs
    if settings.auth == "sigv4":
        import boto3
        from opensearchpy import AWSV4SignerAuth, RequestsHttpConnection

        session = boto3.Session(region_name=aws_region) if aws_region else boto3.Session()
        region = aws_region or session.region_name
        credentials = session.get_credentials()
        if not region or credentials is None:
            raise SettingError("opensearch_auth", "sigv4 needs an AWS region (COGNIS_AWS_REGION) and AWS credentials")
        kwargs["http_auth"] = AWSV4SignerAuth(credentials, region, "es")
        kwargs["connection_class"] = RequestsHttpConnection
    return OpenSearch(**kwargs)
