"""What the API service is configured with: its stack settings (checked when the stack loads) and
the arguments the program gives the :class:`~.service.Service` component, with the checks and
names derived from them (the Bedrock model's ARNs, the certificate's region)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi

from . import bedrock_models
from .context import AwsContext
from .iam import statement
from .service_identity import ServiceIdentity

#: Bedrock cross-region inference profile prefixes ("us.anthropic.claude-..."): the runtime's own list.
INFERENCE_PROFILE_PREFIXES: tuple[str, ...] = bedrock_models.INFERENCE_PROFILE_PREFIXES
#: The current ADOT collector release (aws-observability/aws-otel-collector v0.49.0, July 2026).
ADOT_COLLECTOR_IMAGE = "public.ecr.aws/aws-observability/aws-otel-collector:v0.49.0"
_ACM_ARN = re.compile(r"^arn:[a-z-]+:acm:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):certificate/(?P<id>[0-9a-f-]{36})$")


@dataclass(frozen=True)
class ServiceSettings:
    """Size, scaling and edge of the API service (stack config)."""

    #: ACM certificate of the HTTPS listener; required unless ``http_only``.
    certificate_arn: str | None = None
    #: Development only: the load balancer serves plain HTTP on port 80 and has no HTTPS listener.
    http_only: bool = False
    cpu: int = 1024
    memory: int = 2048
    desired_count: int = 2
    min_count: int = 2
    max_count: int = 10
    cpu_target_percent: float = 60.0
    requests_per_target: int = 1000
    cpu_architecture: str = "X86_64"
    port: int = 8080
    ssl_policy: str = "ELBSecurityPolicy-TLS13-1-2-Res-2021-06"
    log_retention_days: int = 30
    health_check_grace_s: int = 180
    #: Seconds between two readiness probes of one task (the probe sidecar).
    readiness_probe_interval_s: int = 30
    alb_deletion_protection: bool = False
    api_domain_name: str | None = None
    #: None: the runtime's default for the stack's Region (``bedrock_models.default_model_id``).
    bedrock_model_id: str | None = None
    bedrock_extra_model_ids: tuple[str, ...] = ()
    first_tenant: str = "default"
    #: ``COGNIS_TELEMETRY`` of the API: ``emf`` writes the metrics the alarms and the dashboard read.
    telemetry_mode: str = "emf"
    #: Run an ADOT collector sidecar and send the API's OpenTelemetry traces to X-Ray through it.
    traces: bool = False
    #: Share of new traces recorded (``COGNIS_TRACE_SAMPLE_RATIO``; a caller's traceparent decides for its own).
    trace_sample_ratio: float = 1.0
    #: The collector sidecar's image (the tag AWS's ECS guide shows; pin a newer release deliberately).
    adot_collector_image: str = ADOT_COLLECTOR_IMAGE
    #: ``COGNIS_EMBEDDING_MODEL`` of the API; a model other than the default is fetched into the image at build.
    embedding_model: str = "all-MiniLM-L6-v2"
    #: ``COGNIS_OPENSEARCH_SHARDS`` of the API: primary shards of each index it creates (fixed at creation).
    opensearch_shards: int = 1

    def __post_init__(self) -> None:
        if self.http_only and self.certificate_arn:
            raise ValueError("cognis:httpOnly serves plain HTTP: leave cognis:certificateArn unset, or httpOnly false")
        if not self.http_only:
            if not self.certificate_arn:
                raise ValueError(
                    "cognis:certificateArn is required: the ACM certificate (in the stack's Region) of the HTTPS "
                    "listener; a development stack without one sets cognis:httpOnly true"
                )
            match = _ACM_ARN.match(self.certificate_arn)
            if not match:
                raise ValueError(
                    "cognis:certificateArn must be an ACM certificate ARN "
                    "(arn:aws:acm:<region>:<account>:certificate/<id>)"
                )
            if set(match["id"]) <= {"0", "-"}:
                raise ValueError(f"cognis:certificateArn {self.certificate_arn} is a placeholder, not a certificate")
        if (self.cpu, self.memory) not in _FARGATE_SIZES:
            raise ValueError(f"cognis:cpu/cognis:memory {self.cpu}/{self.memory} is not a valid Fargate size")
        if not 1 <= self.min_count <= self.desired_count <= self.max_count:
            raise ValueError("need 1 <= cognis:minCount <= cognis:desiredCount <= cognis:maxCount")
        if self.cpu_architecture not in ("X86_64", "ARM64"):
            raise ValueError("cognis:cpuArchitecture must be X86_64 or ARM64")
        if not self.ssl_policy.startswith(
            ("ELBSecurityPolicy-TLS13-", "ELBSecurityPolicy-TLS-1-2", "ELBSecurityPolicy-FS-1-2")
        ):
            raise ValueError(f"cognis:albSslPolicy {self.ssl_policy} allows TLS below 1.2")
        if self.telemetry_mode not in TELEMETRY_MODES:
            raise ValueError(f"cognis:telemetryMode must be one of {', '.join(TELEMETRY_MODES)}")
        if self.embedding_model not in EMBEDDING_MODELS:
            raise ValueError(f"cognis:embeddingModel must be one of {', '.join(EMBEDDING_MODELS)}")
        if not 1 <= self.opensearch_shards <= 1024:
            raise ValueError("cognis:opensearchShards must be between 1 and 1024")
        if not 0.0 <= self.trace_sample_ratio <= 1.0:
            raise ValueError("cognis:traceSampleRatio must be between 0 and 1")
        if not self.adot_collector_image.strip():
            raise ValueError("cognis:adotCollectorImage must name an image")
        if not TENANT_ID.fullmatch(self.first_tenant) or ":" in self.first_tenant or "=" in self.first_tenant:
            raise ValueError(
                "cognis:firstTenant must follow the service's id rule (1-128 ASCII letters, digits and . _ - @ + |,"
                " starting with a letter, digit or _) without ':' or '=' (they separate COGNIS_API_KEYS entries)"
            )


#: The runtime's telemetry modes (``COGNIS_TELEMETRY``; restated like the id rule, a test compares them).
TELEMETRY_MODES = ("auto", "emf", "json", "text", "off")

#: The runtime's named embedding models (``COGNIS_EMBEDDING_MODEL``; restated, a test compares them); the
#: first is the default, carried by every image; the others are fetched into the image when chosen.
EMBEDDING_MODELS = ("all-MiniLM-L6-v2", "bge-small-en-v1.5")

#: The service's id rule (runtime validation.ID_PATTERN; the Pulumi environment does not install the runtime,
#: so it is restated here and a test compares the two). A tenant that breaks it would stop the service at start.
TENANT_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._:@+|=-]{0,127}")

# Fargate CPU units -> allowed memory (MiB).
_FARGATE_SIZES = {
    *((256, m) for m in (512, 1024, 2048)),
    *((512, m) for m in range(1024, 4097, 1024)),
    *((1024, m) for m in range(2048, 8193, 1024)),
    *((2048, m) for m in range(4096, 16385, 1024)),
    *((4096, m) for m in range(8192, 30721, 1024)),
    *((8192, m) for m in range(16384, 61441, 4096)),
    *((16384, m) for m in range(32768, 122881, 8192)),
}


def resolved_model_id(settings: ServiceSettings, region: str) -> str:
    """The configured model id, or the runtime's default for the Region (one definition, bedrock_models.py)."""
    return settings.bedrock_model_id or bedrock_models.default_model_id(region)


def check_model_region(model_id: str, region: str) -> None:
    """A geographic inference profile can only be called from a Region of its geography: refuse, naming the key."""
    geography, base = bedrock_models.split_profile(model_id)
    if geography in (None, "global"):
        return
    ok = {"us": "us-", "us-gov": "us-gov-", "eu": "eu-", "ca": "ca-", "apac": "ap-", "jp": "ap-", "au": "ap-"}
    if not region.startswith(ok.get(geography, "?")) or (geography == "us" and region.startswith("us-gov-")):
        raise ValueError(
            f"cognis:bedrockModelId {model_id} is a {geography} inference profile, which {region} cannot call; "
            f"use the profile of this Region's geography or global.{base}"
        )


def check_certificate_location(settings: ServiceSettings, ctx: AwsContext) -> None:
    """A load balancer uses an ACM certificate of its own account and Region."""
    match = _ACM_ARN.match(settings.certificate_arn or "")
    if match and (match["region"], match["account"]) != (ctx.region, ctx.account_id):
        raise ValueError(
            f"cognis:certificateArn {settings.certificate_arn} is in {match['region']}/{match['account']}; the load "
            f"balancer needs a certificate of this stack's Region and account ({ctx.region}/{ctx.account_id})"
        )


def bedrock_model_arns(model_id: str, ctx: AwsContext) -> list[str]:
    """Foundation model ARNs in the stack's Region (what GetFoundationModel is asked about)."""
    base = bedrock_models.foundation_model_id(model_id)
    return [f"arn:{ctx.partition}:bedrock:{ctx.region}::foundation-model/{base}"]


def bedrock_resource_arns(model_id: str, ctx: AwsContext) -> list[str]:
    """ARNs ``bedrock:InvokeModel`` needs for one model id.

    A plain id (``anthropic.claude-...``) is a foundation model in this region. A
    cross-region inference profile id (``us.anthropic.claude-...``) needs the profile
    and the foundation model in every region the profile may route to.
    """
    profile, models = _profile_and_models(model_id, ctx)
    return [profile, *models] if profile else models


def _profile_and_models(model_id: str, ctx: AwsContext) -> tuple[str | None, list[str]]:
    if model_id.startswith("arn:"):
        return None, [model_id]
    prefix, _, base = model_id.partition(".")
    p = ctx.partition
    if prefix in INFERENCE_PROFILE_PREFIXES and base:
        models = [f"arn:{p}:bedrock:*::foundation-model/{base}"]
        if prefix == "global":
            models.append(f"arn:{p}:bedrock:::foundation-model/{base}")
        return ctx.arn("bedrock", f"inference-profile/{model_id}"), models
    return None, [f"arn:{p}:bedrock:{ctx.region}::foundation-model/{model_id}"]


def bedrock_invoke_statements(model_ids: Sequence[str], ctx: AwsContext) -> list[dict]:
    """The task role's Bedrock invoke statements: the inference profiles and plain foundation models as they
    are, and the foundation models behind a profile (in any Region it routes to) only when the request comes
    through that profile (``bedrock:InferenceProfileArn``, fact 65), so the role cannot call them directly in
    a Region outside the profile's geography."""
    actions = ["bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"]
    direct: set[str] = set()
    through: dict[str, set[str]] = {}
    for model_id in model_ids:
        profile, models = _profile_and_models(model_id, ctx)
        if profile:
            direct.add(profile)
            through.setdefault(profile, set()).update(models)
        else:
            direct.update(models)
    statements = [statement("InvokeBedrockModels", actions, sorted(direct))]
    for i, (profile, models) in enumerate(sorted(through.items())):
        statements.append(
            statement(
                f"InvokeModelsThroughProfile{i}",
                actions,
                sorted(models),
                condition={"StringEquals": {"bedrock:InferenceProfileArn": profile}},
            )
        )
    return statements


@dataclass
class ServiceArgs:
    settings: ServiceSettings
    context: AwsContext
    identity: ServiceIdentity
    #: Stack prefix (``cognis-<stack>``) for physical names.
    prefix: str
    # network
    vpc_id: pulumi.Input[str]
    public_subnet_ids: Sequence[pulumi.Input[str]]
    private_subnet_ids: Sequence[pulumi.Input[str]]
    alb_security_group_id: pulumi.Input[str]
    service_security_group_id: pulumi.Input[str]
    # image: the built image's ref, a tag in the stack's repository, or any URI
    image_uri: pulumi.Input[str]
    #: The stack's ECR repository when the image lives there (for the pull permission).
    image_repository_arn: pulumi.Input[str] | None
    # stores
    postgres_host: pulumi.Input[str]
    postgres_port: pulumi.Input[int]
    postgres_db: str
    #: The master secret: read by the migration task only.
    postgres_secret_arn: pulumi.Input[str]
    #: Application role the pool signs in as (IAM authentication) and the cluster it lives in.
    postgres_app_user: str
    postgres_cluster_resource_id: pulumi.Input[str]
    opensearch_url: pulumi.Input[str]
    opensearch_domain_arn: pulumi.Input[str]
    redis_url: pulumi.Input[str]
    redis_secret_arn: pulumi.Input[str]
    #: Version id of the cache token's secret: a new token redeploys the tasks.
    redis_secret_version: pulumi.Input[str]
    # reranker (None: disabled)
    reranker_endpoint_name: pulumi.Input[str] | None
    reranker_endpoint_arn_pattern: str | None
    # first API key (a secret) and telemetry
    api_key: pulumi.Input[str]
    metrics_namespace: str
    service_name: str
    log_group_name: str
    log_kms_key_arn: pulumi.Input[str]
    #: Task definition family (unique per stack in the account).
    family: str = "cognis-memory-api"
    #: The Aurora instances: the migration and the service start only once they are available.
    database_instances: Sequence[pulumi.Resource] = ()
    #: More ``COGNIS_*`` (or other) variables for the API container; they win over the defaults.
    extra_environment: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)
