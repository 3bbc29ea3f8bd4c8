"""The runtime and the infrastructure agree: metric names, dimensions, namespace, env vars.

Both sides are read for real: the runtime side by emitting metrics through
``cognis_memory.telemetry.emitter.Telemetry`` (configured from the task definition's
environment through ``cognis_memory.config.Settings``) and parsing the EMF it writes;
the infrastructure side from the alarms and the dashboard the mocked program records.
The one metric the runtime does not emit, ``Ready``, comes from the task's readiness probe;
its lines are checked by running the probe itself (test_infra_service.py).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re

import pytest

from cognis_infra.telemetry import METRIC_DIMENSIONS, READINESS_DIMENSIONS, READINESS_METRIC
from cognis_memory.telemetry import names
from tests.infra.infra_harness import parse_json


@pytest.fixture(scope="module")
def task_env(program):
    container = next(
        c
        for c in parse_json(program.one("aws:ecs/taskDefinition:TaskDefinition", "api-task")["containerDefinitions"])
        if c["name"] == "api"
    )
    env = {e["name"]: e["value"] for e in container["environment"]}
    secrets = {s["name"] for s in container["secrets"]}
    return env, secrets


@pytest.fixture(scope="module")
def settings(task_env):
    from cognis_memory.config import Settings

    env, _ = task_env
    mp = pytest.MonkeyPatch()
    try:
        for key in [k for k in os.environ if k.startswith("COGNIS_")]:
            mp.delenv(key)
        for key, value in env.items():
            mp.setenv(key, value)
        return Settings()
    finally:
        mp.undo()


def test_every_cognis_variable_is_a_runtime_setting(task_env):
    """Settings ignores unknown variables, so a typo would be silently dropped: check."""
    from cognis_memory.config import Settings

    env, secrets = task_env
    fields = {field.env for field in Settings.flat_fields()}
    unknown = sorted(k for k in (set(env) | secrets) if k.startswith("COGNIS_") and k not in fields)
    assert not unknown, f"task sets variables the runtime does not read: {unknown}"


def test_runtime_settings_from_the_task_environment(program, settings):
    cluster = program.one("aws:rds/cluster:Cluster").outputs
    assert settings.store == "dual"
    assert settings.postgres.host == cluster["endpoint"] and settings.postgres.port == 5432
    # The API never sees the owner's secret and does not migrate (the migration task does).
    assert settings.postgres.secret_arn is None and settings.postgres.migrate is False
    assert cluster["masterUserSecrets"][0]["secretArn"] not in json.dumps(program.one(
        "aws:ecs/taskDefinition:TaskDefinition", "api-task")["containerDefinitions"])  # fmt: skip
    assert settings.postgres.sslmode == "verify-full" and settings.postgres.sslrootcert.endswith(".pem")
    assert settings.opensearch.url.startswith("https://") and settings.opensearch.auth == "sigv4"
    assert settings.cache.redis_url.startswith("rediss://")
    assert settings.reranker.kind == "sagemaker" and settings.reranker.sagemaker_endpoint
    assert settings.llm.kind == "bedrock"
    assert (settings.api.host, settings.api.port) == ("0.0.0.0", 8080)


async def _outbox_state():
    from cognis_memory.stores.dual import OutboxState

    return OutboxState(rows=3, oldest_age_s=42.0)


def _emitted_series(settings) -> set[tuple[str, str, frozenset]]:
    """(namespace, metric, {dimension: value}) of every metric the runtime emits."""
    from cognis_memory.retrieval.pipeline import stage_names
    from cognis_memory.telemetry.emitter import Telemetry
    from cognis_memory.telemetry.outbox import OutboxReporter
    from cognis_memory.telemetry.recorder import StageRecorder

    out = io.StringIO()
    tel = Telemetry(
        service=settings.telemetry.service_name,
        namespace=settings.telemetry.metrics_namespace,
        log_stream=io.StringIO(),
        metrics_stream=out,
    )
    for operation, latency, pipeline, stages in (
        (names.OPERATION_SEARCH, names.RETRIEVAL_LATENCY, names.PIPELINE_RETRIEVAL, stage_names()),
        (names.OPERATION_INGEST, names.INGEST_LATENCY, names.PIPELINE_INGEST, names.INGEST_STAGES),
    ):
        rec = StageRecorder()
        for stage in stages:
            rec.add(stage, 1.0)
        rec.mark_degraded("reranker")
        tel.emit_request_metrics(operation=operation, latency_metric=latency, pipeline=pipeline, rec=rec, error=True)
    for counted in (names.JOBS_DEAD_LETTERED, names.EXTRACTIONS_DEFERRED, names.LLM_ANSWERS_REPAIRED,
                    names.LLM_ANSWERS_UNUSABLE):  # fmt: skip
        tel.emit_count(counted)
    asyncio.run(OutboxReporter(_outbox_state, tel).report_once())  # what a service on the dual store reports

    series = set()
    for line in out.getvalue().splitlines():
        blob = json.loads(line)
        for directive in blob["_aws"]["CloudWatchMetrics"]:
            for dim_set in directive["Dimensions"]:
                dims = frozenset((d, blob[d]) for d in dim_set)
                for metric in directive["Metrics"]:
                    series.add((directive["Namespace"], metric["Name"], dims))
    return series


@pytest.fixture(scope="module")
def emitted(settings):
    return _emitted_series(settings)


def test_runtime_emits_the_documented_dimensions(emitted):
    by_metric = {}
    for _, metric, dims in emitted:
        by_metric.setdefault(metric, set()).add(frozenset(k for k, _ in dims))
    assert set(by_metric) == set(METRIC_DIMENSIONS)
    for metric, dim_names in METRIC_DIMENSIONS.items():
        assert by_metric[metric] == {frozenset(dim_names)}, metric


def test_alarms_watch_series_the_runtime_emits(program, emitted, settings):
    app_alarms = [
        a
        for a in program.of_type("aws:cloudwatch/metricAlarm:MetricAlarm")
        if a.get("namespace") == settings.telemetry.metrics_namespace
    ]
    assert {a["metricName"] for a in app_alarms} == {
        names.RETRIEVAL_LATENCY,
        names.JOBS_DEAD_LETTERED,
        names.OUTBOX_OLDEST_AGE,
        READINESS_METRIC,
    }
    for a in app_alarms:
        series = (a["namespace"], a["metricName"], frozenset(a["dimensions"].items()))
        if a["metricName"] == READINESS_METRIC:  # the probe's: same namespace and service dimension
            assert set(a["dimensions"]) == set(READINESS_DIMENSIONS)
            assert a["dimensions"][names.DIM_SERVICE] == settings.telemetry.service_name
            continue
        assert series in emitted, f"alarm {a['name']} watches {series}, which the runtime never emits"


_SEARCH = re.compile(r"SEARCH\('\{(?P<schema>[^}]*)\} (?P<terms>[^']*)', '(?P<stat>[^']+)', (?P<period>\d+)\)")


def _search_matches(expression: str, emitted: set) -> set:
    """The emitted series a dashboard SEARCH finds: the schema's namespace and exactly its dimension
    names (CloudWatch's metric schema), every ``Name="value"`` term exact (MetricName or a dimension)."""
    m = _SEARCH.fullmatch(expression)
    assert m, expression
    namespace, *dim_names = m["schema"].split(",")
    terms = dict(re.findall(r'(\w+)="([^"]*)"', m["terms"]))
    assert re.sub(r'\w+="[^"]*"', "", m["terms"]).strip() == "", f"only exact terms: {expression}"
    found = set()
    for series in emitted:
        ns, metric, dims = series
        values = dict(dims)
        if ns != namespace or set(values) != set(dim_names):
            continue
        if all((metric if k == "MetricName" else values.get(k)) == v for k, v in terms.items()):
            found.add(series)
    return found


def test_dashboard_plots_series_the_runtime_emits(program, emitted, settings):
    body = parse_json(program.one("aws:cloudwatch/dashboard:Dashboard")["dashboardBody"])
    rows = [row for w in body["widgets"] if w["type"] == "metric" for row in w["properties"]["metrics"]]
    app_rows = [row for row in rows if isinstance(row, list) and row[0] == settings.telemetry.metrics_namespace]
    plotted = set()
    for row in app_rows:
        core = row[:-1] if isinstance(row[-1], dict) else row
        dims = frozenset(zip(core[2::2], core[3::2], strict=True))
        series = (core[0], core[1], dims)
        if core[1] == READINESS_METRIC:
            assert dims == frozenset({(names.DIM_SERVICE, settings.telemetry.service_name)})
            continue
        assert series in emitted, f"dashboard plots {series}, which the runtime never emits"
        plotted.add(core[1])
    searches = [row[0]["expression"] for row in rows if isinstance(row[0], dict) and "expression" in row[0]]
    app_searches = [e for e in searches if e.startswith(f"SEARCH('{{{settings.telemetry.metrics_namespace},")]
    assert app_searches, "the retrieval stages are searched"
    for expression in app_searches:
        found = _search_matches(expression, emitted)
        assert found, f"{expression} finds nothing the runtime emits"
        plotted |= {metric for _, metric, _ in found}
    assert plotted == set(METRIC_DIMENSIONS), "every runtime metric is on the dashboard"


def test_the_stage_search_finds_every_retrieval_stage_and_nothing_else(program, emitted, settings):
    """Every retrieval stage the runtime can time (its registry included) is on the dashboard, and the
    search takes neither ingest stages nor another metric."""
    from cognis_memory.retrieval.pipeline import stage_names

    body = parse_json(program.one("aws:cloudwatch/dashboard:Dashboard")["dashboardBody"])
    widget = next(w for w in body["widgets"] if w["properties"].get("title", "").startswith("Retrieval stages"))
    ((row,),) = widget["properties"]["metrics"]
    stage_series = {
        s for s in emitted if s[1] == names.STAGE_LATENCY and (names.DIM_PIPELINE, names.PIPELINE_RETRIEVAL) in s[2]
    }
    assert len(stage_series) == len(stage_names())
    assert _search_matches(row["expression"], emitted) == stage_series


def test_namespace_and_service_agree_across_env_alarms_and_defaults(program, task_env):
    env, _ = task_env
    p95 = next(
        a
        for a in program.of_type("aws:cloudwatch/metricAlarm:MetricAlarm")
        if a["name"].endswith("retrieval-latency-p95")
    )
    assert env["COGNIS_METRICS_NAMESPACE"] == p95["namespace"] == names.DEFAULT_NAMESPACE
    # The default service dimension carries the stack, so two stacks in one account never mix.
    assert env["COGNIS_SERVICE_NAME"] == p95["dimensions"][names.DIM_SERVICE] == "cognis-test"
