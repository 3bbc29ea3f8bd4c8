"""The CloudWatch dashboard's body: traffic, latency percentiles, per-stage latency (found by
``SEARCH``), errors, degraded answers, the dual store's outbox backlog, store health, targets and alarms,
laid out two widgets a row.
:class:`~.observability.Observability` creates the dashboard from it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .telemetry import READINESS_METRIC, names


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
    outbox_oldest_age_s: float = 300.0
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
    answers, the outbox backlog, store health (OpenSearch, Aurora, Redis, reranker), targets and alarms."""
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
            "Outbox: writes waiting for OpenSearch (rows, oldest age s)",
            [
                _metric(ns, names.OUTBOX_BACKLOG, svc, label="rows waiting"),
                _metric(ns, names.OUTBOX_OLDEST_AGE, svc, label="oldest row age (s)", yAxis="right"),
            ],
            d.region,
            stat="Maximum",  # a level every task reports for the same table, not a count to add up
            annotations={
                "horizontal": [{"label": "oldest age alarm", "value": d.outbox_oldest_age_s, "yAxis": "right"}]
            },
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
    # Lay widgets out left to right, a new row when one does not fit in the 24 columns (two half-width widgets a
    # row): whatever the count of half-width widgets, a full-width one starts a row of its own below them.
    x = y = row_height = 0
    for w in widgets:
        if x + w["width"] > 24:
            x, y, row_height = 0, y + row_height, 0
        w["x"], w["y"] = x, y
        x += w["width"]
        row_height = max(row_height, w["height"])
    return {"start": "-PT6H", "periodOverride": "inherit", "widgets": widgets}


def dashboard_url(region: str, dashboard_name: str) -> str:
    return (
        f"https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}#dashboards/dashboard/{dashboard_name}"
    )
