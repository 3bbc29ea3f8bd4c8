"""Stack configuration (``cognis:*`` keys) read into typed, validated dataclasses.

Every key, its default and its meaning is listed in ``Pulumi.example.yaml``. Values are
checked here, before any resource is declared, so a typo fails ``pulumi preview`` with a
message naming the key instead of failing half-way through ``pulumi up``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import pulumi

from .base import base_tags
from .cache import CacheSettings, validate_auth_token
from .database import DatabaseSettings
from .network import NetworkSettings
from .observability import ObservabilitySettings
from .reranker import RerankerSettings
from .search import SearchSettings, domain_name_for
from .service import ServiceSettings
from .telemetry import names

NAMESPACE = "cognis"
PROJECT_TAG = "cognis-memory"


@dataclass(frozen=True)
class StackConfig:
    """Everything the program needs from configuration."""

    project: str
    stack: str
    prefix: str
    tags: dict[str, str]
    service_name: str
    metrics_namespace: str
    alb_ingress_cidrs: tuple[str, ...]
    #: Full image URI (``cognis:image``); else ECR repository + ``cognis:imageTag``.
    image: str | None
    image_tag: str | None
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
    redis_auth_token: pulumi.Output[str]


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


def load(config: pulumi.Config | None = None, stack: str | None = None, project: str | None = None) -> StackConfig:
    """Read and validate the stack configuration."""
    c = config or pulumi.Config(NAMESPACE)
    r = _Reader(c)
    stack = stack or pulumi.get_stack()
    project = project or pulumi.get_project()
    prefix = f"cognis-{stack}"

    d = _defaults(NetworkSettings)
    az_count = r.int("azCount", d["az_count"])
    network = NetworkSettings(
        cidr=r.str("vpcCidr", d["cidr"]),
        az_count=az_count,
        nat_gateways=r.int("natGateways", az_count),
        interface_endpoints=tuple(r.obj("vpcInterfaceEndpoints", list(d["interface_endpoints"]))),
        flow_log_retention_days=r.int("logRetentionDays", d["flow_log_retention_days"]),
    )

    d = _defaults(SearchSettings)
    search = SearchSettings(
        engine_version=r.str("opensearchEngineVersion", d["engine_version"]),
        instance_type=r.str("opensearchInstanceType", d["instance_type"]),
        instance_count=r.int("opensearchInstanceCount", d["instance_count"]),
        zone_count=min(az_count, 3),
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
    )

    d = _defaults(CacheSettings)
    cache = CacheSettings(
        node_type=r.str("redisNodeType", d["node_type"]),
        engine_version=r.str("redisEngineVersion", d["engine_version"]),
        node_count=r.int("redisNodes", d["node_count"]),
        log_retention_days=r.int("logRetentionDays", d["log_retention_days"]),
    )

    d = _defaults(RerankerSettings)
    reranker = RerankerSettings(
        enabled=r.bool("rerankerEnabled", d["enabled"]),
        model_id=r.str("rerankerModelId", d["model_id"]),
        instance_type=r.str("rerankerInstanceType", d["instance_type"]),
        min_instances=r.int("rerankerMinInstances", d["min_instances"]),
        max_instances=r.int("rerankerMaxInstances", d["max_instances"]),
        invocations_per_instance=r.int("rerankerInvocationsPerInstance", d["invocations_per_instance"]),
        image=r.str("rerankerImage", None),
        max_client_batch=r.int("rerankerMaxClientBatch", d["max_client_batch"]),
    )

    d = _defaults(ServiceSettings)
    service = ServiceSettings(
        certificate_arn=c.require("certificateArn"),
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
        bedrock_model_id=r.str("bedrockModelId", d["bedrock_model_id"]),
        bedrock_extra_model_ids=tuple(r.obj("bedrockExtraModelIds", [])),
        first_tenant=r.str("firstTenant", d["first_tenant"]),
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
    )

    image = r.str("image", None)
    image_tag = r.str("imageTag", None)
    if image and image_tag:
        raise ValueError("set either cognis:image (a full image URI) or cognis:imageTag, not both")

    cidrs = tuple(r.obj("albIngressCidrs", ["0.0.0.0/0"]))
    if not cidrs:
        raise ValueError("cognis:albIngressCidrs must list at least one CIDR")

    extra_tags = r.obj("tags", {})
    if not isinstance(extra_tags, dict):
        raise ValueError("cognis:tags must be a map of tag names to values")

    return StackConfig(
        project=project,
        stack=stack,
        prefix=prefix,
        tags=base_tags(PROJECT_TAG, stack, {str(k): str(v) for k, v in extra_tags.items()}),
        service_name=r.str("serviceName", names.DEFAULT_SERVICE),
        metrics_namespace=r.str("metricsNamespace", names.DEFAULT_NAMESPACE),
        alb_ingress_cidrs=cidrs,
        image=image,
        image_tag=image_tag,
        network=network,
        search=search,
        opensearch_domain_name=r.str("opensearchDomainName", None) or domain_name_for(stack),
        database=database,
        cache=cache,
        reranker=reranker,
        service=service,
        observability=observability,
        api_key=c.require_secret("apiKey").apply(_check_api_key),
        redis_auth_token=c.require_secret("redisAuthToken").apply(validate_auth_token),
    )
