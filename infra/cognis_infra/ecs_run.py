"""Run a one-off ECS task inside ``pulumi up`` and fail the update when it fails: the schema migration.

``EcsTaskRun`` is a Pulumi dynamic resource (its provider runs in the deploying process, with boto3
and the deployer's AWS credentials: the default chain, or the stack's ``aws:profile``). Creating it
runs the task once; any change of its inputs (a new task definition revision, i.e. a new image or
new settings) runs it again; deleting it does nothing. A run succeeds only when the task stopped
and its essential container exited 0; anything else raises with the stop reason and where its log
is, so the ECS service that depends on it is not updated.
"""

from __future__ import annotations

import time
from typing import Any

import pulumi
import pulumi.dynamic

#: Inputs whose change runs the task again (everything the run depends on).
RUN_INPUTS: tuple[str, ...] = (
    "cluster",
    "taskDefinition",
    "containerName",
    "subnets",
    "securityGroups",
    "region",
    "profile",
)


class EcsTaskFailed(RuntimeError):
    """The one-off task did not finish with exit code 0."""


def ecs_client(region: str, profile: str | None = None) -> Any:
    import boto3

    session = boto3.Session(profile_name=profile, region_name=region) if profile else boto3.Session(region_name=region)
    return session.client("ecs")


def run_task(props: dict[str, Any], *, client: Any = None, poll_s: float = 6.0, timeout_s: float = 1800.0) -> dict:
    """Start the task, wait until it stopped, and return ``{taskArn, exitCode}``; raise :class:`EcsTaskFailed`."""
    ecs = client or ecs_client(props["region"], props.get("profile"))
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
    if started.get("failures") or not started.get("tasks"):
        raise EcsTaskFailed(f"ECS could not start {props['taskDefinition']}: {started.get('failures')}")
    task_arn = started["tasks"][0]["taskArn"]
    deadline = time.monotonic() + timeout_s
    while True:
        task = ecs.describe_tasks(cluster=props["cluster"], tasks=[task_arn])["tasks"][0]
        if task.get("lastStatus") == "STOPPED":
            break
        if time.monotonic() > deadline:
            raise EcsTaskFailed(
                f"{task_arn} did not stop within {timeout_s:g} s (last status {task.get('lastStatus')})"
            )
        time.sleep(poll_s)
    container = next((c for c in task.get("containers", []) if c.get("name") == props["containerName"]), {})
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

    def create(self, props: dict[str, Any]) -> pulumi.dynamic.CreateResult:
        result = run_task(props)
        return pulumi.dynamic.CreateResult(id_=result["taskArn"], outs={**props, **result})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.DiffResult:
        changed = [k for k in RUN_INPUTS if olds.get(k) != news.get(k)]
        return pulumi.dynamic.DiffResult(changes=bool(changed), replaces=[], delete_before_replace=False)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.UpdateResult:
        return pulumi.dynamic.UpdateResult(outs={**news, **run_task(news)})

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
        profile: str | None = None,
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
                "profile": profile,
                "logStreamPrefix": log_stream_prefix,
                "taskArn": None,
                "exitCode": None,
            },
            opts,
        )
