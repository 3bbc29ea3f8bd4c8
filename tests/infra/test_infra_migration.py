"""The schema migration: a one-off task with its own role, run after Aurora is up and before the service.

Mocks record the program's resources; the run itself (ECS RunTask until the task stops) is exercised
with botocore's Stubber at the protocol level (ECS is a paid API that cannot run here).
"""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.stub import Stubber

from cognis_infra.ecs_run import RUN_INPUTS, EcsTaskFailed, EcsTaskRunProvider, run_task
from tests.infra.infra_harness import parse_json

TASK_DEF = "aws:ecs/taskDefinition:TaskDefinition"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"


def _statements(program, name):
    policy = next(p for p in program.of_type(ROLE_POLICY) if p.name == name)
    return {s["Sid"]: s for s in parse_json(policy["policy"])["Statement"]}


def test_only_the_migration_task_role_reads_the_master_secret(program):
    secret = program.one("aws:rds/cluster:Cluster").outputs["masterUserSecrets"][0]["secretArn"]
    readers = {p.name for p in program.of_type(ROLE_POLICY) if secret in p["policy"]}
    assert readers == {"api-migration-task"}
    stmts = _statements(program, "api-migration-task")
    assert stmts == {
        "ReadDatabaseOwnerSecret": {
            "Sid": "ReadDatabaseOwnerSecret",
            "Effect": "Allow",
            "Action": ["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
            "Resource": [secret],
        }
    }
    roles = {r.name: r for r in program.of_type("aws:iam/role:Role")}
    migration = program.one(TASK_DEF, "api-migration")
    assert migration["taskRoleArn"] == roles["api-migration-task"].outputs["arn"]
    assert migration["executionRoleArn"] == roles["api-migration-execution"].outputs["arn"]
    assert migration["taskRoleArn"] != program.one(TASK_DEF, "api-task")["taskRoleArn"]
    assert set(_statements(program, "api-migration-execution")) == {"EcrAuth", "PullApiImage", "WriteLogs"}


def test_the_migration_task_runs_cognis_memory_migrate_in_the_api_image(program):
    (container,) = parse_json(program.one(TASK_DEF, "api-migration")["containerDefinitions"])
    api = parse_json(program.one(TASK_DEF, "api-task")["containerDefinitions"])[0]
    assert container["image"] == api["image"] and container["command"] == ["migrate"]
    env = {e["name"]: e["value"] for e in container["environment"]}
    cluster = program.one("aws:rds/cluster:Cluster").outputs
    assert env["COGNIS_POSTGRES_SECRET_ARN"] == cluster["masterUserSecrets"][0]["secretArn"]
    assert env["COGNIS_POSTGRES_SSLMODE"] == "verify-full"
    assert env["COGNIS_POSTGRES_APP_USER"] == "cognis_app" and env["COGNIS_STORE"] == "dual"
    # the runtime reads every variable the task sets
    from cognis_memory.config import Settings

    known = {field.env for field in Settings.flat_fields()}
    unknown = [k for k in env if k.startswith("COGNIS_") and k not in known]
    assert not unknown


def test_the_run_waits_for_aurora_and_the_service_waits_for_the_run(program):
    """The service depends on the Aurora instances and on the migration run, the run on the instances and
    its roles: a fast first deploy cannot start tasks against a cluster without instances or schema."""
    instances = [r.name for r in program.of_type("aws:rds/clusterInstance:ClusterInstance")]
    run = program.named("api-migrate")
    assert run.type == "pulumi-python:dynamic:Resource"
    assert run["taskDefinition"] == program.one(TASK_DEF, "api-migration").outputs["arn"]
    assert run["cluster"] == program.one("aws:ecs/cluster:Cluster").outputs["arn"]
    assert run["containerName"] == "migrate" and run["region"] == "eu-west-1"

    def deps(res):
        return {d.rsplit("::", 1)[-1] for d in res.options["dependencies"]}

    assert set(instances) <= deps(run) and {"api-migration-task", "api-migration-execution"} <= deps(run)
    service = program.one("aws:ecs/service:Service")
    assert {*instances, "api-migrate", "api-https", "api-task", "api-execution"} <= deps(service)


# --- the run itself, at the ECS protocol level ------------------------------------------------------------

PROPS = {
    "cluster": "arn:aws:ecs:eu-west-1:123456789012:cluster/cognis-test-api",
    "taskDefinition": "arn:aws:ecs:eu-west-1:123456789012:task-definition/cognis-test-migration:3",
    "containerName": "migrate",
    "subnets": ["subnet-1", "subnet-2"],
    "securityGroups": ["sg-1"],
    "region": "eu-west-1",
}
TASK = "arn:aws:ecs:eu-west-1:123456789012:task/cognis-test-api/0123456789abcdef"


RUN_TASK_PARAMS = {
    "cluster": PROPS["cluster"],
    "taskDefinition": PROPS["taskDefinition"],
    "launchType": "FARGATE",
    "count": 1,
    "startedBy": "pulumi-migration",
    "networkConfiguration": {
        "awsvpcConfiguration": {
            "subnets": ["subnet-1", "subnet-2"],
            "securityGroups": ["sg-1"],
            "assignPublicIp": "DISABLED",
        }  # fmt: skip
    },
}
STARTED = {"tasks": [{"taskArn": TASK, "lastStatus": "PROVISIONING"}], "failures": []}
#: RunTask's answer when Fargate has no capacity (a `failures` entry, not an error).
NO_CAPACITY = {
    "tasks": [],
    "failures": [
        {
            "arn": PROPS["taskDefinition"],
            "reason": "Capacity is unavailable at this time. Please try again later or in a different "
            "availability zone",
        }
    ],  # fmt: skip
}
DESCRIBE = {"cluster": PROPS["cluster"], "tasks": [TASK]}


def _ecs():
    client = boto3.client("ecs", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="y")
    return client, Stubber(client)


def _stubbed(exit_code: int | None, stop_code: str = "EssentialContainerExited"):
    client, stub = _ecs()
    stub.add_response("run_task", STARTED, RUN_TASK_PARAMS)
    stub.add_response("describe_tasks", {"tasks": [{"taskArn": TASK, "lastStatus": "RUNNING"}]},
                      {"cluster": PROPS["cluster"], "tasks": [TASK]})  # fmt: skip
    container = {"name": "migrate", "exitCode": exit_code} if exit_code is not None else {"name": "migrate"}
    stub.add_response(
        "describe_tasks",
        {
            "tasks": [
                {
                    "taskArn": TASK,
                    "lastStatus": "STOPPED",
                    "stopCode": stop_code,
                    "stoppedReason": "done",
                    "containers": [container],
                }
            ]
        },  # fmt: skip
        {"cluster": PROPS["cluster"], "tasks": [TASK]},
    )
    return client, stub


def test_a_run_succeeds_only_on_exit_code_zero():
    client, stub = _stubbed(0)
    with stub:
        assert run_task(PROPS, client=client, poll_s=0) == {"taskArn": TASK, "exitCode": 0}
        stub.assert_no_pending_responses()
    client, stub = _stubbed(1)
    with stub, pytest.raises(EcsTaskFailed, match="exit code 1"):
        run_task(PROPS, client=client, poll_s=0)
    client, stub = _stubbed(None, stop_code="TaskFailedToStart")
    with stub, pytest.raises(EcsTaskFailed, match="TaskFailedToStart"):
        run_task(PROPS, client=client, poll_s=0)


def test_a_new_task_definition_runs_the_migration_again():
    provider = EcsTaskRunProvider()
    same = provider.diff("id", dict(PROPS), dict(PROPS))
    assert same.changes is False
    newer = provider.diff("id", dict(PROPS), {**PROPS, "taskDefinition": PROPS["taskDefinition"][:-1] + "4"})
    assert newer.changes is True and not newer.replaces
    assert set(RUN_INPUTS) <= set(PROPS)
    json.dumps(PROPS)


def _stopped(exit_code: int = 0) -> dict:
    return {"tasks": [{"taskArn": TASK, "lastStatus": "STOPPED", "stopCode": "EssentialContainerExited",
                       "containers": [{"name": "migrate", "exitCode": exit_code}]}]}  # fmt: skip


def test_capacity_failures_are_retried_with_backoff_then_the_run_goes_on():
    """RunTask reports "no Fargate capacity" in `failures`; the run tries again (bounded), and a task ECS does not
    list yet (MISSING right after RunTask) is polled again, found by its ARN."""
    client, stub = _ecs()
    stub.add_response("run_task", NO_CAPACITY, RUN_TASK_PARAMS)
    stub.add_response("run_task", {"tasks": [], "failures": [{"reason": "RESOURCE:MEMORY"}]}, RUN_TASK_PARAMS)
    stub.add_response("run_task", STARTED, RUN_TASK_PARAMS)
    stub.add_response("describe_tasks", {"tasks": [], "failures": [{"arn": TASK, "reason": "MISSING"}]}, DESCRIBE)
    stub.add_response("describe_tasks", _stopped(0), DESCRIBE)
    with stub:
        assert run_task(PROPS, client=client, poll_s=0, backoff_s=0)["exitCode"] == 0
        stub.assert_no_pending_responses()


def test_capacity_retries_are_bounded_and_other_failures_are_not_retried():
    client, stub = _ecs()
    for _ in range(3):
        stub.add_response("run_task", NO_CAPACITY, RUN_TASK_PARAMS)
    with stub, pytest.raises(EcsTaskFailed, match="attempt 3 of 3.*Capacity is unavailable"):
        run_task(PROPS, client=client, poll_s=0, backoff_s=0, attempts=3)
    stub.assert_no_pending_responses()
    client, stub = _ecs()
    stub.add_response("run_task", {"tasks": [], "failures": [{"reason": "ATTRIBUTE"}]}, RUN_TASK_PARAMS)
    with stub, pytest.raises(EcsTaskFailed, match="attempt 1 of 5.*ATTRIBUTE"):
        run_task(PROPS, client=client, poll_s=0, backoff_s=0)


def test_a_task_that_outlives_the_timeout_is_stopped():
    client, stub = _ecs()
    stub.add_response("run_task", STARTED, RUN_TASK_PARAMS)
    stub.add_response("describe_tasks", {"tasks": [{"taskArn": TASK, "lastStatus": "RUNNING"}]}, DESCRIBE)
    stub.add_response(
        "stop_task",
        {"task": {"taskArn": TASK, "lastStatus": "RUNNING", "desiredStatus": "STOPPED"}},
        {"cluster": PROPS["cluster"], "task": TASK, "reason": "pulumi: no exit within 0 s"},
    )
    with stub, pytest.raises(EcsTaskFailed, match="did not stop within 0 s.*it was stopped"):
        run_task(PROPS, client=client, poll_s=0, timeout_s=0)
    stub.assert_no_pending_responses()
