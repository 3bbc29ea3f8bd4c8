"""Run a one-off ECS task inside ``pulumi up`` and fail the update when it fails: the schema migration.

``EcsTaskRun`` is a Pulumi dynamic resource (its provider runs in the deploying process, with boto3
acting as the stack's AWS provider identity: its keys, profile, assumed roles and allowed accounts,
``aws_session.py``). Creating it runs the task once; any change of its inputs (a new task definition
revision, i.e. a new image or new settings) runs it again; deleting it does nothing. A run succeeds
only when the task stopped and its essential container exited 0; anything else raises with the stop
reason and where its log is, so the ECS service that depends on it is not updated.

RunTask reports placement problems in ``failures`` rather than as an error; those about capacity
(Fargate's "Capacity is unavailable at this time", ``RESOURCE:*``) are retried with backoff a bounded
number of times. A task that does not stop within the timeout is stopped (``StopTask``) before the
run fails, so a hung migration does not keep running beside the next attempt.
"""

from __future__ import annotations

import time
from typing import Any

import pulumi
import pulumi.dynamic

from .aws_session import AwsIdentity, client_for

#: Inputs whose change runs the task again (everything the run depends on).
RUN_INPUTS: tuple[str, ...] = (
    "cluster",
    "taskDefinition",
    "containerName",
    "subnets",
    "securityGroups",
    "region",
)

#: RunTask ``failures[].reason`` values that mean "no capacity right now" (worth another attempt).
CAPACITY_REASONS: tuple[str, ...] = ("RESOURCE:", "Capacity is unavailable")


class EcsTaskFailed(RuntimeError):
    """The one-off task did not finish with exit code 0."""


def _capacity_failure(failures: list[dict[str, Any]]) -> bool:
    return bool(failures) and all(any(r in (f.get("reason") or "") for r in CAPACITY_REASONS) for f in failures)


def start_task(ecs: Any, props: dict[str, Any], *, attempts: int = 5, backoff_s: float = 10.0) -> str:
    """RunTask, retried with exponential backoff while ECS reports only capacity failures; the task ARN."""
    for attempt in range(1, attempts + 1):
        started = ecs.run_task(
            cluster=props["cluster"],
            taskDefinition=props["taskDefinition"],
            launchType="FARGATE",
            count=1,
            startedBy="pulumi-migration",
            networkConfiguration={
                "awsvpcConfiguration": {
                    "subnets": list(props["subnets"]),
                    "securityGroups": list(props["securityGroups"]),
                    "assignPublicIp": "DISABLED",
                }
            },
        )
        failures = started.get("failures") or []
        if started.get("tasks") and not failures:
            return str(started["tasks"][0]["taskArn"])
        if not _capacity_failure(failures) or attempt == attempts:
            raise EcsTaskFailed(
                f"ECS could not start {props['taskDefinition']} (attempt {attempt} of {attempts}): {failures}"
            )
        time.sleep(backoff_s * 2 ** (attempt - 1))
    raise AssertionError("unreachable")


def _described(ecs: Any, cluster: str, task_arn: str) -> dict[str, Any]:
    """The task as DescribeTasks reports it, found by its ARN; ``{}`` while ECS does not list it yet
    (``failures`` with ``MISSING`` right after RunTask)."""
    found = ecs.describe_tasks(cluster=cluster, tasks=[task_arn])
    return next((t for t in found.get("tasks", []) if t.get("taskArn") == task_arn), {})


def run_task(
    props: dict[str, Any],
    *,
    client: Any = None,
    identity: AwsIdentity | None = None,
    poll_s: float = 6.0,
    timeout_s: float = 1800.0,
    attempts: int = 5,
    backoff_s: float = 10.0,
) -> dict:
    """Start the task, wait until it stopped, and return ``{taskArn, exitCode}``; raise :class:`EcsTaskFailed`
    (after stopping the task when it outlived ``timeout_s``)."""
    ecs = client or client_for("ecs", identity or AwsIdentity(), props["region"])
    task_arn = start_task(ecs, props, attempts=attempts, backoff_s=backoff_s)
    deadline = time.monotonic() + timeout_s
    while True:
        task = _described(ecs, props["cluster"], task_arn)
        if task.get("lastStatus") == "STOPPED":
            break
        if time.monotonic() > deadline:
            ecs.stop_task(cluster=props["cluster"], task=task_arn, reason=f"pulumi: no exit within {timeout_s:g} s")
            raise EcsTaskFailed(
                f"{task_arn} did not stop within {timeout_s:g} s (last status {task.get('lastStatus')}); it was stopped"
            )
        time.sleep(poll_s)
    container: dict[str, Any] = next(
        (c for c in task.get("containers", []) if c.get("name") == props["containerName"]), {}
    )
    exit_code = container.get("exitCode")
    if exit_code != 0:
        raise EcsTaskFailed(
            f"{task_arn} failed: exit code {exit_code}, {task.get('stopCode')}: {task.get('stoppedReason')}; "
            f"{container.get('reason') or ''} (log stream prefix {props.get('logStreamPrefix', '?')}, "
            f"task id {task_arn.rsplit('/', 1)[-1]})"
        )
    return {"taskArn": task_arn, "exitCode": exit_code}


class EcsTaskRunProvider(pulumi.dynamic.ResourceProvider):
    """Runs the task on create and whenever :data:`RUN_INPUTS` change."""

    #: The stack's AWS provider identity, read in :meth:`configure` (aws_session.py).
    identity: AwsIdentity = AwsIdentity()

    def configure(self, req: pulumi.dynamic.ConfigureRequest) -> None:
        self.identity = AwsIdentity.from_config(req.config)

    def create(self, props: dict[str, Any]) -> pulumi.dynamic.CreateResult:
        result = run_task(props, identity=self.identity)
        return pulumi.dynamic.CreateResult(id_=result["taskArn"], outs={**props, **result})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.DiffResult:
        changed = [k for k in RUN_INPUTS if olds.get(k) != news.get(k)]
        return pulumi.dynamic.DiffResult(changes=bool(changed), replaces=[], delete_before_replace=False)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.UpdateResult:
        return pulumi.dynamic.UpdateResult(outs={**news, **run_task(news, identity=self.identity)})

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        return None  # a finished run leaves nothing behind


class EcsTaskRun(pulumi.dynamic.Resource):
    """One run of a task definition to completion (see the module docstring)."""

    task_arn: pulumi.Output[str]
    exit_code: pulumi.Output[int]

    def __init__(
        self,
        name: str,
        *,
        cluster: pulumi.Input[str],
        task_definition: pulumi.Input[str],
        container_name: str,
        subnets: list[pulumi.Input[str]],
        security_groups: list[pulumi.Input[str]],
        region: str,
        log_stream_prefix: str = "",
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(
            EcsTaskRunProvider(),
            name,
            {
                "cluster": cluster,
                "taskDefinition": task_definition,
                "containerName": container_name,
                "subnets": subnets,
                "securityGroups": security_groups,
                "region": region,
                "logStreamPrefix": log_stream_prefix,
                "taskArn": None,
                "exitCode": None,
            },
            opts,
        )
