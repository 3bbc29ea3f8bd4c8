"""The AWS identity the dynamic resources act as: the one the stack's AWS provider is configured with.

The AWS provider reads its identity from the stack configuration: ``aws:region``, ``aws:profile``,
static keys (``aws:accessKey``, ``aws:secretKey``, ``aws:token``), roles to assume in order
(``aws:assumeRoles``; ``aws:assumeRole`` for a single one, the older key), the accounts it may act
in (``aws:allowedAccountIds``, ``aws:forbiddenAccountIds``) and where it calls STS (``aws:stsRegion``).
The dynamic resources (``ecs_run.py``, ``sagemaker_endpoint.py``, ``ecs_deployment.py``) run boto3
in the deploying process; Pulumi hands a dynamic provider the stack's configuration in its
``configure`` method, so they build the same identity from the same keys:

1. base credentials: the static keys, else the profile, else boto3's default chain (environment,
   shared files, SSO, container or instance role), like the provider;
2. each role of ``assumeRoles`` assumed in turn with the previous credentials (role chaining);
3. with ``allowedAccountIds``/``forbiddenAccountIds`` set, the account of the final credentials
   (``GetCallerIdentity``) is checked and a mismatch refused before any call that changes anything.

The secrets stay in the stack configuration (encrypted there): they never become a resource's
inputs or outputs, so the state holds none of them. Provider settings that would change the
identity but are not built here (:data:`UNSUPPORTED_KEYS`) are refused by name rather than ignored:
ignoring one would act as another identity than the provider's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

#: Session name when an assumed role names none (CloudTrail shows it as the caller).
DEFAULT_SESSION_NAME = "cognis-pulumi-dynamic"

#: Provider keys that change who acts but that the dynamic resources do not reproduce (set the
#: equivalent environment variables boto3 reads instead: AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE,
#: AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE).
UNSUPPORTED_KEYS: tuple[str, ...] = ("assumeRoleWithWebIdentity", "sharedCredentialsFiles", "sharedConfigFiles")

_DURATION_PART = re.compile(r"(\d+)(h|m|s)")


class AccountNotAllowed(RuntimeError):
    """The credentials belong to an account the provider configuration does not allow."""


class ConfigSource(Protocol):
    """What the identity is read from: ``pulumi.dynamic.Config`` (or a dict) keyed ``aws:<key>``."""

    def get(self, key: str) -> Any: ...


def _structured(value: Any) -> Any:
    """A structured config value, whether it arrives as JSON text or already decoded."""
    if isinstance(value, str) and value.strip()[:1] in ("[", "{"):
        return json.loads(value)
    return value


def _ids(value: Any) -> tuple[str, ...]:
    value = _structured(value)
    if value in (None, ""):
        return ()
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    return tuple(str(v) for v in value)


def parse_duration_s(text: Any) -> int | None:
    """``1h``, ``15m``, ``1h30m``, ``900s`` (the provider's duration format) or a number of seconds."""
    if text in (None, ""):
        return None
    if isinstance(text, int | float):
        return int(text)
    parts = _DURATION_PART.findall(str(text))
    if not parts or "".join(n + u for n, u in parts) != str(text).strip():
        raise ValueError(f"aws:assumeRoles duration {text!r} is not a duration like 1h, 15m or 900s")
    return sum(int(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts)


@dataclass(frozen=True)
class AssumeRole:
    """One entry of ``aws:assumeRoles``: the AssumeRole request it makes."""

    role_arn: str
    session_name: str = DEFAULT_SESSION_NAME
    external_id: str | None = None
    duration_s: int | None = None
    policy: str | None = None
    policy_arns: tuple[str, ...] = ()
    tags: tuple[tuple[str, str], ...] = ()
    transitive_tag_keys: tuple[str, ...] = ()
    source_identity: str | None = None

    @classmethod
    def from_config(cls, raw: dict[str, Any]) -> AssumeRole:
        if not raw.get("roleArn"):
            raise ValueError("aws:assumeRoles: every entry needs a roleArn")
        return cls(
            role_arn=raw["roleArn"],
            session_name=raw.get("sessionName") or DEFAULT_SESSION_NAME,
            external_id=raw.get("externalId") or None,
            duration_s=parse_duration_s(raw.get("duration") or raw.get("durationSeconds")),
            policy=raw.get("policy") or None,
            policy_arns=tuple(raw.get("policyArns") or ()),
            tags=tuple(sorted((raw.get("tags") or {}).items())),
            transitive_tag_keys=tuple(raw.get("transitiveTagKeys") or ()),
            source_identity=raw.get("sourceIdentity") or None,
        )

    def request(self) -> dict[str, Any]:
        """The ``sts.assume_role`` arguments."""
        req: dict[str, Any] = {"RoleArn": self.role_arn, "RoleSessionName": self.session_name}
        optional = {
            "ExternalId": self.external_id,
            "DurationSeconds": self.duration_s,
            "Policy": self.policy,
            "PolicyArns": [{"arn": a} for a in self.policy_arns] or None,
            "Tags": [{"Key": k, "Value": v} for k, v in self.tags] or None,
            "TransitiveTagKeys": list(self.transitive_tag_keys) or None,
            "SourceIdentity": self.source_identity,
        }
        return {**req, **{k: v for k, v in optional.items() if v is not None}}


@dataclass(frozen=True)
class AwsIdentity:
    """The AWS provider's identity settings (module docstring). Empty: boto3's default chain."""

    profile: str | None = None
    access_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    assume_roles: tuple[AssumeRole, ...] = ()
    allowed_account_ids: tuple[str, ...] = ()
    forbidden_account_ids: tuple[str, ...] = ()
    sts_region: str | None = None

    @classmethod
    def from_config(cls, config: ConfigSource | dict[str, Any]) -> AwsIdentity:
        def get(key: str) -> Any:
            value = config.get(f"aws:{key}")
            return None if value == "" else value

        unsupported = [f"aws:{k}" for k in UNSUPPORTED_KEYS if get(k) not in (None, [], "[]")]
        if unsupported:
            raise ValueError(
                f"{', '.join(unsupported)} is set, which the stack's dynamic resources (migration run, reranker "
                "endpoint, deployment check) cannot reproduce; set the environment variables boto3 reads instead "
                "(aws_session.UNSUPPORTED_KEYS)"
            )
        roles = _structured(get("assumeRoles"))
        if roles is None and get("assumeRole") is not None:
            roles = [_structured(get("assumeRole"))]
        if (get("accessKey") is None) != (get("secretKey") is None):
            raise ValueError("aws:accessKey and aws:secretKey are set together or not at all")
        return cls(
            profile=get("profile"),
            access_key=get("accessKey"),
            secret_key=get("secretKey"),
            token=get("token"),
            assume_roles=tuple(AssumeRole.from_config(r) for r in roles or () if r),
            allowed_account_ids=_ids(get("allowedAccountIds")),
            forbidden_account_ids=_ids(get("forbiddenAccountIds")),
            sts_region=get("stsRegion"),
        )

    def check_account(self, account: str) -> None:
        """Refuse an account outside ``allowedAccountIds`` or inside ``forbiddenAccountIds``."""
        if self.allowed_account_ids and account not in self.allowed_account_ids:
            raise AccountNotAllowed(
                f"the AWS credentials belong to account {account}, which aws:allowedAccountIds "
                f"({', '.join(self.allowed_account_ids)}) does not list; nothing was changed"
            )
        if account in self.forbidden_account_ids:
            raise AccountNotAllowed(
                f"the AWS credentials belong to account {account}, which aws:forbiddenAccountIds lists; "
                "nothing was changed"
            )


StsFactory = Callable[[Any, str], Any]


def _sts(session: Any, region: str) -> Any:
    return session.client("sts", region_name=region)


def session_for(identity: AwsIdentity, region: str, *, sts: StsFactory = _sts) -> Any:
    """A boto3 session in ``region`` acting as ``identity`` (module docstring); ``sts(session, region)``
    makes the STS client each step calls (AssumeRole with the previous credentials, GetCallerIdentity)."""
    import boto3

    if identity.access_key:
        current = boto3.Session(
            aws_access_key_id=identity.access_key,
            aws_secret_access_key=identity.secret_key,
            aws_session_token=identity.token,
            region_name=region,
        )
    elif identity.profile:
        current = boto3.Session(profile_name=identity.profile, region_name=region)
    else:
        current = boto3.Session(region_name=region)
    sts_region = identity.sts_region or region
    for role in identity.assume_roles:
        creds = sts(current, sts_region).assume_role(**role.request())["Credentials"]
        current = boto3.Session(
            aws_access_key_id=creds["AccessKeyId"],
            aws_secret_access_key=creds["SecretAccessKey"],
            aws_session_token=creds["SessionToken"],
            region_name=region,
        )
    if identity.allowed_account_ids or identity.forbidden_account_ids:
        identity.check_account(sts(current, sts_region).get_caller_identity()["Account"])
    return current


def client_for(service: str, identity: AwsIdentity, region: str, *, sts: StsFactory = _sts) -> Any:
    """A boto3 client of ``service`` acting as ``identity`` in ``region``."""
    return session_for(identity, region, sts=sts).client(service, region_name=region)
