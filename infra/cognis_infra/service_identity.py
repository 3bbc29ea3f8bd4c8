"""The API's two roles, made before the service: the task role (what the API may call) and the
execution role (what ECS does for it), so that the OpenSearch domain's access policy can name the
task role before the service exists; :class:`~.service.Service` grants them what they use."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from .base import CognisComponent
from .context import AwsContext
from .iam import assume_role_policy
from .naming import physical_name


@dataclass
class ServiceIdentityArgs:
    context: AwsContext
    #: Stack prefix (``cognis-<stack>``) for the role names.
    prefix: str
    tags: Mapping[str, str] = field(default_factory=dict)


class ServiceIdentity(CognisComponent):
    """The task role (what the API may call) and the execution role (what ECS does)."""

    task_role_arn: pulumi.Output[str]
    execution_role_arn: pulumi.Output[str]

    def __init__(self, name: str, args: ServiceIdentityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("cognis:service:ServiceIdentity", name, args.tags, opts)
        trust = assume_role_policy(args.context.service_principal("ecs-tasks"), source_account=args.context.account_id)
        self.task_role = aws.iam.Role(
            f"{name}-task",
            name_prefix=physical_name(args.prefix, "task", max_len=37) + "-",
            description="cognis-memory API task role",
            assume_role_policy=trust,
            tags=self.tags(f"{name}-task"),
            opts=self.child_opts(),
        )
        self.execution_role = aws.iam.Role(
            f"{name}-execution",
            name_prefix=physical_name(args.prefix, "execution", max_len=37) + "-",
            description="cognis-memory API task execution role (image pull, logs, secrets)",
            assume_role_policy=trust,
            tags=self.tags(f"{name}-execution"),
            opts=self.child_opts(),
        )
        self.task_role_arn = self.task_role.arn
        self.execution_role_arn = self.execution_role.arn
        self.register_outputs({"taskRoleArn": self.task_role_arn, "executionRoleArn": self.execution_role_arn})
