"""Small building blocks shared by every component."""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
import pulumi_aws as aws


def base_tags(project: str, stack: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The stack-wide tags (the ``required-tags`` policy checks the first three)."""
    tags = {"Project": project, "Stack": stack, "ManagedBy": "pulumi"}
    tags.update(extra or {})
    return tags


class CognisComponent(pulumi.ComponentResource):
    """A component whose children are tagged with the stack tags and ``Component``."""

    def __init__(
        self,
        type_token: str,
        name: str,
        tags: Mapping[str, str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(type_token, name, None, opts)
        self._name = name
        self._tags = {**tags, "Component": type_token.split(":")[1]}

    def tags(self, name: str | None = None) -> dict[str, str]:
        """Tags for one child; ``name`` becomes the console-visible ``Name`` tag."""
        tags = dict(self._tags)
        if name:
            tags["Name"] = name
        return tags

    def child_opts(self, **kwargs) -> pulumi.ResourceOptions:
        """Resource options that parent a resource to this component."""
        return pulumi.ResourceOptions(parent=self, **kwargs)

    def log_group(
        self,
        name: str,
        *,
        retention_days: int,
        kms_key_arn: pulumi.Input[str],
        physical_name: pulumi.Input[str] | None = None,
    ) -> aws.cloudwatch.LogGroup:
        """A child log group encrypted with the stack's key and with a retention; ``physical_name``
        is given for the groups an AWS service writes to by a fixed name (the stack creates them
        first so that they carry the retention and the key, and are deleted with the stack)."""
        return aws.cloudwatch.LogGroup(
            name,
            name=physical_name,
            retention_in_days=retention_days,
            kms_key_id=kms_key_arn,
            tags=self.tags(name),
            opts=self.child_opts(),
        )

    def target_tracking_policy(
        self,
        name: str,
        target: aws.appautoscaling.Target,
        *,
        target_value: float,
        metric_type: str,
        resource_label: pulumi.Input[str] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> aws.appautoscaling.Policy:
        """A target-tracking scaling policy on ``target`` over a predefined metric: scale out
        after 1 minute, in after 5."""
        tracking = aws.appautoscaling.PolicyTargetTrackingScalingPolicyConfigurationArgs
        predefined = aws.appautoscaling.PolicyTargetTrackingScalingPolicyConfigurationPredefinedMetricSpecificationArgs
        return aws.appautoscaling.Policy(
            name,
            policy_type="TargetTrackingScaling",
            service_namespace=target.service_namespace,
            scalable_dimension=target.scalable_dimension,
            resource_id=target.resource_id,
            target_tracking_scaling_policy_configuration=tracking(
                target_value=float(target_value),
                predefined_metric_specification=predefined(
                    predefined_metric_type=metric_type, resource_label=resource_label
                ),
                scale_in_cooldown=300,
                scale_out_cooldown=60,
            ),
            opts=opts or self.child_opts(),
        )
