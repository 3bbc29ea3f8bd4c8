"""Stack configuration (``cognis:*`` keys) read into typed, validated dataclasses.

Every key has a type, a description and (unless required) a default in the config schema of
``Pulumi.yaml``; ``Pulumi.example.yaml`` shows them all. The defaults here are the same (a
test keeps them equal). Values are checked before any resource is declared, so a typo fails
``pulumi preview`` with a message naming the key instead of failing half-way through
``pulumi up``.

Extra tags for every resource come from the AWS provider's ``aws:defaultTags`` (the provider
applies them to everything it creates); the program also copies them, with ``Project``,
``Stack`` and ``ManagedBy``, onto each resource's own ``tags``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pulumi

from .base import base_tags
from .cache import CacheSettings, validate_auth_token
from .database import DatabaseSettings
from .naming import slug
from .network import NetworkSettings
from .observability import ObservabilitySettings
from .reranker import RerankerSettings
from .search import SearchSettings, domain_name_for
from .service_args import ServiceSettings
from .telemetry import names

NAMESPACE = "cognis"
PROJECT_TAG = "cognis-memory"
#: The repository root of this package's checkout (the program passes its own checkout's root instead).
REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class StackConfig:
    """Everything the program needs from configuration."""

    project: str
    stack: str
    #: ``cognis-<stack>``: the start of every physical name.
    prefix: str
    tags: dict[str, str]
    service_name: str
    metrics_namespace: str
    alb_ingress_cidrs: tuple[str, ...]
    #: Zone ids of the AZs to use (empty: the first ``azCount`` by zone id).
    availability_zone_ids: tuple[str, ...]
    #: ``protect`` the stateful resources (Aurora, OpenSearch, the KMS key, ECR).
    protect: bool
    #: Full image URI (``cognis:image``); else a tag in the stack's repository (``cognis:imageTag``);
    #: else the program builds the image from ``build_context``.
    image: str | None
    image_tag: str | None
    #: The checkout the image is built from (the program's own) and the Dockerfile's base image (None: its default).
    build_context: Path
    base_image: str | None
    network: NetworkSettings
    search: SearchSettings
    opensearch_domain_name: str
    database: DatabaseSettings
    cache: CacheSettings
    reranker: RerankerSettings
    service: ServiceSettings
    observability: ObservabilitySettings
    #: Secrets (pulumi.Output marked secret).
    api_key: pulumi.Output[str]
    cache_auth_token: pulumi.Output[str]

    @property
    def builds_image(self) -> bool:
        return self.image is None and self.image_tag is None


class _Reader:
    """Typed access to ``cognis:*`` keys with the dataclass defaults as fallbacks."""

    def __init__(self, config: pulumi.Config) -> None:
        self.c = config

    def str(self, key: str, default: Any) -> Any:
        v = self.c.get(key)
        return default if v is None or v == "" else v

    def int(self, key: str, default: int) -> int:
        v = self.c.get_int(key)
        return default if v is None else v

    def float(self, key: str, default: float) -> float:
        v = self.c.get_float(key)
        return default if v is None else v

    def bool(self, key: str, default: bool) -> bool:
        v = self.c.get_bool(key)
        return default if v is None else v

    def obj(self, key: str, default: Any) -> Any:
        v = self.c.get_object(key)
        return default if v is None else v


def _defaults(cls: type) -> dict[str, Any]:
    return {f.name: f.default for f in fields(cls)}


def _check_api_key(key: str) -> str:
    if len(key) < 24 or any(ch in key for ch in "=, \t\n"):
        raise ValueError(
            "cognis:apiKey must be at least 24 characters without '=', ',' or whitespace; generate one with "
            "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    return key


def _default_tags(aws_config: Any) -> dict[str, str]:
    """``aws:defaultTags.tags`` of the stack config (the provider applies them to every resource)."""
    default_tags = aws_config.get_object("defaultTags") if aws_config is not None else None
    tags = (default_tags or {}).get("tags") or {}
    if not isinstance(tags, dict):
        raise ValueError("aws:defaultTags must be {tags: {Name: value, ...}}")
    return {str(k): str(v) for k, v in tags.items()}


def load(
    config: pulumi.Config | None = None,
    stack: str | None = None,
    project: str | None = None,
    aws_config: Any = None,
    build_context: Path | None = None,
) -> StackConfig:
    """Read and validate the stack configuration."""
    c = config or pulumi.Config(NAMESPACE)
    if config is None and aws_config is None:
        aws_config = pulumi.Config("aws")
    r = _Reader(c)
    stack = stack or pulumi.get_stack()
    project = project or pulumi.get_project()
    prefix = slug(f"cognis-{stack}")

    d = _defaults(NetworkSettings)
    az_count = r.int("azCount", d["az_count"])
    network = NetworkSettings(
        cidr=r.str("vpcCidr", d["cidr"]),
        az_count=az_count,
        nat_gateways=r.int("natGateways", 0) or az_count,  # 0: one per AZ
        interface_endpoints=tuple(r.obj("vpcInterfaceEndpoints", list(d["interface_endpoints"]))),
        flow_log_retention_days=r.int("logRetentionDays", d["flow_log_retention_days"]),
    )
    zone_ids = tuple(str(z) for z in r.obj("availabilityZoneIds", []))

    d = _defaults(SearchSettings)
    instance_count = r.int("opensearchInstanceCount", d["instance_count"])
    search = SearchSettings(
        engine_version=r.str("opensearchEngineVersion", d["engine_version"]),
        instance_type=r.str("opensearchInstanceType", d["instance_type"]),
        instance_count=instance_count,
        zone_count=min(az_count, 3, instance_count),
        volume_size_gb=r.int("opensearchVolumeGb", d["volume_size_gb"]),
        volume_iops=r.int("opensearchIops", d["volume_iops"]),
        volume_throughput_mibps=r.int("opensearchThroughputMibps", d["volume_throughput_mibps"]),
        dedicated_master_type=r.str("opensearchDedicatedMasterType", None),
        log_retention_days=r.int("logRetentionDays", d["log_retention_days"]),
    )

    d = _defaults(DatabaseSettings)
    database = DatabaseSettings(
        engine_version=r.str("auroraEngineVersion", d["engine_version"]),
        min_acu=r.float("auroraMinAcu", d["min_acu"]),
        max_acu=r.float("auroraMaxAcu", d["max_acu"]),
        instance_count=r.int("auroraInstances", d["instance_count"]),
        backup_retention_days=r.int("auroraBackupRetentionDays", d["backup_retention_days"]),
        database_name=r.str("dbName", d["database_name"]),
        deletion_protection=r.bool("dbDeletionProtection", d["deletion_protection"]),
        log_retention_days=r.int("logRetentionDays", d["log_retention_days"]),
        allow_major_version_upgrade=r.bool("auroraAllowMajorVersionUpgrade", d["allow_major_version_upgrade"]),
    )

    d = _defaults(CacheSettings)
    cache = CacheSettings(
        engine=r.str("cacheEngine", d["engine"]),
        engine_version=r.str("cacheEngineVersion", None),
        node_type=r.str("cacheNodeType", d["node_type"]),
        node_count=r.int("cacheNodes", d["node_count"]),
        auth_token_update_strategy=r.str("cacheAuthTokenUpdateStrategy", d["auth_token_update_strategy"]),
        log_retention_days=r.int("logRetentionDays", d["log_retention_days"]),
    )

    d = _defaults(RerankerSettings)
    reranker = RerankerSettings(
        enabled=r.bool("rerankerEnabled", d["enabled"]),
        model_s3_uri=r.str("rerankerModelS3Uri", None),
        instance_type=r.str("rerankerInstanceType", d["instance_type"]),
        min_instances=r.int("rerankerMinInstances", d["min_instances"]),
        max_instances=r.int("rerankerMaxInstances", d["max_instances"]),
        invocations_per_instance=r.int("rerankerInvocationsPerInstance", d["invocations_per_instance"]),
        image=r.str("rerankerImage", None),
        max_client_batch=r.int("rerankerMaxClientBatch", d["max_client_batch"]),
        log_retention_days=r.int("logRetentionDays", d["log_retention_days"]),
    )

    d = _defaults(ServiceSettings)
    service = ServiceSettings(
        certificate_arn=r.str("certificateArn", None),
        http_only=r.bool("httpOnly", d["http_only"]),
        cpu=r.int("cpu", d["cpu"]),
        memory=r.int("memory", d["memory"]),
        desired_count=r.int("desiredCount", d["desired_count"]),
        min_count=r.int("minCount", d["min_count"]),
        max_count=r.int("maxCount", d["max_count"]),
        cpu_target_percent=r.float("cpuTargetPercent", d["cpu_target_percent"]),
        requests_per_target=r.int("requestsPerTarget", d["requests_per_target"]),
        cpu_architecture=r.str("cpuArchitecture", d["cpu_architecture"]),
        ssl_policy=r.str("albSslPolicy", d["ssl_policy"]),
        log_retention_days=r.int("logRetentionDays", d["log_retention_days"]),
        alb_deletion_protection=r.bool("albDeletionProtection", d["alb_deletion_protection"]),
        api_domain_name=r.str("apiDomainName", None),
        bedrock_model_id=r.str("bedrockModelId", None),
        bedrock_extra_model_ids=tuple(r.obj("bedrockExtraModelIds", [])),
        first_tenant=r.str("firstTenant", d["first_tenant"]),
        telemetry_mode=r.str("telemetryMode", d["telemetry_mode"]),
        traces=r.bool("traces", d["traces"]),
        trace_sample_ratio=r.float("traceSampleRatio", d["trace_sample_ratio"]),
        adot_collector_image=r.str("adotCollectorImage", d["adot_collector_image"]),
        embedding_model=r.str("embeddingModel", d["embedding_model"]),
        opensearch_shards=r.int("opensearchShards", d["opensearch_shards"]),
    )

    d = _defaults(ObservabilitySettings)
    observability = ObservabilitySettings(
        alarm_email=r.str("alarmEmail", None),
        retrieval_p95_ms=r.float("retrievalP95Ms", d["retrieval_p95_ms"]),
        retrieval_p99_ms=r.float("retrievalP99Ms", d["retrieval_p99_ms"]),
        error_rate_percent=r.float("errorRatePercent", d["error_rate_percent"]),
        opensearch_cpu_percent=r.float("opensearchCpuPercent", d["opensearch_cpu_percent"]),
        opensearch_jvm_pressure_percent=r.float("opensearchJvmPressurePercent", d["opensearch_jvm_pressure_percent"]),
        aurora_acu_fraction=r.float("auroraAcuAlarmFraction", d["aurora_acu_fraction"]),
        reranker_p95_ms=r.float("rerankerP95Ms", d["reranker_p95_ms"]),
        reranker_errors_per_5min=r.int("rerankerErrorsPer5Min", d["reranker_errors_per_5min"]),
        outbox_oldest_age_s=r.float("outboxOldestAgeSeconds", d["outbox_oldest_age_s"]),
    )

    image = r.str("image", None)
    image_tag = r.str("imageTag", None)
    if image and image_tag:
        raise ValueError("set either cognis:image (a full image URI) or cognis:imageTag, not both")

    cidrs = tuple(r.obj("albIngressCidrs", ["0.0.0.0/0"]))
    if not cidrs:
        raise ValueError("cognis:albIngressCidrs must list at least one CIDR")

    return StackConfig(
        project=project,
        stack=stack,
        prefix=prefix,
        tags=base_tags(PROJECT_TAG, stack, _default_tags(aws_config)),
        service_name=r.str("serviceName", prefix),
        metrics_namespace=r.str("metricsNamespace", names.DEFAULT_NAMESPACE),
        alb_ingress_cidrs=cidrs,
        availability_zone_ids=zone_ids,
        protect=r.bool("protect", True),
        image=image,
        image_tag=image_tag,
        build_context=build_context or REPO_ROOT,
        base_image=r.str("baseImage", None),
        network=network,
        search=search,
        opensearch_domain_name=r.str("opensearchDomainName", None) or domain_name_for(stack),
        database=database,
        cache=cache,
        reranker=reranker,
        service=service,
        observability=observability,
        api_key=c.require_secret("apiKey").apply(_check_api_key),
        cache_auth_token=c.require_secret("cacheAuthToken").apply(validate_auth_token),
    )
