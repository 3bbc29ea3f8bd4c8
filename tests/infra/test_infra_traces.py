"""Telemetry in the stack: the API's log mode is set explicitly (EMF, what the alarms read), and
``cognis:traces`` adds an ADOT collector sidecar that takes the API's OTLP spans on the task's
localhost and sends them to X-Ray, with exactly the X-Ray permissions it needs."""

from __future__ import annotations

import json
import re

import pytest

from cognis_infra.containers import COLLECTOR_CONTAINER_NAME
from cognis_infra.service_args import TELEMETRY_MODES
from tests.infra.infra_harness import REGION, parse_json, run_program

TASK_DEF = "aws:ecs/taskDefinition:TaskDefinition"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"


def _containers(run):
    return {c["name"]: c for c in parse_json(run.one(TASK_DEF, "api-task")["containerDefinitions"])}


def _env(container):
    return {e["name"]: e["value"] for e in container.get("environment", [])}


def _task_statements(run):
    policy = next(r for r in run.of_type(ROLE_POLICY) if r.name == "api-task")
    return {s["Sid"]: s for s in parse_json(policy["policy"])["Statement"]}


@pytest.fixture(scope="module")
def traced():
    return run_program({"traces": True, "traceSampleRatio": "0.25"})


def test_by_default_emf_and_no_collector(program):
    containers = _containers(program)
    assert set(containers) == {"api", "readiness-probe"}
    env = _env(containers["api"])
    assert env["COGNIS_TELEMETRY"] == "emf"  # set, not left to detection
    assert not {"COGNIS_TRACES", "COGNIS_OTLP_ENDPOINT"} & set(env)
    assert "dependsOn" not in containers["api"]
    assert not [s for s in _task_statements(program).values() if any(a.startswith("xray:") for a in s["Action"])]


def test_traces_add_a_non_essential_collector_the_api_sends_to(traced):
    containers = _containers(traced)
    assert list(containers) == ["api", "readiness-probe", COLLECTOR_CONTAINER_NAME]
    collector, api = containers[COLLECTOR_CONTAINER_NAME], containers["api"]
    assert collector["essential"] is False  # a collector failure never stops the API
    assert (
        collector["image"] == "public.ecr.aws/aws-observability/aws-otel-collector:v0.49.0"
    )  # the current release (docs/deploy.md fact 30)
    assert collector["command"] == ["--config=env:COGNIS_COLLECTOR_CONFIG"]
    group = api["logConfiguration"]["options"]["awslogs-group"]
    assert collector["logConfiguration"]["options"]["awslogs-group"] == group  # the API's log group
    assert api["dependsOn"] == [{"containerName": COLLECTOR_CONTAINER_NAME, "condition": "START"}]

    config = json.loads(_env(collector)["COGNIS_COLLECTOR_CONFIG"])
    receiver = config["receivers"]["otlp"]["protocols"]["http"]["endpoint"]
    assert config["service"]["pipelines"] == {
        "traces": {"receivers": ["otlp"], "processors": ["batch"], "exporters": ["awsxray"]}
    }  # traces only: nothing else is received or exported
    assert config["exporters"] == {"awsxray": {"region": REGION}}

    env = _env(api)
    assert env["COGNIS_TRACES"] == "otlp" and env["COGNIS_TELEMETRY"] == "emf"
    assert env["COGNIS_OTLP_ENDPOINT"] == f"http://{receiver}/v1/traces"  # the collector's own receiver
    assert receiver.startswith("127.0.0.1:")  # the task's localhost only
    assert env["COGNIS_TRACE_SAMPLE_RATIO"] == "0.25"


def test_the_runtime_accepts_what_the_stack_sets(traced):
    """The API's settings parse the stack's telemetry variables as the runtime reads them."""
    from cognis_memory.config import Settings

    env = _env(_containers(traced)["api"])
    settings = Settings(
        telemetry=env["COGNIS_TELEMETRY"],
        traces=env["COGNIS_TRACES"],
        otlp_endpoint=env["COGNIS_OTLP_ENDPOINT"],
        trace_sample_ratio=env["COGNIS_TRACE_SAMPLE_RATIO"],
    )
    telemetry = settings.telemetry
    assert (telemetry.mode, telemetry.traces, telemetry.trace_sample_ratio) == ("emf", "otlp", 0.25)


def test_traces_grant_x_ray_writes_only(traced, program):
    statements = _task_statements(traced)
    xray = [s for s in statements.values() if any(a.startswith("xray:") for a in s["Action"])]
    assert xray == [statements["WriteTraces"]]
    assert sorted(statements["WriteTraces"]["Action"]) == ["xray:PutTelemetryRecords", "xray:PutTraceSegments"]
    assert set(statements) - {"WriteTraces"} == set(_task_statements(program))  # nothing else changes


def test_the_mode_list_is_the_runtimes():
    from cognis_memory.telemetry.modes import MODES

    assert TELEMETRY_MODES == MODES


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"telemetryMode": "loud"}, "telemetryMode"),
        ({"traceSampleRatio": "1.5"}, "traceSampleRatio"),
        ({"traces": True, "adotCollectorImage": " "}, "adotCollectorImage"),
    ],
)
def test_bad_telemetry_settings_stop_the_preview(overrides, match):
    with pytest.raises(Exception) as info:
        run_program(overrides)
    assert re.search(match, str(info.value)), str(info.value)
