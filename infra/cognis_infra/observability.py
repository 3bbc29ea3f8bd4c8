"""Observability: SNS topic, alarms and one CloudWatch dashboard.

Application metrics come from the API's CloudWatch Embedded Metric Format log lines.
Their names and dimensions come from ``cognis_infra.metric_names``, a link to the module the
runtime emits them with (``cognis_memory/telemetry/names.py``), so the two sides cannot drift apart:

* ``RetrievalLatency`` / ``IngestLatency`` {service} - alarms on p95 and p99
  (extended statistics), dashboard p50/p95/p99;
* ``StageLatency`` {service, Pipeline, Stage} - per-stage p95 on the dashboard (retrieval stages
  found by a ``SEARCH`` expression: the runtime's stage registry names them, no list here);
* ``Requests`` / ``Errors`` / ``DegradedAnswers`` {service, Operation};
* ``JobsDeadLettered`` {service} - alarm on any dead-lettered ingest job;
* ``Ready`` {service} - written by each task's readiness probe (``GET /ready``: 1 or 0);
  alarm when any task is not ready for 3 of 5 minutes, dashboard shows the ready share.

Infrastructure alarms: ALB 5xx rate (metric math), unhealthy targets (liveness), healthy
targets and running tasks below the service minimum, OpenSearch CPU, JVM memory pressure and
red cluster status, Aurora capacity near its maximum ACU, the reranker endpoint's p95 model
latency and 5xx errors.

Every alarm says what missing data means (``treat_missing_data``): health alarms breach (no
data from a health metric means nothing is running or reporting), load and error alarms do
not (no traffic is not a fault). Percentile alarms ignore periods with too few samples to
compute the percentile (``evaluate_low_sample_count_percentiles = ignore``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws

from .base import CognisComponent
from .context import AwsContext
from .telemetry import READINESS_METRIC, names

#: Domains reserved for documentation (RFC 2606): an alarm address there reaches nobody.
RESERVED_EMAIL_DOMAINS: tuple[str, ...] = ("example.com", "example.org", "example.net", "example", "test", "invalid")
#: AWS's recommended OpenSearch free-storage threshold: 25 % of each node's storage (fact 38).
OPENSEARCH_FREE_STORAGE_FRACTION = 0.25
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
    opensearch_jvm_pressure_percent: float = 85.0
    aurora_acu_fraction: float = 0.9
    reranker_p95_ms: float = 500.0
    reranker_errors_per_5min: int = 5

    def __post_init__(self) -> None:
        if not 0 < self.aurora_acu_fraction <= 1:
            raise ValueError("cognis:auroraAcuAlarmFraction must be in (0, 1]")
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
    #: The cache's member clusters (one per node; ElastiCache reports per node) and how many there are.
    redis_member_clusters: pulumi.Input[Sequence[str]] | None = None
    redis_node_count: int = 0


@dataclass(frozen=True)
class DashboardInputs:
    """Resolved identifiers the dashboard body needs (plain strings)."""

    region: str
    account_id: str
    namespace: str
    service: str
    alb: str
    target_group: str
    opensearch_domain: str
    db_cluster: str
    db_max_acu: float
    redis_group: str
    ecs_cluster: str
    ecs_service: str
    reranker_endpoint: str | None
    reranker_variant: str
    retrieval_p95_ms: float
    alarm_arns: Sequence[str] = ()


def _metric(namespace: str, metric: str, dims: Mapping[str, str], **opts: Any) -> list:
    row: list = [namespace, metric]
    for k, v in dims.items():
        row += [k, v]
    if opts:
        row.append(opts)
    return row


def _widget(title: str, metrics: list, region: str, *, stat: str = "Sum", period: int = 60, **props: Any) -> dict:
    return {
        "type": "metric",
        "width": 12,
        "height": 6,
        "properties": {
            "title": title,
            "view": "timeSeries",
            "region": region,
            "stat": stat,
            "period": period,
            "metrics": metrics,
            **props,
        },
    }


def _redis_search(group: str, metric: str) -> str:
    """Metrics of every node of the replication group (ElastiCache has no group dimension)."""
    return f"SEARCH('{{AWS/ElastiCache,CacheClusterId}} MetricName=\"{metric}\" \"{group}\"', 'Average', 300)"


def _stage_search(namespace: str, service: str, pipeline: str, stat: str, period: int) -> str:
    """Every stage of one pipeline of this service: the runtime names its retrieval stages itself (a new
    stage needs no edit here), so the widget finds them instead of listing them. The metric schema is
    the exact dimension set ``StageLatency`` is emitted with; quoted values match exactly."""
    schema = ",".join((namespace, names.DIM_PIPELINE, names.DIM_STAGE, names.DIM_SERVICE))
    terms = f'MetricName="{names.STAGE_LATENCY}" {names.DIM_PIPELINE}="{pipeline}" {names.DIM_SERVICE}="{service}"'
    return f"SEARCH('{{{schema}}} {terms}', '{stat}', {period})"


def dashboard_body(d: DashboardInputs) -> dict:
    """The dashboard: traffic, latency percentiles, per-stage latency, errors, degraded
    answers, store health (OpenSearch, Aurora, Redis, reranker), targets and alarms."""
    ns, svc = d.namespace, {names.DIM_SERVICE: d.service}
    ops = (names.OPERATION_SEARCH, names.OPERATION_INGEST)
    alb = {"LoadBalancer": d.alb}
    es = {"DomainName": d.opensearch_domain, "ClientId": d.account_id}
    widgets = [
        _widget(
            "Traffic (requests / min)",
            [_metric(ns, names.REQUESTS, {**svc, names.DIM_OPERATION: op}, label=op) for op in ops]
            + [_metric("AWS/ApplicationELB", "RequestCount", alb, label="ALB requests")],
            d.region,
        ),
        _widget(
            "Retrieval latency (ms)",
            [_metric(ns, names.RETRIEVAL_LATENCY, svc, stat=p, label=p) for p in ("p50", "p95", "p99")],
            d.region,
            stat="p95",
            annotations={"horizontal": [{"label": "p95 alarm", "value": d.retrieval_p95_ms}]},
        ),
        _widget(
            "Ingest latency (ms)",
            [_metric(ns, names.INGEST_LATENCY, svc, stat=p, label=p) for p in ("p50", "p95", "p99")],
            d.region,
            stat="p95",
        ),
        _widget(
            "Retrieval stages p95 (ms)",
            [
                [
                    {
                        "expression": _stage_search(ns, d.service, names.PIPELINE_RETRIEVAL, "p95", 60),
                        "id": "stages",
                        "label": f"${{PROP('Dim.{names.DIM_STAGE}')}}",  # each series: its stage
                    }
                ]
            ],
            d.region,
            stat="p95",
        ),
        _widget(
            "Ingest stages p95 (ms)",
            [
                _metric(
                    ns,
                    names.STAGE_LATENCY,
                    {**svc, names.DIM_PIPELINE: names.PIPELINE_INGEST, names.DIM_STAGE: st},
                    label=st,
                )
                for st in names.INGEST_STAGES
            ],
            d.region,
            stat="p95",
        ),
        _widget(
            "Errors",
            [_metric(ns, names.ERRORS, {**svc, names.DIM_OPERATION: op}, label=f"{op} errors") for op in ops]
            + [
                _metric("AWS/ApplicationELB", "HTTPCode_Target_5XX_Count", alb, label="target 5xx"),
                _metric("AWS/ApplicationELB", "HTTPCode_ELB_5XX_Count", alb, label="ALB 5xx"),
            ],
            d.region,
        ),
        _widget(
            "Degraded answers and dead-lettered jobs",
            [
                _metric(ns, names.DEGRADED_ANSWERS, {**svc, names.DIM_OPERATION: op}, label=f"{op} degraded")
                for op in ops
            ]
            + [_metric(ns, names.JOBS_DEAD_LETTERED, svc, label="jobs dead-lettered")],
            d.region,
        ),
        _widget(
            "Extraction LLM: deferred extractions and repaired or unusable answers",
            [
                _metric(ns, names.EXTRACTIONS_DEFERRED, svc, label="extractions deferred"),
                _metric(ns, names.LLM_ANSWERS_REPAIRED, svc, label="answers repaired"),
                _metric(ns, names.LLM_ANSWERS_UNUSABLE, svc, label="answers unusable"),
            ],
            d.region,
        ),
        _widget(
            "OpenSearch health",
            [
                _metric("AWS/ES", "ClusterStatus.red", es, label="red"),
                _metric("AWS/ES", "ClusterStatus.yellow", es, label="yellow"),
                _metric("AWS/ES", "CPUUtilization", es, label="CPU %"),
                _metric("AWS/ES", "JVMMemoryPressure", es, label="JVM pressure %"),
                _metric("AWS/ES", "FreeStorageSpace", es, label="free storage (MB)", yAxis="right", stat="Minimum"),
            ],
            d.region,
            stat="Maximum",
            period=300,
        ),
        _widget(
            f"Aurora (max {d.db_max_acu:g} ACU)",
            [
                _metric("AWS/RDS", "ServerlessDatabaseCapacity", {"DBClusterIdentifier": d.db_cluster}, label="ACU"),
                _metric(
                    "AWS/RDS",
                    "DatabaseConnections",
                    {"DBClusterIdentifier": d.db_cluster},
                    label="connections",
                    yAxis="right",
                ),
            ],
            d.region,
            stat="Average",
            period=300,
            annotations={"horizontal": [{"label": "max ACU", "value": d.db_max_acu}]},
        ),
        _widget(
            "Redis",
            [
                [{"expression": _redis_search(d.redis_group, metric), "id": qid, "label": label}]
                for qid, metric, label in (
                    ("cpu", "EngineCPUUtilization", "engine CPU %"),
                    ("mem", "DatabaseMemoryUsagePercentage", "memory %"),
                    ("hit", "CacheHitRate", "hit rate %"),
                )
            ],
            d.region,
            stat="Average",
            period=300,
        ),
        _widget(
            "Load balancer targets",
            [
                _metric(
                    "AWS/ApplicationELB", "HealthyHostCount", {"TargetGroup": d.target_group, **alb}, label="healthy"
                ),
                _metric(
                    "AWS/ApplicationELB",
                    "UnHealthyHostCount",
                    {"TargetGroup": d.target_group, **alb},
                    label="unhealthy",
                ),
                _metric(
                    "AWS/ApplicationELB",
                    "TargetResponseTime",
                    alb,
                    label="response time p95 (s)",
                    stat="p95",
                    yAxis="right",
                ),
                _metric(
                    "AWS/ECS",
                    "CPUUtilization",
                    {"ClusterName": d.ecs_cluster, "ServiceName": d.ecs_service},
                    label="task CPU %",
                    yAxis="right",
                ),
                _metric(
                    "AWS/ECS",
                    "MemoryUtilization",
                    {"ClusterName": d.ecs_cluster, "ServiceName": d.ecs_service},
                    label="task memory %",
                    yAxis="right",
                ),
            ],
            d.region,
            stat="Maximum",
        ),
        _widget(
            "Readiness (GET /ready) and running tasks",
            [
                _metric(ns, READINESS_METRIC, svc, stat="Average", label="share of probes ready"),
                _metric(ns, READINESS_METRIC, svc, stat="Minimum", label="worst task ready"),
                _metric(
                    "ECS/ContainerInsights",
                    "RunningTaskCount",
                    {"ClusterName": d.ecs_cluster, "ServiceName": d.ecs_service},
                    stat="Minimum",
                    label="running tasks",
                    yAxis="right",
                ),
            ],
            d.region,
            stat="Average",
        ),
    ]
    if d.reranker_endpoint:
        sm = {"EndpointName": d.reranker_endpoint, "VariantName": d.reranker_variant}
        widgets.append(
            _widget(
                "Reranker endpoint",
                [
                    _metric("AWS/SageMaker", "ModelLatency", sm, stat="p95", label="model latency p95 (us)"),
                    _metric("AWS/SageMaker", "Invocations", sm, stat="Sum", label="invocations", yAxis="right"),
                    _metric("AWS/SageMaker", "Invocation5XXErrors", sm, stat="Sum", label="5xx", yAxis="right"),
                ],
                d.region,
                stat="p95",
            )
        )
    if d.alarm_arns:
        widgets.append(
            {
                "type": "alarm",
                "width": 24,
                "height": 4,
                "properties": {"title": "Alarms", "alarms": sorted(d.alarm_arns)},
            }
        )
    # Lay widgets out two per row.
    y = 0
    for i, w in enumerate(widgets):
        w["x"] = 0 if w["width"] == 24 else (i % 2) * 12
        w["y"] = y
        if w["width"] == 24 or i % 2 == 1:
            y += w["height"]
    return {"start": "-PT6H", "periodOverride": "inherit", "widgets": widgets}


def dashboard_url(region: str, dashboard_name: str) -> str:
    return (
        f"https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}#dashboards/dashboard/{dashboard_name}"
    )


class Observability(CognisComponent):
    """SNS alarm topic (KMS-encrypted), CloudWatch alarms and the dashboard."""

    topic_arn: pulumi.Output[str]
    dashboard_name: str
    dashboard_url: str
    alarm_names: list[str]

    def __init__(self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("cognis:observability:Observability", name, args.tags, opts)
        s = args.settings
        ctx = args.context
        p = args.prefix

        topic = aws.sns.Topic(
            f"{name}-alarms",
            display_name=f"{p} alarms",
            kms_master_key_id=args.kms_key_id,
            tags=self.tags(f"{name}-alarms"),
            opts=self.child_opts(),
        )
        aws.sns.TopicPolicy(
            f"{name}-alarms",
            arn=topic.arn,
            policy=pulumi.Output.json_dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Sid": "CloudWatchAlarms",
                            "Effect": "Allow",
                            "Principal": {"Service": ctx.service_principal("cloudwatch")},
                            "Action": "sns:Publish",
                            "Resource": topic.arn,
                            "Condition": {"StringEquals": {"aws:SourceAccount": ctx.account_id}},
                        },
                        {
                            "Sid": "TlsOnly",
                            "Effect": "Deny",
                            "Principal": "*",
                            "Action": "sns:Publish",
                            "Resource": topic.arn,
                            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                        },
                    ],
                }
            ),
            opts=self.child_opts(),
        )
        if s.alarm_email:
            aws.sns.TopicSubscription(
                f"{name}-email", topic=topic.arn, protocol="email", endpoint=s.alarm_email, opts=self.child_opts()
            )
        else:
            pulumi.log.warn("cognis:alarmEmail is not set: the alarm topic has no subscriber, alarms reach nobody")

        alarms: dict[str, aws.cloudwatch.MetricAlarm] = {}

        def alarm(key: str, description: str, *, treat_missing_data: str, **kwargs: Any) -> None:
            kwargs.setdefault("comparison_operator", "GreaterThanThreshold")
            if "extended_statistic" in kwargs:  # a percentile over too few samples says nothing
                kwargs["evaluate_low_sample_count_percentiles"] = "ignore"
            alarms[key] = aws.cloudwatch.MetricAlarm(
                f"{name}-{key}",
                name=f"{p}-{key}",
                alarm_description=description,
                actions_enabled=True,
                alarm_actions=[topic.arn],
                ok_actions=[topic.arn],
                treat_missing_data=treat_missing_data,
                tags=self.tags(f"{p}-{key}"),
                opts=self.child_opts(),
                **kwargs,
            )

        svc_dims = {names.DIM_SERVICE: args.service_name}
        for pct, threshold in (("p95", s.retrieval_p95_ms), ("p99", s.retrieval_p99_ms)):
            alarm(
                f"retrieval-latency-{pct}",
                f"Search latency {pct} above {threshold:g} ms for 3 of 5 minutes",
                treat_missing_data="notBreaching",
                namespace=args.metrics_namespace,
                metric_name=names.RETRIEVAL_LATENCY,
                dimensions=svc_dims,
                extended_statistic=pct,
                period=60,
                evaluation_periods=5,
                datapoints_to_alarm=3,
                threshold=threshold,
            )
        alarm(
            "jobs-dead-lettered",
            "Ingest jobs exhausted their retries (messages stored, memories not extracted)",
            treat_missing_data="notBreaching",
            namespace=args.metrics_namespace,
            metric_name=names.JOBS_DEAD_LETTERED,
            dimensions=svc_dims,
            statistic="Sum",
            period=300,
            evaluation_periods=1,
            threshold=0,
        )

        alb_dims = {"LoadBalancer": args.alb_arn_suffix}

        def alb_metric(qid: str, metric: str) -> aws.cloudwatch.MetricAlarmMetricQueryArgs:
            return aws.cloudwatch.MetricAlarmMetricQueryArgs(
                id=qid,
                return_data=False,
                metric=aws.cloudwatch.MetricAlarmMetricQueryMetricArgs(
                    namespace="AWS/ApplicationELB", metric_name=metric, dimensions=alb_dims, period=60, stat="Sum"
                ),
            )

        alarm(
            "http-5xx-rate",
            f"More than {s.error_rate_percent:g} % of requests answered 5xx for 3 of 5 minutes",
            treat_missing_data="notBreaching",
            metric_queries=[
                alb_metric("target5xx", "HTTPCode_Target_5XX_Count"),
                alb_metric("elb5xx", "HTTPCode_ELB_5XX_Count"),
                alb_metric("requests", "RequestCount"),
                aws.cloudwatch.MetricAlarmMetricQueryArgs(
                    id="rate",
                    label="5xx %",
                    expression="IF(requests > 0, 100 * (FILL(target5xx, 0) + FILL(elb5xx, 0)) / requests, 0)",
                    return_data=True,
                ),
            ],
            evaluation_periods=5,
            datapoints_to_alarm=3,
            threshold=s.error_rate_percent,
        )
        tg_dims = {"TargetGroup": args.target_group_arn_suffix, **alb_dims}
        alarm(
            "unhealthy-targets",
            "API tasks failing the liveness check (GET /health) for 3 minutes; ECS replaces them",
            treat_missing_data="notBreaching",  # no data: no targets, which healthy-targets catches
            namespace="AWS/ApplicationELB",
            metric_name="UnHealthyHostCount",
            dimensions=tg_dims,
            statistic="Maximum",
            period=60,
            evaluation_periods=3,
            threshold=0,
        )
        alarm(
            "healthy-targets",
            f"Fewer than {args.min_tasks} healthy API targets behind the load balancer for 3 minutes",
            treat_missing_data="breaching",
            namespace="AWS/ApplicationELB",
            metric_name="HealthyHostCount",
            dimensions=tg_dims,
            statistic="Minimum",
            period=60,
            evaluation_periods=3,
            comparison_operator="LessThanThreshold",
            threshold=args.min_tasks,
        )
        ecs_dims = {"ClusterName": args.ecs_cluster_name, "ServiceName": args.ecs_service_name}
        alarm(
            "running-tasks",
            f"Fewer than {args.min_tasks} API tasks running for 3 minutes",
            treat_missing_data="breaching",
            namespace="ECS/ContainerInsights",
            metric_name="RunningTaskCount",
            dimensions=ecs_dims,
            statistic="Minimum",
            period=60,
            evaluation_periods=3,
            comparison_operator="LessThanThreshold",
            threshold=args.min_tasks,
        )
        alarm(
            "not-ready",
            "An API task is not ready (GET /ready: a store unreachable) in 3 of 5 minutes",
            treat_missing_data="breaching",  # no probe reports: no task is up to be ready
            namespace=args.metrics_namespace,
            metric_name=READINESS_METRIC,
            dimensions=svc_dims,
            statistic="Minimum",
            period=60,
            evaluation_periods=5,
            datapoints_to_alarm=3,
            comparison_operator="LessThanThreshold",
            threshold=1,
        )

        es_dims = {"DomainName": args.opensearch_domain_name, "ClientId": ctx.account_id}
        alarm(
            "opensearch-cpu",
            f"OpenSearch CPU above {s.opensearch_cpu_percent:g} % for 15 minutes",
            treat_missing_data="notBreaching",
            namespace="AWS/ES",
            metric_name="CPUUtilization",
            dimensions=es_dims,
            statistic="Maximum",
            period=300,
            evaluation_periods=3,
            threshold=s.opensearch_cpu_percent,
        )
        alarm(
            "opensearch-jvm-pressure",
            f"OpenSearch JVM memory pressure above {s.opensearch_jvm_pressure_percent:g} % for 15 minutes",
            treat_missing_data="notBreaching",
            namespace="AWS/ES",
            metric_name="JVMMemoryPressure",
            dimensions=es_dims,
            statistic="Maximum",
            period=300,
            evaluation_periods=3,
            threshold=s.opensearch_jvm_pressure_percent,
        )
        alarm(
            "opensearch-red",
            "OpenSearch cluster status red (a primary shard is unassigned)",
            treat_missing_data="breaching",
            namespace="AWS/ES",
            metric_name="ClusterStatus.red",
            dimensions=es_dims,
            statistic="Maximum",
            period=60,
            evaluation_periods=1,
            comparison_operator="GreaterThanOrEqualToThreshold",
            threshold=1,
        )
        # The rest of AWS's recommended OpenSearch alarms (fact 38): yellow status, free storage (25 % of a
        # node's volume, in MiB, minimum over the nodes), blocked index writes, failed automated snapshots,
        # and the dedicated masters' CPU and JVM memory pressure.
        alarm(
            "opensearch-yellow",
            "OpenSearch cluster status yellow for 5 minutes (a replica shard is unassigned)",
            treat_missing_data="notBreaching",
            namespace="AWS/ES",
            metric_name="ClusterStatus.yellow",
            dimensions=es_dims,
            statistic="Maximum",
            period=60,
            evaluation_periods=5,
            comparison_operator="GreaterThanOrEqualToThreshold",
            threshold=1,
        )
        free_mib = args.opensearch_volume_gb * 1024 * OPENSEARCH_FREE_STORAGE_FRACTION
        alarm(
            "opensearch-free-storage",
            f"An OpenSearch node has {free_mib:g} MiB or less free storage (25 % of its volume)",
            treat_missing_data="notBreaching",
            namespace="AWS/ES",
            metric_name="FreeStorageSpace",
            dimensions=es_dims,
            statistic="Minimum",
            period=60,
            evaluation_periods=1,
            comparison_operator="LessThanOrEqualToThreshold",
            threshold=free_mib,
        )
        alarm(
            "opensearch-writes-blocked",
            "OpenSearch is blocking index writes (ClusterBlockException): new memories are not indexed for BM25",
            treat_missing_data="notBreaching",
            namespace="AWS/ES",
            metric_name="ClusterIndexWritesBlocked",
            dimensions=es_dims,
            statistic="Maximum",
            period=300,
            evaluation_periods=1,
            comparison_operator="GreaterThanOrEqualToThreshold",
            threshold=1,
        )
        alarm(
            "opensearch-snapshot-failure",
            "An automated OpenSearch snapshot failed",
            treat_missing_data="notBreaching",
            namespace="AWS/ES",
            metric_name="AutomatedSnapshotFailure",
            dimensions=es_dims,
            statistic="Maximum",
            period=60,
            evaluation_periods=1,
            comparison_operator="GreaterThanOrEqualToThreshold",
            threshold=1,
        )
        if args.opensearch_dedicated_masters:
            alarm(
                "opensearch-master-cpu",
                "OpenSearch dedicated master CPU at or above 50 % for 15 minutes",
                treat_missing_data="notBreaching",
                namespace="AWS/ES",
                metric_name="MasterCPUUtilization",
                dimensions=es_dims,
                statistic="Maximum",
                period=900,
                evaluation_periods=3,
                comparison_operator="GreaterThanOrEqualToThreshold",
                threshold=50,
            )
            alarm(
                "opensearch-master-jvm-pressure",
                "OpenSearch dedicated master JVM memory pressure at or above 95 % for 3 minutes",
                treat_missing_data="notBreaching",
                namespace="AWS/ES",
                metric_name="MasterJVMMemoryPressure",
                dimensions=es_dims,
                statistic="Maximum",
                period=60,
                evaluation_periods=3,
                comparison_operator="GreaterThanOrEqualToThreshold",
                threshold=95,
            )

        # Aurora memory: Serverless v2 gives about 2 GiB per ACU (fact 48); little freeable memory at the
        # capacity ceiling means the cluster needs a higher auroraMaxAcu.
        memory_floor = args.db_max_acu * AURORA_GIB_PER_ACU * 1024**3 * AURORA_FREEABLE_MEMORY_FRACTION
        alarm(
            "aurora-freeable-memory",
            f"Aurora freeable memory below {memory_floor / 1024**3:g} GiB "
            f"({AURORA_FREEABLE_MEMORY_FRACTION:.0%} of {args.db_max_acu:g} ACU) for 15 minutes",
            treat_missing_data="notBreaching",
            namespace="AWS/RDS",
            metric_name="FreeableMemory",
            dimensions={"DBClusterIdentifier": args.db_cluster_identifier},
            statistic="Minimum",
            period=300,
            evaluation_periods=3,
            comparison_operator="LessThanThreshold",
            threshold=memory_floor,
        )

        # Cache memory and evictions, the worst node of the replication group (metric math over its nodes).
        if args.redis_member_clusters is not None and args.redis_node_count:
            members = pulumi.Output.from_input(args.redis_member_clusters)

            def per_node(metric: str, stat: str) -> list[aws.cloudwatch.MetricAlarmMetricQueryArgs]:
                return [
                    aws.cloudwatch.MetricAlarmMetricQueryArgs(
                        id=f"n{i}",
                        return_data=False,
                        metric=aws.cloudwatch.MetricAlarmMetricQueryMetricArgs(
                            namespace="AWS/ElastiCache",
                            metric_name=metric,
                            dimensions={"CacheClusterId": members.apply(lambda m, i=i: sorted(m)[i])},
                            period=300,
                            stat=stat,
                        ),
                    )
                    for i in range(args.redis_node_count)
                ]

            ids = ", ".join(f"n{i}" for i in range(args.redis_node_count))
            for key, metric, stat, threshold, what in (
                ("cache-memory", "DatabaseMemoryUsagePercentage", "Maximum", CACHE_MEMORY_PERCENT,
                 f"Cache memory above {CACHE_MEMORY_PERCENT:g} % of maxmemory on a node for 15 minutes"),
                ("cache-evictions", "Evictions", "Sum", CACHE_EVICTIONS_PER_5MIN,
                 f"More than {CACHE_EVICTIONS_PER_5MIN} keys evicted per 5 minutes on a node for 15 minutes"),
            ):  # fmt: skip
                alarm(
                    key,
                    what,
                    treat_missing_data="notBreaching",
                    metric_queries=[
                        *per_node(metric, stat),
                        aws.cloudwatch.MetricAlarmMetricQueryArgs(
                            id="worst", label=f"worst node {metric}", expression=f"MAX([{ids}])", return_data=True
                        ),
                    ],
                    evaluation_periods=3,
                    threshold=threshold,
                )

        acu_threshold = round(args.db_max_acu * s.aurora_acu_fraction, 2)
        alarm(
            "aurora-capacity",
            f"Aurora at or above {acu_threshold:g} of {args.db_max_acu:g} ACU for 15 minutes",
            treat_missing_data="notBreaching",
            namespace="AWS/RDS",
            metric_name="ServerlessDatabaseCapacity",
            dimensions={"DBClusterIdentifier": args.db_cluster_identifier},
            statistic="Average",
            period=300,
            evaluation_periods=3,
            comparison_operator="GreaterThanOrEqualToThreshold",
            threshold=acu_threshold,
        )
        if args.reranker_endpoint_name is not None:
            sm_dims = {"EndpointName": args.reranker_endpoint_name, "VariantName": args.reranker_variant}
            alarm(
                "reranker-latency-p95",
                f"Reranker model latency p95 above {s.reranker_p95_ms:g} ms for 3 of 5 minutes",
                treat_missing_data="notBreaching",
                namespace="AWS/SageMaker",
                metric_name="ModelLatency",  # microseconds
                dimensions=sm_dims,
                extended_statistic="p95",
                period=60,
                evaluation_periods=5,
                datapoints_to_alarm=3,
                threshold=s.reranker_p95_ms * 1000.0,
            )
            alarm(
                "reranker-errors",
                f"More than {s.reranker_errors_per_5min} reranker invocations failed with 5xx in 5 minutes",
                treat_missing_data="notBreaching",
                namespace="AWS/SageMaker",
                metric_name="Invocation5XXErrors",
                dimensions=sm_dims,
                statistic="Sum",
                period=300,
                evaluation_periods=1,
                threshold=s.reranker_errors_per_5min,
            )

        dashboard_name = p
        inputs = pulumi.Output.all(
            alb=args.alb_arn_suffix,
            target_group=args.target_group_arn_suffix,
            db_cluster=args.db_cluster_identifier,
            redis_group=args.redis_replication_group_id,
            ecs_cluster=args.ecs_cluster_name,
            ecs_service=args.ecs_service_name,
            reranker_endpoint=args.reranker_endpoint_name,
            alarm_arns=[a.arn for a in alarms.values()],
        )
        body = inputs.apply(
            lambda v: json.dumps(
                dashboard_body(
                    DashboardInputs(
                        region=ctx.region,
                        account_id=ctx.account_id,
                        namespace=args.metrics_namespace,
                        service=args.service_name,
                        opensearch_domain=args.opensearch_domain_name,
                        db_max_acu=args.db_max_acu,
                        reranker_variant=args.reranker_variant,
                        retrieval_p95_ms=s.retrieval_p95_ms,
                        **v,
                    )
                )
            )
        )
        aws.cloudwatch.Dashboard(
            f"{name}-dashboard", dashboard_name=dashboard_name, dashboard_body=body, opts=self.child_opts()
        )

        self.topic_arn = topic.arn
        self.dashboard_name = dashboard_name
        self.dashboard_url = dashboard_url(ctx.region, dashboard_name)
        self.alarm_names = [f"{p}-{key}" for key in alarms]
        self.register_outputs(
            {
                "topicArn": self.topic_arn,
                "dashboardName": dashboard_name,
                "dashboardUrl": self.dashboard_url,
                "alarmNames": self.alarm_names,
            }
        )
