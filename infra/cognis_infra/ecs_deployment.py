"""Fail ``pulumi up`` when the ECS deployment it started was rolled back by the circuit breaker.

The API service deploys with the circuit breaker's rollback and ``wait_for_steady_state``. When the
new tasks never become healthy, ECS marks the deployment ``FAILED`` and rolls the service back to the
last completed deployment; the AWS provider's wait ends once the *rollback* is steady and reports
success, so the state records the new task definition while the old one runs.
``EcsDeploymentCheck`` is a dynamic resource that runs after the service (it depends on it) whenever
the service's task definition or its redeploy triggers change. It reads the service until its
deployment has settled and fails unless

* the PRIMARY deployment (``DescribeServices``) runs the task definition just deployed and its
  rollout is not ``FAILED``, and
* the newest service deployment (``ListServiceDeployments``) did not end in a rollback or a stop
  (this also catches a redeploy of the same task definition, e.g. after a secret rotation).

A failed check keeps its previous inputs in the state, so every later ``up`` checks again and fails
again until a deployment of the wanted task definition succeeds (after fixing the cause,
``pulumi refresh`` puts the running task definition back into the service's state, so the next
``up`` deploys again). The check acts as the stack's AWS provider identity (``aws_session.py``).
"""

from __future__ import annotations

import time
from typing import Any

import pulumi
import pulumi.dynamic

from .aws_session import AwsIdentity, client_for

#: Inputs whose change means a new deployment to check.
CHECK_INPUTS: tuple[str, ...] = ("cluster", "service", "taskDefinition", "deploymentTriggers", "region")
#: Service deployment states (ListServiceDeployments) that are still moving.
IN_FLIGHT: frozenset[str] = frozenset(
    {"PENDING", "IN_PROGRESS", "STOP_REQUESTED", "ROLLBACK_REQUESTED", "ROLLBACK_IN_PROGRESS"}
)
#: Service deployment states that mean the deployment did not take effect.
UNDONE: frozenset[str] = frozenset({"ROLLBACK_SUCCESSFUL", "ROLLBACK_FAILED", "STOPPED"})


class EcsDeploymentFailed(RuntimeError):
    """The service does not run the deployed task definition (rolled back, failed or stopped)."""


def _service(ecs: Any, cluster: str, service: str) -> dict[str, Any]:
    found = ecs.describe_services(cluster=cluster, services=[service])
    match = [s for s in found.get("services", []) if service in (s.get("serviceName"), s.get("serviceArn"))]
    if not match:
        raise EcsDeploymentFailed(f"ECS does not describe service {service}: {found.get('failures')}")
    return match[0]


def _latest_service_deployment(ecs: Any, cluster: str, service: str) -> dict[str, Any] | None:
    found: list[dict[str, Any]] = []
    token: dict[str, str] = {}
    while True:
        page = ecs.list_service_deployments(cluster=cluster, service=service, **token)
        found += page.get("serviceDeployments", [])
        if not page.get("nextToken"):
            return max(found, key=lambda d: d.get("createdAt") or d.get("startedAt") or 0, default=None)
        token = {"nextToken": page["nextToken"]}


def check_deployment(
    props: dict[str, Any],
    *,
    client: Any = None,
    identity: AwsIdentity | None = None,
    poll_s: float = 15.0,
    timeout_s: float = 1800.0,
) -> dict[str, Any]:
    """Wait until the service's deployment settled; raise :class:`EcsDeploymentFailed` unless it runs
    ``taskDefinition`` (module docstring). ``{deploymentId, rolloutState}`` of the PRIMARY deployment."""
    ecs = client or client_for("ecs", identity or AwsIdentity(), props["region"])
    cluster, service, wanted = props["cluster"], props["service"], props["taskDefinition"]
    deadline = time.monotonic() + timeout_s
    while True:
        primary = next(d for d in _service(ecs, cluster, service)["deployments"] if d.get("status") == "PRIMARY")
        latest = _latest_service_deployment(ecs, cluster, service)
        moving = primary.get("rolloutState") == "IN_PROGRESS" or (latest or {}).get("status") in IN_FLIGHT
        if not moving:
            break
        if time.monotonic() > deadline:
            raise EcsDeploymentFailed(f"service {service} still deploying after {timeout_s:g} s")
        time.sleep(poll_s)
    problems = []
    if primary.get("taskDefinition") != wanted:
        problems.append(f"it runs {primary.get('taskDefinition')}, not {wanted}")
    if primary.get("rolloutState") == "FAILED":
        problems.append(f"its deployment {primary.get('id')} FAILED: {primary.get('rolloutStateReason')}")
    if latest and latest.get("status") in UNDONE:
        problems.append(
            f"the newest deployment {latest.get('serviceDeploymentArn')} ended {latest['status']}: "
            f"{latest.get('statusReason')}"
        )
    if problems:
        raise EcsDeploymentFailed(
            f"ECS service {service} did not take the new deployment (the circuit breaker rolled it back or "
            f"it failed): {'; '.join(problems)}. The service's task logs say why the new tasks failed."
        )
    return {"deploymentId": primary.get("id"), "rolloutState": primary.get("rolloutState")}


class EcsDeploymentCheckProvider(pulumi.dynamic.ResourceProvider):
    """Checks the deployment on create and whenever :data:`CHECK_INPUTS` change."""

    #: The stack's AWS provider identity, read in :meth:`configure` (aws_session.py).
    identity: AwsIdentity = AwsIdentity()

    def configure(self, req: pulumi.dynamic.ConfigureRequest) -> None:
        self.identity = AwsIdentity.from_config(req.config)

    def create(self, props: dict[str, Any]) -> pulumi.dynamic.CreateResult:
        result = check_deployment(props, identity=self.identity)
        return pulumi.dynamic.CreateResult(id_=f"{props['service']}-deployment", outs={**props, **result})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.DiffResult:
        changed = [k for k in CHECK_INPUTS if olds.get(k) != news.get(k)]
        return pulumi.dynamic.DiffResult(changes=bool(changed), replaces=[], delete_before_replace=False)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.UpdateResult:
        return pulumi.dynamic.UpdateResult(outs={**news, **check_deployment(news, identity=self.identity)})

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        return None  # a check leaves nothing behind


class EcsDeploymentCheck(pulumi.dynamic.Resource):
    """The service's deployment of ``task_definition`` took effect (see the module docstring)."""

    deployment_id: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        cluster: pulumi.Input[str],
        service: pulumi.Input[str],
        task_definition: pulumi.Input[str],
        deployment_triggers: pulumi.Input[dict[str, pulumi.Input[str]]],
        region: str,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(
            EcsDeploymentCheckProvider(),
            name,
            {
                "cluster": cluster,
                "service": service,
                "taskDefinition": task_definition,
                "deploymentTriggers": deployment_triggers,
                "region": region,
                "deploymentId": None,
                "rolloutState": None,
            },
            opts,
        )
