"""Service: the API on ECS Fargate behind an Application Load Balancer.

* ``ServiceIdentity`` creates the task role and the task execution role first, so the
  OpenSearch domain's access policy can name the task role before the service exists.
* ``Service`` grants those roles exactly what they use, and runs the containers:

  - task role: ``bedrock:InvokeModel*`` on the configured model ids (foundation models and,
    for cross-region inference profiles, the profile), ``sagemaker:InvokeEndpoint`` on the
    stack's reranker endpoints (the name pattern, so a replaced endpoint stays callable while
    tasks roll over), ``bedrock:GetFoundationModel`` on the models (the start-up lifecycle
    check), ``rds-db:connect`` as the database's application role, and the OpenSearch HTTP
    verbs on the domain; *not* the Aurora master secret;
  - execution role: pull the API image, write its log group, read the two secrets ECS
    injects (``COGNIS_API_KEYS``, ``COGNIS_REDIS_PASSWORD``).

* Migrations: a one-off task (``cognis-memory migrate`` in the API image) with its own task role,
  the only one that may read the master secret, and its own execution role, runs to completion in
  every ``pulumi up`` that changes its task definition (:class:`~.ecs_run.EcsTaskRun`), after the
  Aurora instances are available and before the ECS service is created or updated. The API tasks
  run with ``COGNIS_POSTGRES_MIGRATE=false`` and only check that the schema is current.
* TLS: PostgreSQL with ``verify-full`` against the RDS CA bundle the image carries
  (:data:`RDS_CA_BUNDLE`); Redis (``rediss://``) and OpenSearch (``https://``) verify the
  certificate and host name against the image's system CAs.
* Edge: HTTPS with the ACM certificate (HTTP redirects), or, for a development stack with
  ``cognis:httpOnly``, plain HTTP only.

* Telemetry: the API runs with ``COGNIS_TELEMETRY=emf`` (set, not detected). With
  ``cognis:traces`` a non-essential ADOT collector sidecar takes the API's OTLP spans on the
  task's localhost and sends them to X-Ray (task role: ``xray:PutTraceSegments`` and
  ``xray:PutTelemetryRecords``).

* Health: the ALB target group and the container's ECS health check both use *liveness*
  (``GET /health``). ECS replaces tasks that fail either, so checking readiness (``GET
  /ready``: the stores answer) there would replace the whole fleet, again and again, during
  any store outage longer than the check window. Readiness is measured instead by a
  non-essential probe container in each task that asks ``/ready`` every 30 s and writes the
  answer as a CloudWatch EMF metric (``Ready``: 1 or 0, dimension ``service``): it feeds an
  alarm and the dashboard, never a restart.
* Deployments use the circuit breaker with rollback; the service redeploys when the secrets
  it injects get a new version (rotation), and scales on CPU and on requests per target.
* Environment variables point at the other components' outputs (``COGNIS_*``); further
  variables (e.g. a telemetry mode) go through ``ServiceArgs.extra_environment``, and further
  containers (e.g. a collector sidecar) through :func:`task_containers`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws

from . import bedrock_models
from .base import CognisComponent
from .context import AwsContext
from .ecs_run import EcsTaskRun
from .iam import assume_role_policy, document, statement
from .naming import physical_name
from .search import DATA_PLANE_ACTIONS
from .telemetry import READINESS_METRIC, names

CONTAINER_NAME = "api"
PROBE_CONTAINER_NAME = "readiness-probe"
COLLECTOR_CONTAINER_NAME = "otel-collector"
#: Where the collector sidecar takes OTLP/HTTP; containers of one awsvpc task share localhost.
COLLECTOR_OTLP_HTTP = "127.0.0.1:4318"
#: Bedrock cross-region inference profile prefixes ("us.anthropic.claude-..."): the runtime's own list.
INFERENCE_PROFILE_PREFIXES: tuple[str, ...] = bedrock_models.INFERENCE_PROFILE_PREFIXES
#: The one-off migration task's container (runs ``cognis-memory migrate`` in the API image).
MIGRATION_CONTAINER_NAME = "migrate"
#: Where the API image carries the Amazon RDS CA bundle (Dockerfile; docker/certs/rds-global-bundle.pem).
RDS_CA_BUNDLE = "/etc/cognis/certs/rds-global-bundle.pem"
#: The current ADOT collector release (aws-observability/aws-otel-collector v0.49.0, July 2026).
ADOT_COLLECTOR_IMAGE = "public.ecr.aws/aws-observability/aws-otel-collector:v0.49.0"
#: Tag of the forwarding HTTP listener of an HTTP-only (development) stack; the tls-only policy reads it.
HTTP_ONLY_TAG = "CognisHttpOnly"
#: What pulling an image from ECR takes (besides ecr:GetAuthorizationToken).
ECR_PULL_ACTIONS: tuple[str, ...] = (
    "ecr:BatchGetImage",
    "ecr:GetDownloadUrlForLayer",
    "ecr:BatchCheckLayerAvailability",
)
_ACM_ARN = re.compile(r"^arn:[a-z-]+:acm:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):certificate/(?P<id>[0-9a-f-]{36})$")
LIVENESS_PATH = "/health"
READINESS_PATH = "/ready"

#: The readiness probe (standard library only; runs in the API image): ``url namespace service
#: interval [count]``. One EMF line per probe: ``Ready`` is 1 when ``url`` answers 200, else 0.
READINESS_PROBE = f"""
import json, sys, time, urllib.request
url, namespace, service, interval = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
count = int(sys.argv[5]) if len(sys.argv) > 5 else -1
while count != 0:
    started = time.time()
    try:
        ready = 1 if urllib.request.urlopen(url, timeout=5).status == 200 else 0
    except Exception:
        ready = 0
    metric = {{"Namespace": namespace, "Dimensions": [["{names.DIM_SERVICE}"]],
              "Metrics": [{{"Name": "{READINESS_METRIC}", "Unit": "Count"}}]}}
    print(json.dumps({{"_aws": {{"Timestamp": int(started * 1000), "CloudWatchMetrics": [metric]}},
                      "{names.DIM_SERVICE}": service, "{READINESS_METRIC}": ready}}), flush=True)
    count -= 1
    if count:
        time.sleep(max(0.0, interval - (time.time() - started)))
"""


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
    if model_id.startswith("arn:"):
        return [model_id]
    prefix, _, base = model_id.partition(".")
    p = ctx.partition
    if prefix in INFERENCE_PROFILE_PREFIXES and base:
        arns = [
            ctx.arn("bedrock", f"inference-profile/{model_id}"),
            f"arn:{p}:bedrock:*::foundation-model/{base}",
        ]
        if prefix == "global":
            arns.append(f"arn:{p}:bedrock:::foundation-model/{base}")
        return arns
    return [f"arn:{p}:bedrock:{ctx.region}::foundation-model/{model_id}"]


@dataclass
class ServiceIdentityArgs:
    context: AwsContext
    #: Stack prefix (``cognis-<stack>``) for the role names.
    prefix: str
    tags: Mapping[str, str] = field(default_factory=dict)


class ServiceIdentity(CognisComponent):
    """The task role (what the API may call) and the execution role (what ECS does)."""

    task_role_arn: pulumi.Output[str]
    execution_role_arn: pulumi.Output[str]

    def __init__(self, name: str, args: ServiceIdentityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("cognis:service:ServiceIdentity", name, args.tags, opts)
        trust = assume_role_policy(args.context.service_principal("ecs-tasks"), source_account=args.context.account_id)
        self.task_role = aws.iam.Role(
            f"{name}-task",
            name_prefix=physical_name(args.prefix, "task", max_len=37) + "-",
            description="cognis-memory API task role",
            assume_role_policy=trust,
            tags=self.tags(f"{name}-task"),
            opts=self.child_opts(),
        )
        self.execution_role = aws.iam.Role(
            f"{name}-execution",
            name_prefix=physical_name(args.prefix, "execution", max_len=37) + "-",
            description="cognis-memory API task execution role (image pull, logs, secrets)",
            assume_role_policy=trust,
            tags=self.tags(f"{name}-execution"),
            opts=self.child_opts(),
        )
        self.task_role_arn = self.task_role.arn
        self.execution_role_arn = self.execution_role.arn
        self.register_outputs({"taskRoleArn": self.task_role_arn, "executionRoleArn": self.execution_role_arn})


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


def container_environment(args: ServiceArgs) -> list[dict[str, Any]]:
    """The API's ``COGNIS_*`` environment, pointing at the other components."""
    s = args.settings
    env: dict[str, Any] = {
        "COGNIS_STORE": "dual",
        "COGNIS_POSTGRES_HOST": args.postgres_host,
        "COGNIS_POSTGRES_PORT": pulumi.Output.from_input(args.postgres_port).apply(lambda p: str(int(p))),
        "COGNIS_POSTGRES_DB": args.postgres_db,
        "COGNIS_POSTGRES_APP_USER": args.postgres_app_user,
        "COGNIS_POSTGRES_IAM_AUTH": "true",
        # The migration task migrates; the API only checks the schema and never sees the owner's secret.
        "COGNIS_POSTGRES_MIGRATE": "false",
        "COGNIS_POSTGRES_SSLMODE": "verify-full",
        "COGNIS_POSTGRES_SSLROOTCERT": RDS_CA_BUNDLE,
        "COGNIS_OPENSEARCH_URL": args.opensearch_url,
        "COGNIS_OPENSEARCH_AUTH": "sigv4",
        "COGNIS_REDIS_URL": args.redis_url,
        "COGNIS_RERANKER": "sagemaker" if args.reranker_endpoint_name is not None else "none",
        "COGNIS_LLM": "bedrock",
        "COGNIS_BEDROCK_MODEL_ID": resolved_model_id(s, args.context.region),
        "COGNIS_AWS_REGION": args.context.region,
        "COGNIS_METRICS_NAMESPACE": args.metrics_namespace,
        "COGNIS_SERVICE_NAME": args.service_name,
        "COGNIS_HOST": "0.0.0.0",
        # The root filesystem is read-only: anything local goes to the /tmp volume.
        "COGNIS_DATA_DIR": "/tmp/cognis",
        "COGNIS_PORT": str(s.port),
        "HF_HUB_OFFLINE": "1",
    }
    if args.reranker_endpoint_name is not None:
        env["COGNIS_SAGEMAKER_ENDPOINT"] = args.reranker_endpoint_name
    env["COGNIS_TELEMETRY"] = s.telemetry_mode
    env["COGNIS_EMBEDDING_MODEL"] = s.embedding_model
    if s.traces:
        env["COGNIS_TRACES"] = "otlp"
        env["COGNIS_OTLP_ENDPOINT"] = f"http://{COLLECTOR_OTLP_HTTP}/v1/traces"
        env["COGNIS_TRACE_SAMPLE_RATIO"] = repr(float(s.trace_sample_ratio))
    env.update(args.extra_environment)
    return [{"name": k, "value": v} for k, v in sorted(env.items())]


def _log_configuration(args: ServiceArgs, log_group_name: pulumi.Input[str], stream_prefix: str) -> dict[str, Any]:
    return {
        "logDriver": "awslogs",
        "options": {
            "awslogs-group": log_group_name,
            "awslogs-region": args.context.region,
            "awslogs-stream-prefix": stream_prefix,
            "mode": "non-blocking",
            "max-buffer-size": "25m",
        },
    }


def api_container(
    args: ServiceArgs, log_group_name: pulumi.Input[str], api_keys_secret_arn: pulumi.Input[str]
) -> dict[str, Any]:
    """The API container: liveness health check, secrets from Secrets Manager, read-only root."""
    s = args.settings
    url = f"http://127.0.0.1:{s.port}{LIVENESS_PATH}"
    probe = f"urllib.request.urlopen('{url}', timeout=4).status == 200"
    liveness = f"import sys, urllib.request; sys.exit(0 if {probe} else 1)"
    return {
        "name": CONTAINER_NAME,
        "image": args.image_uri,
        "essential": True,
        "portMappings": [{"containerPort": s.port, "protocol": "tcp", "name": "http", "appProtocol": "http"}],
        "environment": container_environment(args),
        "secrets": [
            {"name": "COGNIS_API_KEYS", "valueFrom": api_keys_secret_arn},
            {"name": "COGNIS_REDIS_PASSWORD", "valueFrom": args.redis_secret_arn},
        ],
        "logConfiguration": _log_configuration(args, log_group_name, CONTAINER_NAME),
        "healthCheck": {
            "command": ["CMD", "python", "-c", liveness],
            "interval": 30,
            "timeout": 5,
            "retries": 3,
            "startPeriod": 120,
        },
        "readonlyRootFilesystem": True,
        "mountPoints": [{"sourceVolume": "tmp", "containerPath": "/tmp", "readOnly": False}],
        "linuxParameters": {"initProcessEnabled": True},
        "ulimits": [{"name": "nofile", "softLimit": 65536, "hardLimit": 65536}],
        "stopTimeout": 30,
    }


def readiness_probe_container(args: ServiceArgs, log_group_name: pulumi.Input[str]) -> dict[str, Any]:
    """Non-essential sidecar: asks ``/ready`` and logs the answer as an EMF metric; never restarts anything."""
    s = args.settings
    return {
        "name": PROBE_CONTAINER_NAME,
        "image": args.image_uri,
        "essential": False,
        "entryPoint": ["python", "-c", READINESS_PROBE],
        "command": [
            f"http://127.0.0.1:{s.port}{READINESS_PATH}",
            args.metrics_namespace,
            args.service_name,
            str(s.readiness_probe_interval_s),
        ],
        "memoryReservation": 64,
        # Start probing once the API answers its liveness check.
        "dependsOn": [{"containerName": CONTAINER_NAME, "condition": "HEALTHY"}],
        "logConfiguration": _log_configuration(args, log_group_name, PROBE_CONTAINER_NAME),
        "readonlyRootFilesystem": True,
        "stopTimeout": 5,
    }


def migration_container(args: ServiceArgs, log_group_name: pulumi.Input[str]) -> dict[str, Any]:
    """``cognis-memory migrate`` in the API image: the schema owner's secret, nothing of the API's."""
    env = {
        "COGNIS_STORE": "dual",
        "COGNIS_POSTGRES_HOST": args.postgres_host,
        "COGNIS_POSTGRES_PORT": pulumi.Output.from_input(args.postgres_port).apply(lambda p: str(int(p))),
        "COGNIS_POSTGRES_DB": args.postgres_db,
        "COGNIS_POSTGRES_SECRET_ARN": args.postgres_secret_arn,
        "COGNIS_POSTGRES_APP_USER": args.postgres_app_user,
        "COGNIS_POSTGRES_SSLMODE": "verify-full",
        "COGNIS_POSTGRES_SSLROOTCERT": RDS_CA_BUNDLE,
        "COGNIS_EMBEDDING_MODEL": args.settings.embedding_model,
        "COGNIS_AWS_REGION": args.context.region,
        "COGNIS_TELEMETRY": "json",
        "COGNIS_DATA_DIR": "/tmp/cognis",
        "HF_HUB_OFFLINE": "1",
    }
    return {
        "name": MIGRATION_CONTAINER_NAME,
        "image": args.image_uri,
        "essential": True,
        "command": ["migrate"],
        "environment": [{"name": k, "value": v} for k, v in sorted(env.items())],
        "logConfiguration": _log_configuration(args, log_group_name, MIGRATION_CONTAINER_NAME),
        "readonlyRootFilesystem": True,
        "mountPoints": [{"sourceVolume": "tmp", "containerPath": "/tmp", "readOnly": False}],
    }


def collector_config(region: str) -> dict[str, Any]:
    """The collector's whole configuration: OTLP/HTTP from the task's own localhost in, X-Ray out.
    Traces only, so the task role needs X-Ray writes and nothing else."""
    return {
        "receivers": {"otlp": {"protocols": {"http": {"endpoint": COLLECTOR_OTLP_HTTP}}}},
        "processors": {"batch": {}},
        "exporters": {"awsxray": {"region": region}},
        "service": {
            "pipelines": {"traces": {"receivers": ["otlp"], "processors": ["batch"], "exporters": ["awsxray"]}}
        },
    }


def collector_container(args: ServiceArgs, log_group_name: pulumi.Input[str]) -> dict[str, Any]:
    """Non-essential ADOT collector sidecar; its configuration comes from an environment variable
    (the collector's ``env:`` config source), so no file or parameter has to be staged. JSON is YAML."""
    return {
        "name": COLLECTOR_CONTAINER_NAME,
        "image": args.settings.adot_collector_image,
        "essential": False,
        "command": ["--config=env:COGNIS_COLLECTOR_CONFIG"],
        "environment": [
            {"name": "COGNIS_COLLECTOR_CONFIG", "value": json.dumps(collector_config(args.context.region))}
        ],
        "logConfiguration": _log_configuration(args, log_group_name, COLLECTOR_CONTAINER_NAME),
        "stopTimeout": 10,
    }


def task_containers(
    args: ServiceArgs, log_group_name: pulumi.Input[str], api_keys_secret_arn: pulumi.Input[str]
) -> list[dict[str, Any]]:
    """Every container of the task: the API first, then its sidecars (the collector when traces are on)."""
    api = api_container(args, log_group_name, api_keys_secret_arn)
    containers = [api, readiness_probe_container(args, log_group_name)]
    if args.settings.traces:
        api["dependsOn"] = [{"containerName": COLLECTOR_CONTAINER_NAME, "condition": "START"}]
        containers.append(collector_container(args, log_group_name))
    return containers


def container_insights_log_group(cluster_name: str) -> str:
    """The log group Container Insights writes an ECS cluster's performance events to."""
    return f"/aws/ecs/containerinsights/{cluster_name}/performance"


class Service(CognisComponent):
    """ECS cluster, task definition, Fargate service, ALB, IAM policies and autoscaling."""

    api_url: pulumi.Output[str]
    alb_dns_name: pulumi.Output[str]
    alb_zone_id: pulumi.Output[str]
    alb_arn_suffix: pulumi.Output[str]
    target_group_arn_suffix: pulumi.Output[str]
    cluster_name: pulumi.Output[str]
    service_name: pulumi.Output[str]
    log_group_name: pulumi.Output[str]
    api_keys_secret_arn: pulumi.Output[str]

    def _migration(
        self, name: str, args: ServiceArgs, cluster: aws.ecs.Cluster, log_group: aws.cloudwatch.LogGroup
    ) -> EcsTaskRun:
        """The migration task definition, its two roles (the only ones that read the master secret), and its run
        in this update (again whenever the task definition changes: a new image brings new migrations)."""
        ctx = args.context
        trust = assume_role_policy(ctx.service_principal("ecs-tasks"), source_account=ctx.account_id)
        task_role = aws.iam.Role(
            f"{name}-migration-task",
            name_prefix=physical_name(args.prefix, "migration", max_len=37) + "-",
            description="cognis-memory schema migration task role (reads the Aurora master secret)",
            assume_role_policy=trust,
            tags=self.tags(f"{name}-migration-task"),
            opts=self.child_opts(),
        )
        task_policy = aws.iam.RolePolicy(
            f"{name}-migration-task",
            role=task_role.id,
            policy=document(
                statement(
                    "ReadDatabaseOwnerSecret",
                    ["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
                    [args.postgres_secret_arn],
                )
            ),
            opts=self.child_opts(),
        )
        execution_role = aws.iam.Role(
            f"{name}-migration-execution",
            name_prefix=physical_name(args.prefix, "migration-exec", max_len=37) + "-",
            description="cognis-memory schema migration task execution role (image pull, logs)",
            assume_role_policy=trust,
            tags=self.tags(f"{name}-migration-execution"),
            opts=self.child_opts(),
        )
        execution_statements = [
            statement("EcrAuth", ["ecr:GetAuthorizationToken"], "*"),  # no resource-level permissions
            statement(
                "WriteLogs", ["logs:CreateLogStream", "logs:PutLogEvents"], [pulumi.Output.concat(log_group.arn, ":*")]
            ),
        ]
        if args.image_repository_arn is not None:
            execution_statements.insert(
                1, statement("PullApiImage", list(ECR_PULL_ACTIONS), [args.image_repository_arn])
            )
        execution_policy = aws.iam.RolePolicy(
            f"{name}-migration-execution",
            role=execution_role.id,
            policy=document(*execution_statements),
            opts=self.child_opts(),
        )
        s = args.settings
        task_definition = aws.ecs.TaskDefinition(
            f"{name}-migration",
            family=physical_name(args.prefix, "migration", max_len=255),
            cpu=str(s.cpu),
            memory=str(s.memory),
            network_mode="awsvpc",
            requires_compatibilities=["FARGATE"],
            runtime_platform=aws.ecs.TaskDefinitionRuntimePlatformArgs(
                operating_system_family="LINUX", cpu_architecture=s.cpu_architecture
            ),
            execution_role_arn=execution_role.arn,
            task_role_arn=task_role.arn,
            volumes=[aws.ecs.TaskDefinitionVolumeArgs(name="tmp")],
            container_definitions=pulumi.Output.json_dumps([migration_container(args, log_group.name)]),
            tags=self.tags(f"{name}-migration"),
            opts=self.child_opts(),
        )
        self.migration_task_role = task_role
        self.migration_task_definition = task_definition
        return EcsTaskRun(
            f"{name}-migrate",
            cluster=cluster.arn,
            task_definition=task_definition.arn,
            container_name=MIGRATION_CONTAINER_NAME,
            subnets=list(args.private_subnet_ids),
            security_groups=[args.service_security_group_id],
            region=ctx.region,
            profile=ctx.profile,
            log_stream_prefix=MIGRATION_CONTAINER_NAME,
            opts=self.child_opts(depends_on=[task_policy, execution_policy, *args.database_instances]),
        )

    def __init__(self, name: str, args: ServiceArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("cognis:service:Service", name, args.tags, opts)
        s = args.settings
        ctx = args.context

        # --- first API key: "key=tenant", injected as COGNIS_API_KEYS ----------------------
        api_keys = aws.secretsmanager.Secret(
            f"{name}-api-keys",
            name_prefix=f"{args.prefix}/api-keys-",
            description="cognis-memory bootstrap API keys (COGNIS_API_KEYS: key=tenant)",
            recovery_window_in_days=7,
            tags=self.tags(f"{name}-api-keys"),
            opts=self.child_opts(),
        )
        api_keys_version = aws.secretsmanager.SecretVersion(
            f"{name}-api-keys",
            secret_id=api_keys.id,
            secret_string=pulumi.Output.secret(pulumi.Output.concat(args.api_key, "=", s.first_tenant)),
            opts=self.child_opts(),
        )

        log_group = self.log_group(
            f"{name}-logs",
            retention_days=s.log_retention_days,
            kms_key_arn=args.log_kms_key_arn,
            physical_name=args.log_group_name,
        )

        # --- IAM: grant the roles exactly what they use -------------------------------------
        p = ctx.partition
        model_id = resolved_model_id(s, ctx.region)
        check_model_region(model_id, ctx.region)
        check_certificate_location(s, ctx)
        models = (model_id, *s.bedrock_extra_model_ids)
        self.model_id = model_id
        self.bedrock_invoke_arns = sorted({arn for m in models for arn in bedrock_resource_arns(m, ctx)})
        task_statements = [
            statement(
                "InvokeBedrockModels",
                ["bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"],
                self.bedrock_invoke_arns,
            ),
            # The start-up lifecycle check (GetFoundationModel: Active, Legacy, end of life) of each model.
            statement(
                "ReadModelLifecycle",
                ["bedrock:GetFoundationModel"],
                sorted({arn for m in models for arn in bedrock_model_arns(m, ctx)}),
            ),
            statement(
                "ConnectAsAppRole",
                ["rds-db:connect"],
                [
                    pulumi.Output.concat(
                        f"arn:{p}:rds-db:{ctx.region}:{ctx.account_id}:dbuser:",
                        args.postgres_cluster_resource_id,
                        f"/{args.postgres_app_user}",
                    )
                ],
            ),
            statement(
                "OpenSearchHttp",
                list(DATA_PLANE_ACTIONS),
                [args.opensearch_domain_arn, pulumi.Output.concat(args.opensearch_domain_arn, "/*")],
            ),
        ]
        if args.reranker_endpoint_arn_pattern is not None:
            task_statements.append(
                statement("InvokeReranker", ["sagemaker:InvokeEndpoint"], [args.reranker_endpoint_arn_pattern])
            )
        if s.traces:  # the collector sidecar runs with the task role; X-Ray has no resource-level permissions
            task_statements.append(statement("WriteTraces", ["xray:PutTraceSegments", "xray:PutTelemetryRecords"], "*"))
        task_policy = aws.iam.RolePolicy(
            f"{name}-task", role=args.identity.task_role.id, policy=document(*task_statements), opts=self.child_opts()
        )

        execution_statements = [
            statement("EcrAuth", ["ecr:GetAuthorizationToken"], "*"),  # no resource-level permissions
            statement(
                "WriteLogs", ["logs:CreateLogStream", "logs:PutLogEvents"], [pulumi.Output.concat(log_group.arn, ":*")]
            ),
            statement("ReadTaskSecrets", ["secretsmanager:GetSecretValue"], [api_keys.arn, args.redis_secret_arn]),
        ]
        if args.image_repository_arn is not None:
            execution_statements.insert(
                1,
                statement("PullApiImage", list(ECR_PULL_ACTIONS), [args.image_repository_arn]),
            )
        execution_policy = aws.iam.RolePolicy(
            f"{name}-execution",
            role=args.identity.execution_role.id,
            policy=document(*execution_statements),
            opts=self.child_opts(),
        )

        # --- load balancer -------------------------------------------------------------------
        alb = aws.lb.LoadBalancer(
            f"{name}-alb",
            load_balancer_type="application",
            internal=False,
            subnets=list(args.public_subnet_ids),
            security_groups=[args.alb_security_group_id],
            drop_invalid_header_fields=True,
            enable_deletion_protection=s.alb_deletion_protection,
            enable_http2=True,
            idle_timeout=60,
            tags=self.tags(f"{name}-alb"),
            opts=self.child_opts(),
        )
        target_group = aws.lb.TargetGroup(
            f"{name}-tg",
            port=s.port,
            protocol="HTTP",
            target_type="ip",
            vpc_id=args.vpc_id,
            deregistration_delay=30,
            health_check=aws.lb.TargetGroupHealthCheckArgs(
                enabled=True,
                # Liveness: ECS replaces load-balancer-unhealthy tasks (readiness is the probe's).
                path=LIVENESS_PATH,
                protocol="HTTP",
                port="traffic-port",
                matcher="200",
                interval=15,
                timeout=5,
                healthy_threshold=2,
                unhealthy_threshold=3,
            ),
            tags=self.tags(f"{name}-tg"),
            opts=self.child_opts(),
        )
        forward = [aws.lb.ListenerDefaultActionArgs(type="forward", target_group_arn=target_group.arn)]
        if s.http_only:
            # Development only (cognis:httpOnly): port 80 forwards, there is no HTTPS listener. The tag is what
            # the tls-only policy accepts a forwarding HTTP listener for.
            listener = aws.lb.Listener(
                f"{name}-http",
                load_balancer_arn=alb.arn,
                port=80,
                protocol="HTTP",
                default_actions=forward,
                tags={**self.tags(f"{name}-http"), HTTP_ONLY_TAG: "true"},
                opts=self.child_opts(),
            )
        else:
            listener = aws.lb.Listener(
                f"{name}-https",
                load_balancer_arn=alb.arn,
                port=443,
                protocol="HTTPS",
                ssl_policy=s.ssl_policy,
                certificate_arn=s.certificate_arn,
                default_actions=forward,
                tags=self.tags(f"{name}-https"),
                opts=self.child_opts(),
            )
            aws.lb.Listener(
                f"{name}-http",
                load_balancer_arn=alb.arn,
                port=80,
                protocol="HTTP",
                default_actions=[
                    aws.lb.ListenerDefaultActionArgs(
                        type="redirect",
                        redirect=aws.lb.ListenerDefaultActionRedirectArgs(
                            protocol="HTTPS", port="443", status_code="HTTP_301"
                        ),
                    )
                ],
                tags=self.tags(f"{name}-http"),
                opts=self.child_opts(),
            )

        # --- cluster (its Container Insights log group first: retention and the stack's key) ----
        cluster_name = physical_name(args.prefix, "api", max_len=255)
        insights_logs = self.log_group(
            f"{name}-insights-logs",
            retention_days=s.log_retention_days,
            kms_key_arn=args.log_kms_key_arn,
            physical_name=container_insights_log_group(cluster_name),
        )
        cluster = aws.ecs.Cluster(
            f"{name}-cluster",
            name=cluster_name,
            settings=[aws.ecs.ClusterSettingArgs(name="containerInsights", value="enabled")],
            tags=self.tags(cluster_name),
            opts=self.child_opts(depends_on=[insights_logs]),
        )

        # --- task definition, service, autoscaling --------------------------------------------
        task_definition = aws.ecs.TaskDefinition(
            f"{name}-task",
            family=args.family,
            cpu=str(s.cpu),
            memory=str(s.memory),
            network_mode="awsvpc",
            requires_compatibilities=["FARGATE"],
            runtime_platform=aws.ecs.TaskDefinitionRuntimePlatformArgs(
                operating_system_family="LINUX", cpu_architecture=s.cpu_architecture
            ),
            execution_role_arn=args.identity.execution_role_arn,
            task_role_arn=args.identity.task_role_arn,
            volumes=[aws.ecs.TaskDefinitionVolumeArgs(name="tmp")],
            container_definitions=pulumi.Output.json_dumps(task_containers(args, log_group.name, api_keys.arn)),
            tags=self.tags(f"{name}-task"),
            opts=self.child_opts(),
        )
        # --- the schema migration: a one-off task with its own roles, run before the service -----
        migration = self._migration(name, args, cluster, log_group)

        service = aws.ecs.Service(
            f"{name}-service",
            cluster=cluster.arn,
            task_definition=task_definition.arn,
            launch_type="FARGATE",
            desired_count=s.desired_count,
            deployment_minimum_healthy_percent=100,
            deployment_maximum_percent=200,
            deployment_circuit_breaker=aws.ecs.ServiceDeploymentCircuitBreakerArgs(enable=True, rollback=True),
            health_check_grace_period_seconds=s.health_check_grace_s,
            network_configuration=aws.ecs.ServiceNetworkConfigurationArgs(
                subnets=list(args.private_subnet_ids),
                security_groups=[args.service_security_group_id],
                assign_public_ip=False,
            ),
            load_balancers=[
                aws.ecs.ServiceLoadBalancerArgs(
                    target_group_arn=target_group.arn, container_name=CONTAINER_NAME, container_port=s.port
                )
            ],
            availability_zone_rebalancing="ENABLED",
            enable_ecs_managed_tags=True,
            propagate_tags="SERVICE",
            enable_execute_command=False,
            wait_for_steady_state=True,
            # ECS reads secrets when a task starts: a new secret version (a rotated API key or
            # cache token) rolls the tasks over in the same `pulumi up`.
            force_new_deployment=True,
            triggers={
                "apiKeysSecretVersion": api_keys_version.version_id,
                "cacheAuthSecretVersion": args.redis_secret_version,
            },
            tags=self.tags(f"{name}-service"),
            # Autoscaling owns the running count after creation. Tasks start only when the roles' policies
            # exist (image pull, secrets, database, Bedrock), the Aurora instances accept connections and the
            # schema is migrated: otherwise a fast first deploy fails its tasks and the circuit breaker rolls back.
            opts=self.child_opts(
                depends_on=[listener, execution_policy, task_policy, migration, *args.database_instances],
                ignore_changes=["desired_count"],
            ),
        )
        scaling = aws.appautoscaling.Target(
            f"{name}-scaling",
            service_namespace="ecs",
            scalable_dimension="ecs:service:DesiredCount",
            resource_id=pulumi.Output.concat("service/", cluster.name, "/", service.name),
            min_capacity=s.min_count,
            max_capacity=s.max_count,
            tags=self.tags(f"{name}-scaling"),
            opts=self.child_opts(),
        )
        self.target_tracking_policy(
            f"{name}-cpu",
            scaling,
            target_value=s.cpu_target_percent,
            metric_type="ECSServiceAverageCPUUtilization",
        )
        self.target_tracking_policy(
            f"{name}-requests",
            scaling,
            target_value=s.requests_per_target,
            metric_type="ALBRequestCountPerTarget",
            resource_label=pulumi.Output.concat(alb.arn_suffix, "/", target_group.arn_suffix),
        )

        self.service_name = service.name
        self.task_definition_arn = task_definition.arn
        self.alb_dns_name = alb.dns_name
        self.alb_zone_id = alb.zone_id
        self.alb_arn_suffix = alb.arn_suffix
        self.target_group_arn_suffix = target_group.arn_suffix
        scheme = "http://" if s.http_only else "https://"
        self.api_url = (
            pulumi.Output.from_input(f"{scheme}{s.api_domain_name}")
            if s.api_domain_name
            else pulumi.Output.concat(scheme, alb.dns_name)
        )
        self.migration_task_role_arn = self.migration_task_role.arn
        self.cluster_name = cluster.name
        self.log_group_name = log_group.name
        self.log_group_arn = log_group.arn
        self.api_keys_secret_arn = api_keys.arn
        self.register_outputs(
            {
                "apiUrl": self.api_url,
                "albDnsName": self.alb_dns_name,
                "albZoneId": self.alb_zone_id,
                "clusterName": self.cluster_name,
                "serviceName": self.service_name,
                "logGroupName": self.log_group_name,
                "apiKeysSecretArn": self.api_keys_secret_arn,
            }
        )
