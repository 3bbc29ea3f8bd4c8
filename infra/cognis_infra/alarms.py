"""The stack's CloudWatch alarms, by what they watch: the API (latency, errors, health, readiness),
OpenSearch (AWS's recommended alarms), the data stores' capacity (Aurora, the cache) and the reranker.
Each alarm notifies the alarm topic when it fires and when it clears; every alarm says what missing
data means (``treat_missing_data``): health alarms breach, load and error alarms do not."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_aws as aws

from .base import CognisComponent
from .observability_args import (
    AURORA_FREEABLE_MEMORY_FRACTION,
    AURORA_GIB_PER_ACU,
    CACHE_EVICTIONS_PER_5MIN,
    CACHE_MEMORY_PERCENT,
    OPENSEARCH_FREE_STORAGE_FRACTION,
    OPENSEARCH_OLD_GEN_PERCENT,
    ObservabilityArgs,
)
from .telemetry import READINESS_METRIC, names


class AlarmMaker:
    """Makes the alarms of one :class:`~.observability.Observability` component: each notifies ``topic_arn``
    when it fires and when it clears, is named ``<prefix>-<key>`` and tagged and parented by ``component``;
    :attr:`alarms` keeps them by key, in the order they were made."""

    def __init__(self, component: CognisComponent, name: str, prefix: str, topic_arn: pulumi.Input[str]) -> None:
        self.component, self.name, self.prefix, self.topic_arn = component, name, prefix, topic_arn
        self.alarms: dict[str, aws.cloudwatch.MetricAlarm] = {}

    def __call__(self, key: str, description: str, *, treat_missing_data: str, **kwargs: Any) -> None:
        kwargs.setdefault("comparison_operator", "GreaterThanThreshold")
        if "extended_statistic" in kwargs:  # a percentile over too few samples says nothing
            kwargs["evaluate_low_sample_count_percentiles"] = "ignore"
        self.alarms[key] = aws.cloudwatch.MetricAlarm(
            f"{self.name}-{key}",
            name=f"{self.prefix}-{key}",
            alarm_description=description,
            actions_enabled=True,
            alarm_actions=[self.topic_arn],
            ok_actions=[self.topic_arn],
            treat_missing_data=treat_missing_data,
            tags=self.component.tags(f"{self.prefix}-{key}"),
            opts=self.component.child_opts(),
            **kwargs,
        )


def api_alarms(alarm: AlarmMaker, args: ObservabilityArgs) -> None:
    """The API's: search latency p95/p99, dead-lettered jobs, the outbox's oldest row, 5xx rate, liveness, healthy
    targets, running tasks, readiness."""
    s = args.settings
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
    # The dual store's outbox: PostgreSQL writes still to push to OpenSearch. Every API task reports the same
    # shared table once a minute (Maximum over them); a row older than the threshold in 3 of 5 minutes means
    # the drain is stuck or outrun, and new memories are missing from keyword search. No data is not a fault:
    # an empty outbox reports 0, and no report at all means no task runs, which running-tasks and not-ready
    # catch (a store without an outbox never reports).
    alarm(
        "outbox-oldest-age",
        f"The oldest write waiting for OpenSearch is older than {s.outbox_oldest_age_s:g} s in 3 of 5 minutes "
        "(keyword search is missing new memories)",
        treat_missing_data="notBreaching",
        namespace=args.metrics_namespace,
        metric_name=names.OUTBOX_OLDEST_AGE,
        dimensions=svc_dims,
        statistic="Maximum",
        period=60,
        evaluation_periods=5,
        datapoints_to_alarm=3,
        threshold=s.outbox_oldest_age_s,
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


def opensearch_alarms(alarm: AlarmMaker, args: ObservabilityArgs) -> None:
    """OpenSearch's: CPU, JVM memory pressure (whole heap and old generation), nodes missing for a day, red and
    yellow status, free storage, blocked writes, snapshots, dedicated masters."""
    s, ctx = args.settings, args.context
    es_dims = {"DomainName": args.opensearch_domain_name, "ClientId": ctx.account_id}
    # CPU and JVM memory pressure as AWS recommends them (fact 38): CPU at or above the threshold (80 %) in
    # 3 consecutive 15-minute periods, JVM memory pressure at or above it (95 %) in 3 consecutive minutes,
    # and the old generation's share of the heap at or above 80 % in 3 consecutive minutes.
    alarm(
        "opensearch-cpu",
        f"OpenSearch CPU at or above {s.opensearch_cpu_percent:g} % in 3 consecutive 15-minute periods",
        treat_missing_data="notBreaching",
        namespace="AWS/ES",
        metric_name="CPUUtilization",
        dimensions=es_dims,
        statistic="Maximum",
        period=900,
        evaluation_periods=3,
        comparison_operator="GreaterThanOrEqualToThreshold",
        threshold=s.opensearch_cpu_percent,
    )
    alarm(
        "opensearch-jvm-pressure",
        f"OpenSearch JVM memory pressure at or above {s.opensearch_jvm_pressure_percent:g} % for 3 minutes",
        treat_missing_data="notBreaching",
        namespace="AWS/ES",
        metric_name="JVMMemoryPressure",
        dimensions=es_dims,
        statistic="Maximum",
        period=60,
        evaluation_periods=3,
        comparison_operator="GreaterThanOrEqualToThreshold",
        threshold=s.opensearch_jvm_pressure_percent,
    )
    alarm(
        "opensearch-old-gen-jvm-pressure",
        f"OpenSearch old-generation JVM memory pressure at or above {OPENSEARCH_OLD_GEN_PERCENT:g} % for 3 minutes",
        treat_missing_data="notBreaching",
        namespace="AWS/ES",
        metric_name="OldGenJVMMemoryPressure",
        dimensions=es_dims,
        statistic="Maximum",
        period=60,
        evaluation_periods=3,
        comparison_operator="GreaterThanOrEqualToThreshold",
        threshold=OPENSEARCH_OLD_GEN_PERCENT,
    )
    # A node unreachable for a whole day: the fewest nodes seen in one day below the domain's node count
    # (data nodes and dedicated masters). Missing data for a day means the domain reports nothing: breach.
    if args.opensearch_node_count:
        alarm(
            "opensearch-nodes",
            f"OpenSearch had fewer than {args.opensearch_node_count} nodes for a day (a node is unreachable)",
            treat_missing_data="breaching",
            namespace="AWS/ES",
            metric_name="Nodes",
            dimensions=es_dims,
            statistic="Minimum",
            period=86400,
            evaluation_periods=1,
            comparison_operator="LessThanThreshold",
            threshold=args.opensearch_node_count,
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
    # and the dedicated masters' CPU and JVM memory pressure (whole heap and old generation).
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
            "OpenSearch dedicated master CPU at or above 50 % in 3 consecutive 15-minute periods",
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
        alarm(
            "opensearch-master-old-gen-jvm-pressure",
            f"OpenSearch dedicated master old-generation JVM memory pressure at or above "
            f"{OPENSEARCH_OLD_GEN_PERCENT:g} % for 3 minutes",
            treat_missing_data="notBreaching",
            namespace="AWS/ES",
            metric_name="MasterOldGenJVMMemoryPressure",
            dimensions=es_dims,
            statistic="Maximum",
            period=60,
            evaluation_periods=3,
            comparison_operator="GreaterThanOrEqualToThreshold",
            threshold=OPENSEARCH_OLD_GEN_PERCENT,
        )


def store_capacity_alarms(alarm: AlarmMaker, args: ObservabilityArgs) -> None:
    """The data stores' capacity: Aurora's freeable memory, the cache's memory and evictions (worst node), Aurora's ACU."""
    s = args.settings
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


def reranker_alarms(alarm: AlarmMaker, args: ObservabilityArgs) -> None:
    """The reranker endpoint's (when there is one): model latency p95 and 5xx errors."""
    s = args.settings
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
