"""Observability: alarm metrics, statistics, thresholds and actions; topic; dashboard."""

from __future__ import annotations

import json

import pytest

from cognis_infra.observability import ObservabilitySettings
from cognis_infra.telemetry import READINESS_METRIC, names
from tests.infra.infra_harness import ACCOUNT, REGION, parse_json, run_program

ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"
SERVICE = "cognis-test"  # the default `service` dimension carries the stack


@pytest.fixture(scope="module")
def alarms(program):
    return {a["name"].removeprefix("cognis-test-"): a for a in program.of_type(ALARM)}


def test_expected_alarms_exist(alarms):
    assert set(alarms) == {
        "retrieval-latency-p95",
        "retrieval-latency-p99",
        "jobs-dead-lettered",
        "http-5xx-rate",
        "unhealthy-targets",
        "healthy-targets",
        "running-tasks",
        "not-ready",
        "opensearch-cpu",
        "opensearch-jvm-pressure",
        "opensearch-red",
        "aurora-capacity",
        "reranker-latency-p95",
        "reranker-errors",
        # AWS's recommended OpenSearch alarms, Aurora memory, cache memory and evictions (issue 22, item 12)
        "opensearch-yellow",
        "opensearch-free-storage",
        "opensearch-writes-blocked",
        "opensearch-snapshot-failure",
        "aurora-freeable-memory",
        "cache-memory",
        "cache-evictions",
        # AWS's recommended old-generation JVM and nodes-missing-for-a-day alarms (issue 32, item 9)
        "opensearch-old-gen-jvm-pressure",
        "opensearch-nodes",
        # the dual store's outbox: OpenSearch behind PostgreSQL
        "outbox-oldest-age",
    }


def test_every_alarm_notifies_the_encrypted_topic(program, alarms):
    topic = program.one("aws:sns/topic:Topic")
    assert topic["kmsMasterKeyId"] == program.one("aws:kms/key:Key").outputs["keyId"]
    for alarm in alarms.values():
        assert alarm["alarmActions"] == [topic.outputs["arn"]]
        assert alarm["okActions"] == [topic.outputs["arn"]]
        assert alarm["actionsEnabled"] is True
    sub = program.one("aws:sns/topicSubscription:TopicSubscription")
    assert (sub["protocol"], sub["endpoint"], sub["topic"]) == ("email", "oncall@acme-memory.io", topic.outputs["arn"])
    policy = parse_json(program.one("aws:sns/topicPolicy:TopicPolicy")["policy"])
    allow = next(s for s in policy["Statement"] if s["Effect"] == "Allow")
    assert allow["Principal"] == {"Service": "cloudwatch.amazonaws.com"} and allow["Action"] == "sns:Publish"


def test_key_policy_lets_cloudwatch_use_the_topic_key(program):
    policy = parse_json(program.one("aws:kms/key:Key")["policy"])
    principals = {json.dumps(s["Principal"], sort_keys=True): s for s in policy["Statement"]}
    cw = principals[json.dumps({"Service": "cloudwatch.amazonaws.com"})]
    assert set(cw["Action"]) == {"kms:Decrypt", "kms:GenerateDataKey"}
    logs = principals[json.dumps({"Service": f"logs.{REGION}.amazonaws.com"})]
    assert (
        logs["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"]
        == f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:*"
    )
    assert program.one("aws:kms/key:Key")["enableKeyRotation"] is True


@pytest.mark.parametrize("pct, threshold", [("p95", 500), ("p99", 1000)])
def test_retrieval_latency_alarms_use_extended_statistics(alarms, pct, threshold):
    a = alarms[f"retrieval-latency-{pct}"]
    assert a["namespace"] == names.DEFAULT_NAMESPACE
    assert a["metricName"] == names.RETRIEVAL_LATENCY
    assert a["dimensions"] == {names.DIM_SERVICE: SERVICE}
    assert a["extendedStatistic"] == pct and "statistic" not in a.inputs
    assert a["evaluateLowSampleCountPercentiles"] == "ignore"
    assert a["threshold"] == threshold
    assert a["comparisonOperator"] == "GreaterThanThreshold"
    assert (a["period"], a["evaluationPeriods"], a["datapointsToAlarm"]) == (60, 5, 3)
    assert a["treatMissingData"] == "notBreaching"


def test_5xx_rate_is_metric_math_over_the_alb(program, alarms):
    a = alarms["http-5xx-rate"]
    alb_suffix = program.one("aws:lb/loadBalancer:LoadBalancer").outputs["arnSuffix"]
    queries = {q["id"]: q for q in a["metricQueries"]}
    assert {q["metric"]["metricName"] for q in queries.values() if "metric" in q} == {
        "HTTPCode_Target_5XX_Count",
        "HTTPCode_ELB_5XX_Count",
        "RequestCount",
    }
    for q in queries.values():
        if "metric" in q:
            assert q["metric"]["namespace"] == "AWS/ApplicationELB"
            assert q["metric"]["dimensions"] == {"LoadBalancer": alb_suffix}
            assert q["metric"]["stat"] == "Sum" and q["returnData"] is False
    (result,) = [q for q in queries.values() if q.get("returnData")]
    assert "target5xx" in result["expression"] and "/ requests" in result["expression"]
    assert a["threshold"] == 1 and "metricName" not in a.inputs


def test_unhealthy_targets(program, alarms):
    a = alarms["unhealthy-targets"]
    alb = program.one("aws:lb/loadBalancer:LoadBalancer").outputs["arnSuffix"]
    tg = program.one("aws:lb/targetGroup:TargetGroup").outputs["arnSuffix"]
    assert (a["namespace"], a["metricName"], a["statistic"]) == ("AWS/ApplicationELB", "UnHealthyHostCount", "Maximum")
    assert a["dimensions"] == {"TargetGroup": tg, "LoadBalancer": alb}
    assert a["threshold"] == 0 and a["comparisonOperator"] == "GreaterThanThreshold"


def test_healthy_targets_and_running_tasks_below_the_minimum(program, alarms):
    alb = program.one("aws:lb/loadBalancer:LoadBalancer").outputs["arnSuffix"]
    tg = program.one("aws:lb/targetGroup:TargetGroup").outputs["arnSuffix"]
    hosts, tasks = alarms["healthy-targets"], alarms["running-tasks"]
    assert (hosts["namespace"], hosts["metricName"], hosts["statistic"]) == (
        "AWS/ApplicationELB",
        "HealthyHostCount",
        "Minimum",
    )
    assert hosts["dimensions"] == {"TargetGroup": tg, "LoadBalancer": alb}
    cluster, service = program.one("aws:ecs/cluster:Cluster"), program.one("aws:ecs/service:Service")
    assert (tasks["namespace"], tasks["metricName"]) == ("ECS/ContainerInsights", "RunningTaskCount")
    assert tasks["dimensions"] == {"ClusterName": cluster.outputs["name"], "ServiceName": service.outputs["name"]}
    for a in (hosts, tasks):
        assert a["comparisonOperator"] == "LessThanThreshold" and a["threshold"] == 2  # cognis:minCount


def test_not_ready_alarm_watches_the_probe_metric(alarms):
    a = alarms["not-ready"]
    assert (a["namespace"], a["metricName"], a["statistic"]) == (names.DEFAULT_NAMESPACE, READINESS_METRIC, "Minimum")
    assert a["dimensions"] == {names.DIM_SERVICE: SERVICE}
    assert a["comparisonOperator"] == "LessThanThreshold" and a["threshold"] == 1
    assert (a["period"], a["evaluationPeriods"], a["datapointsToAlarm"]) == (60, 5, 3)


#: What missing data means, per alarm: health alarms breach, load and error alarms do not.
MISSING_DATA = {
    "retrieval-latency-p95": "notBreaching",
    "retrieval-latency-p99": "notBreaching",
    "jobs-dead-lettered": "notBreaching",
    "http-5xx-rate": "notBreaching",
    "unhealthy-targets": "notBreaching",
    "healthy-targets": "breaching",
    "running-tasks": "breaching",
    "not-ready": "breaching",
    "opensearch-cpu": "notBreaching",
    "opensearch-jvm-pressure": "notBreaching",
    "opensearch-red": "breaching",
    "aurora-capacity": "notBreaching",
    "reranker-latency-p95": "notBreaching",
    "reranker-errors": "notBreaching",
    "opensearch-yellow": "notBreaching",
    "opensearch-free-storage": "notBreaching",
    "opensearch-writes-blocked": "notBreaching",
    "opensearch-snapshot-failure": "notBreaching",
    "aurora-freeable-memory": "notBreaching",
    "cache-memory": "notBreaching",
    "cache-evictions": "notBreaching",
    "opensearch-old-gen-jvm-pressure": "notBreaching",
    "opensearch-nodes": "breaching",
    "outbox-oldest-age": "notBreaching",
}


def test_each_alarm_says_what_missing_data_means(alarms):
    assert {k: a["treatMissingData"] for k, a in alarms.items()} == MISSING_DATA


def test_percentile_alarms_ignore_periods_with_too_few_samples(alarms):
    percentiles = {k for k, a in alarms.items() if a.get("extendedStatistic")}
    assert percentiles == {"retrieval-latency-p95", "retrieval-latency-p99", "reranker-latency-p95"}
    for k, a in alarms.items():
        assert (a.get("evaluateLowSampleCountPercentiles") == "ignore") == (k in percentiles), k


@pytest.mark.parametrize(
    "key, metric, threshold, op",
    [
        ("opensearch-cpu", "CPUUtilization", 80, "GreaterThanOrEqualToThreshold"),
        ("opensearch-jvm-pressure", "JVMMemoryPressure", 95, "GreaterThanOrEqualToThreshold"),
        ("opensearch-red", "ClusterStatus.red", 1, "GreaterThanOrEqualToThreshold"),
    ],
)
def test_opensearch_alarms(alarms, key, metric, threshold, op):
    a = alarms[key]
    assert (a["namespace"], a["metricName"], a["statistic"]) == ("AWS/ES", metric, "Maximum")
    assert a["dimensions"] == {"DomainName": "cognis-test", "ClientId": ACCOUNT}
    assert a["threshold"] == threshold and a["comparisonOperator"] == op


def test_aurora_capacity_near_max(program, alarms):
    a = alarms["aurora-capacity"]
    cluster = program.one("aws:rds/cluster:Cluster").outputs["clusterIdentifier"]
    assert (a["namespace"], a["metricName"]) == ("AWS/RDS", "ServerlessDatabaseCapacity")
    assert a["dimensions"] == {"DBClusterIdentifier": cluster}
    assert a["threshold"] == pytest.approx(0.9 * 16)
    assert a["comparisonOperator"] == "GreaterThanOrEqualToThreshold"


def test_reranker_latency_and_errors(program, alarms):
    endpoint = program.named("reranker-endpoint").outputs["name"]
    lat, err = alarms["reranker-latency-p95"], alarms["reranker-errors"]
    for a in (lat, err):
        assert a["namespace"] == "AWS/SageMaker"
        assert a["dimensions"] == {"EndpointName": endpoint, "VariantName": "AllTraffic"}
    assert lat["metricName"] == "ModelLatency" and lat["extendedStatistic"] == "p95"
    assert lat["threshold"] == 500_000  # ModelLatency is in microseconds
    assert err["metricName"] == "Invocation5XXErrors" and err["statistic"] == "Sum" and err["threshold"] == 5


def test_jobs_dead_lettered(alarms):
    a = alarms["jobs-dead-lettered"]
    assert (a["namespace"], a["metricName"], a["statistic"]) == (
        names.DEFAULT_NAMESPACE,
        names.JOBS_DEAD_LETTERED,
        "Sum",
    )
    assert a["threshold"] == 0 and a["comparisonOperator"] == "GreaterThanThreshold"


def test_outbox_oldest_age(alarms):
    """The oldest outbox row older than 300 s in 3 of 5 minutes: every task reports the same table once a minute,
    so the worst report of a minute (Maximum) is the table's; no report (no task, an empty service) is not a
    fault this alarm tells (running-tasks and not-ready do)."""
    a = alarms["outbox-oldest-age"]
    assert (a["namespace"], a["metricName"], a["statistic"]) == (
        names.DEFAULT_NAMESPACE,
        names.OUTBOX_OLDEST_AGE,
        "Maximum",
    )
    assert a["dimensions"] == {names.DIM_SERVICE: SERVICE}
    assert a["threshold"] == 300 and a["comparisonOperator"] == "GreaterThanThreshold"
    assert (a["period"], a["evaluationPeriods"], a["datapointsToAlarm"]) == (60, 5, 3)


def test_thresholds_and_namespace_come_from_config():
    run = run_program(
        {
            "retrievalP95Ms": 250,
            "retrievalP99Ms": 800,
            "opensearchCpuPercent": 70,
            "auroraMaxAcu": 8,
            "auroraAcuAlarmFraction": 0.75,
            "metricsNamespace": "Acme/Memory",
            "serviceName": "memory-eu",
            "outboxOldestAgeSeconds": 900,
        }
    )
    alarms = {a["name"].removeprefix("cognis-test-"): a for a in run.of_type(ALARM)}
    assert alarms["retrieval-latency-p95"]["threshold"] == 250
    assert alarms["retrieval-latency-p99"]["threshold"] == 800
    assert alarms["retrieval-latency-p95"]["namespace"] == "Acme/Memory"
    assert alarms["retrieval-latency-p95"]["dimensions"] == {"service": "memory-eu"}
    assert alarms["opensearch-cpu"]["threshold"] == 70
    assert alarms["aurora-capacity"]["threshold"] == 6
    assert alarms["outbox-oldest-age"]["threshold"] == 900
    body = parse_json(run.one("aws:cloudwatch/dashboard:Dashboard")["dashboardBody"])
    outbox = next(w for w in body["widgets"] if w["properties"].get("title", "").startswith("Outbox"))
    assert outbox["properties"]["annotations"]["horizontal"][0]["value"] == 900


def test_no_email_means_no_subscription():
    run = run_program({"alarmEmail": None})
    assert not run.of_type("aws:sns/topicSubscription:TopicSubscription")
    assert run.of_type("aws:sns/topic:Topic")


def test_settings_validation():
    with pytest.raises(ValueError):
        ObservabilitySettings(aurora_acu_fraction=1.5)
    with pytest.raises(ValueError):
        ObservabilitySettings(alarm_email="nobody")
    with pytest.raises(ValueError):
        ObservabilitySettings(outbox_oldest_age_s=0)


# --- dashboard -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dashboard(program):
    d = program.one("aws:cloudwatch/dashboard:Dashboard")
    assert d["dashboardName"] == "cognis-test"
    return parse_json(d["dashboardBody"])


def _widget(dashboard, title_start):
    return next(w for w in dashboard["widgets"] if w["properties"].get("title", "").startswith(title_start))


def test_dashboard_has_the_operator_views(dashboard):
    titles = [w["properties"]["title"] for w in dashboard["widgets"]]
    for expected in (
        "Traffic",
        "Retrieval latency",
        "Ingest latency",
        "Retrieval stages p95",
        "Ingest stages p95",
        "Errors",
        "Degraded answers",
        "OpenSearch health",
        "Aurora",
        "Redis",
        "Load balancer targets",
        "Readiness",
        "Outbox",
        "Reranker endpoint",
        "Alarms",
    ):
        assert any(t.startswith(expected) for t in titles), expected
    for w in dashboard["widgets"]:
        assert {"x", "y", "width", "height"} <= set(w)
        if w["type"] == "metric":
            assert w["properties"]["region"] == REGION


def _overlaps(widgets: list[dict]) -> list[tuple[str, str]]:
    boxes = [(w["properties"].get("title"), w["x"], w["y"], w["width"], w["height"]) for w in widgets]
    return [
        (a[0], b[0])
        for i, a in enumerate(boxes)
        for b in boxes[i + 1 :]
        if a[1] < b[1] + b[3] and b[1] < a[1] + a[3] and a[2] < b[2] + b[4] and b[2] < a[2] + a[4]
    ]


def test_no_widget_covers_another(dashboard):
    """With and without the reranker's widget (an odd or even count of half-width widgets), the full-width alarm
    list starts a row of its own."""
    assert _overlaps(dashboard["widgets"]) == []
    assert all(w["x"] + w["width"] <= 24 for w in dashboard["widgets"])
    run = run_program({"rerankerEnabled": False}, drop=("rerankerModelS3Uri",))
    assert _overlaps(parse_json(run.one("aws:cloudwatch/dashboard:Dashboard")["dashboardBody"])["widgets"]) == []


def test_outbox_widget_plots_backlog_and_oldest_age(dashboard):
    """Both outbox series of this service, as levels (Maximum over the tasks' reports), with the alarm's line."""
    widget = _widget(dashboard, "Outbox")["properties"]
    rows = widget["metrics"]
    assert [r[:4] for r in rows] == [
        [names.DEFAULT_NAMESPACE, names.OUTBOX_BACKLOG, names.DIM_SERVICE, SERVICE],
        [names.DEFAULT_NAMESPACE, names.OUTBOX_OLDEST_AGE, names.DIM_SERVICE, SERVICE],
    ]
    assert widget["stat"] == "Maximum"
    assert widget["annotations"]["horizontal"] == [{"label": "oldest age alarm", "value": 300, "yAxis": "right"}]


def test_latency_widget_shows_percentiles(dashboard):
    rows = _widget(dashboard, "Retrieval latency")["properties"]["metrics"]
    assert [r[-1]["stat"] for r in rows] == ["p50", "p95", "p99"]
    assert all(r[:4] == [names.DEFAULT_NAMESPACE, names.RETRIEVAL_LATENCY, names.DIM_SERVICE, SERVICE] for r in rows)


def test_ingest_stage_widget_lists_every_ingest_stage(dashboard):
    rows = _widget(dashboard, "Ingest stages")["properties"]["metrics"]
    seen = []
    for r in rows:
        dims = dict(zip(r[2:-1:2], r[3:-1:2], strict=True))
        assert r[1] == names.STAGE_LATENCY and dims[names.DIM_PIPELINE] == names.PIPELINE_INGEST
        seen.append(dims[names.DIM_STAGE])
    assert tuple(seen) == names.INGEST_STAGES


def test_retrieval_stage_widget_searches_every_stage_of_this_service(dashboard):
    """The retrieval stages are found, not listed (a new stage needs no infra change): one SEARCH over
    ``StageLatency`` with exactly its dimensions, this service's retrieval pipeline, every stage.
    (That the search finds every series the runtime emits is checked in test_infra_metrics_contract.py.)"""
    widget = _widget(dashboard, "Retrieval stages")["properties"]
    ((row,),) = widget["metrics"]
    assert row["expression"] == (
        "SEARCH('{CognisMemory,Pipeline,Stage,service} "
        'MetricName="StageLatency" Pipeline="retrieval" service="cognis-test"\', \'p95\', 60)'
    )
    assert row["label"] == "${PROP('Dim.Stage')}" and widget["stat"] == "p95"


def test_expression_rows_use_the_dashboard_array_form(dashboard):
    rows = _widget(dashboard, "Redis")["properties"]["metrics"]
    for row in rows:
        assert isinstance(row, list) and len(row) == 1 and row[0]["expression"].startswith("SEARCH(")
    for w in dashboard["widgets"]:
        for row in w["properties"].get("metrics", []):
            assert isinstance(row, list), row


def test_alarm_widget_lists_every_alarm(program, dashboard):
    widget = _widget(dashboard, "Alarms")
    assert sorted(widget["properties"]["alarms"]) == sorted(a.outputs["arn"] for a in program.of_type(ALARM))


def test_dashboard_without_reranker():
    run = run_program({"rerankerEnabled": False}, drop=("rerankerModelS3Uri",))
    body = parse_json(run.one("aws:cloudwatch/dashboard:Dashboard")["dashboardBody"])
    titles = [w["properties"]["title"] for w in body["widgets"]]
    assert "Reranker endpoint" not in titles


def test_readiness_widget_plots_the_probe_and_running_tasks(program, dashboard):
    rows = _widget(dashboard, "Readiness")["properties"]["metrics"]
    assert [r[:4] for r in rows[:2]] == [[names.DEFAULT_NAMESPACE, READINESS_METRIC, names.DIM_SERVICE, SERVICE]] * 2
    assert {r[-1]["stat"] for r in rows[:2]} == {"Average", "Minimum"}
    assert rows[2][:2] == ["ECS/ContainerInsights", "RunningTaskCount"]


@pytest.mark.parametrize(
    "key, metric, stat, threshold, op, period, periods",
    [
        # AWS's recommended alarms for OpenSearch (docs/deploy.md fact 38); free storage: 25 % of a 100 GiB node
        ("opensearch-yellow", "ClusterStatus.yellow", "Maximum", 1, "GreaterThanOrEqualToThreshold", 60, 5),
        ("opensearch-free-storage", "FreeStorageSpace", "Minimum", 25600, "LessThanOrEqualToThreshold", 60, 1),
        ("opensearch-writes-blocked", "ClusterIndexWritesBlocked", "Maximum", 1, "GreaterThanOrEqualToThreshold",
         300, 1),
        ("opensearch-snapshot-failure", "AutomatedSnapshotFailure", "Maximum", 1, "GreaterThanOrEqualToThreshold",
         60, 1),
        # CPU >= 80 % for 15 minutes 3 times, JVM >= 95 % and old generation >= 80 % for 1 minute 3 times,
        # fewer nodes than the domain's 3 data nodes for one day
        ("opensearch-cpu", "CPUUtilization", "Maximum", 80, "GreaterThanOrEqualToThreshold", 900, 3),
        ("opensearch-jvm-pressure", "JVMMemoryPressure", "Maximum", 95, "GreaterThanOrEqualToThreshold", 60, 3),
        ("opensearch-old-gen-jvm-pressure", "OldGenJVMMemoryPressure", "Maximum", 80, "GreaterThanOrEqualToThreshold",
         60, 3),
        ("opensearch-nodes", "Nodes", "Minimum", 3, "LessThanThreshold", 86400, 1),
    ],
)  # fmt: skip
def test_recommended_opensearch_alarms(alarms, key, metric, stat, threshold, op, period, periods):
    a = alarms[key]
    assert (a["namespace"], a["metricName"], a["statistic"]) == ("AWS/ES", metric, stat)
    assert (a["threshold"], a["comparisonOperator"], a["period"], a["evaluationPeriods"]) == (
        threshold, op, period, periods)  # fmt: skip
    assert a["dimensions"] == {"DomainName": "cognis-test", "ClientId": "123456789012"}


def test_dedicated_master_alarms_come_with_dedicated_masters(alarms):
    assert not {k for k in alarms if k.startswith("opensearch-master")}
    run = run_program({"opensearchDedicatedMasterType": "m6g.large.search"})
    masters = {a["name"].removeprefix("cognis-test-"): a for a in run.of_type(ALARM)}
    assert masters["opensearch-master-cpu"]["metricName"] == "MasterCPUUtilization"
    assert masters["opensearch-master-cpu"]["threshold"] == 50
    assert masters["opensearch-master-jvm-pressure"]["metricName"] == "MasterJVMMemoryPressure"
    assert masters["opensearch-master-jvm-pressure"]["threshold"] == 95
    old_gen = masters["opensearch-master-old-gen-jvm-pressure"]
    assert (old_gen["metricName"], old_gen["threshold"], old_gen["period"], old_gen["evaluationPeriods"]) == (
        "MasterOldGenJVMMemoryPressure", 80, 60, 3)  # fmt: skip
    # The Nodes metric counts dedicated masters too: 3 data nodes + 3 masters
    assert masters["opensearch-nodes"]["threshold"] == 6


def test_aurora_memory_alarm_scales_with_the_acu_ceiling(alarms):
    a = alarms["aurora-freeable-memory"]
    assert (a["namespace"], a["metricName"], a["comparisonOperator"]) == (
        "AWS/RDS",
        "FreeableMemory",
        "LessThanThreshold",
    )
    assert a["threshold"] == 16 * 2 * 1024**3 * 0.10  # 10 % of 16 ACU x 2 GiB
    assert a["dimensions"] == {"DBClusterIdentifier": "cognis-test-aurora"}


def test_cache_alarms_watch_every_node(program, alarms):
    group = program.one("aws:elasticache/replicationGroup:ReplicationGroup").outputs
    for key, metric in (("cache-memory", "DatabaseMemoryUsagePercentage"), ("cache-evictions", "Evictions")):
        queries = {q["id"]: q for q in alarms[key]["metricQueries"]}
        nodes = sorted(q["metric"]["dimensions"]["CacheClusterId"] for q in queries.values() if "metric" in q)
        assert nodes == sorted(group["memberClusters"]) and len(nodes) == 2
        assert all(q["metric"]["metricName"] == metric for q in queries.values() if "metric" in q)
        assert queries["worst"]["expression"] == "MAX([n0, n1])" and queries["worst"]["returnData"] is True


def test_example_alarm_addresses_are_refused():
    for address in ("oncall@example.com", "ops@alerts.example.org", "me@x.test"):
        with pytest.raises(Exception, match="example address"):
            run_program({"alarmEmail": address})
