"""What the observability component is given: its stack settings (alarm recipient and thresholds)
and the identifiers of what it watches; the fixed thresholds taken from AWS's recommendations."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi

from .context import AwsContext

#: Domains reserved for documentation (RFC 2606): an alarm address there reaches nobody.
RESERVED_EMAIL_DOMAINS: tuple[str, ...] = ("example.com", "example.org", "example.net", "example", "test", "invalid")
#: AWS's recommended OpenSearch free-storage threshold: 25 % of each node's storage (fact 38).
OPENSEARCH_FREE_STORAGE_FRACTION = 0.25
#: AWS's recommended OpenSearch old-generation JVM memory pressure threshold, percent (fact 38).
OPENSEARCH_OLD_GEN_PERCENT = 80.0
#: Aurora Serverless v2: about 2 GiB of memory per ACU (fact 48); alarm below 10 % of the ceiling's memory.
AURORA_GIB_PER_ACU = 2
AURORA_FREEABLE_MEMORY_FRACTION = 0.10
#: Cache alarms: memory use of a node above this share of maxmemory; evictions above this per 5 minutes.
CACHE_MEMORY_PERCENT = 80.0
CACHE_EVICTIONS_PER_5MIN = 100


@dataclass(frozen=True)
class ObservabilitySettings:
    """Alarm recipients and thresholds (stack config)."""

    alarm_email: str | None = None
    retrieval_p95_ms: float = 500.0
    retrieval_p99_ms: float = 1000.0
    error_rate_percent: float = 1.0
    opensearch_cpu_percent: float = 80.0
    opensearch_jvm_pressure_percent: float = 95.0
    aurora_acu_fraction: float = 0.9
    reranker_p95_ms: float = 500.0
    reranker_errors_per_5min: int = 5
    #: The oldest row of the dual store's outbox older than this, seconds, in 3 of 5 minutes: OpenSearch is
    #: behind (new memories missing from keyword search). The drain pushes a write within a second or two, and
    #: retries a row at most 5 minutes apart, so a row older than 5 minutes is stuck, not merely queued.
    outbox_oldest_age_s: float = 300.0

    def __post_init__(self) -> None:
        if not 0 < self.aurora_acu_fraction <= 1:
            raise ValueError("cognis:auroraAcuAlarmFraction must be in (0, 1]")
        if self.outbox_oldest_age_s <= 0:
            raise ValueError("cognis:outboxOldestAgeSeconds must be above 0")
        if self.alarm_email is not None and "@" not in self.alarm_email:
            raise ValueError(f"cognis:alarmEmail is not an e-mail address: {self.alarm_email}")
        domain = (self.alarm_email or "").rpartition("@")[2].lower()
        if domain in RESERVED_EMAIL_DOMAINS or domain.endswith(tuple(f".{d}" for d in RESERVED_EMAIL_DOMAINS)):
            raise ValueError(
                f"cognis:alarmEmail {self.alarm_email} is an example address (reserved domain {domain}): set the "
                "address of whoever answers the alarms"
            )


@dataclass
class ObservabilityArgs:
    settings: ObservabilitySettings
    context: AwsContext
    prefix: str
    metrics_namespace: str
    service_name: str
    alb_arn_suffix: pulumi.Input[str]
    target_group_arn_suffix: pulumi.Input[str]
    opensearch_domain_name: str
    db_cluster_identifier: pulumi.Input[str]
    db_max_acu: float
    redis_replication_group_id: pulumi.Input[str]
    ecs_cluster_name: pulumi.Input[str]
    ecs_service_name: pulumi.Input[str]
    #: The service's minimum task count: fewer healthy targets or running tasks alarm.
    min_tasks: int
    reranker_endpoint_name: pulumi.Input[str] | None
    reranker_variant: str
    kms_key_id: pulumi.Input[str]
    tags: Mapping[str, str] = field(default_factory=dict)
    #: gp3 volume of each OpenSearch data node, GiB (the free-storage alarm fires at 25 % of it).
    opensearch_volume_gb: int = 100
    #: The domain runs dedicated master nodes (their CPU and JVM alarms).
    opensearch_dedicated_masters: bool = False
    #: Nodes of the domain (data nodes and dedicated masters); fewer for a day alarms (0: no such alarm).
    opensearch_node_count: int = 0
    #: The cache's member clusters (one per node; ElastiCache reports per node) and how many there are.
    redis_member_clusters: pulumi.Input[Sequence[str]] | None = None
    redis_node_count: int = 0
