"""VPC endpoint policies: each endpoint admits only the calls this stack makes, on this stack's resources.

An endpoint without a policy allows every action of its service on every resource, for any
principal that can reach it. Here every endpoint the stack knows gets a policy (a separate
``aws.ec2.VpcEndpointPolicy``, written after the resources it names exist):

* ``secretsmanager``: read the stack's three secrets (API keys, cache token, Aurora master secret);
* ``logs``: write to the API's log group (the API, its sidecars, the migration task);
* ``ecr.api`` / ``ecr.dkr``: sign in, and pull from the stack's repository (and the reranker's
  inference image repository);
* ``bedrock-runtime``: invoke the configured models and inference profiles;
* ``sagemaker.runtime``: invoke the stack's reranker endpoints;
* the S3 gateway: ECR's image layer bucket of the Region and the staged reranker model.

Every statement but the ECR layer bucket's also requires the caller to be of this account
(``aws:PrincipalAccount``); ECR hands out layer downloads as presigned URLs of its own. An
interface endpoint the stack does not know (``cognis:vpcInterfaceEndpoints`` may add any) keeps
the default full-access policy, and the program says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws

from .context import AwsContext
from .iam import document, statement


@dataclass
class EndpointResources:
    """The ARNs each endpoint's policy names (resolved Outputs are fine)."""

    secret_arns: Sequence[pulumi.Input[str]]
    log_group_arns: Sequence[pulumi.Input[str]]
    #: ECR repositories the tasks and the reranker pull from; empty: the image comes from elsewhere.
    repository_arns: Sequence[pulumi.Input[str]]
    bedrock_arns: Sequence[str]
    reranker_endpoint_arn_pattern: str | None
    #: ``(bucket, prefix)`` of the staged reranker model, when there is a reranker.
    model_data: tuple[str, str] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


def _account(ctx: AwsContext) -> dict[str, Any]:
    return {"StringEquals": {"aws:PrincipalAccount": ctx.account_id}}


def _allow(sid: str, actions: Sequence[str], resources: Any, ctx: AwsContext, *, own_account: bool = True) -> dict:
    return statement(sid, actions, resources, principal="*", condition=_account(ctx) if own_account else None)


def ecr_layer_bucket(ctx: AwsContext) -> str:
    """The S3 bucket ECR serves image layers from in a Region."""
    return f"arn:{ctx.partition}:s3:::prod-{ctx.region}-starport-layer-bucket"


def interface_policies(ctx: AwsContext, r: EndpointResources) -> dict[str, list[dict]]:
    """Statements per interface endpoint service; a service missing here keeps the default policy."""
    policies: dict[str, list[dict]] = {
        "secretsmanager": [
            _allow(
                "ReadStackSecrets",
                ["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
                list(r.secret_arns),
                ctx,
            )  # fmt: skip
        ],
        "logs": [
            _allow(
                "WriteStackLogs",
                ["logs:CreateLogStream", "logs:PutLogEvents"],
                [a for arn in r.log_group_arns for a in (arn, pulumi.Output.concat(arn, ":*"))],
                ctx,
            )  # fmt: skip
        ],
        "bedrock-runtime": [
            _allow(
                "InvokeStackModels",
                ["bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"],
                list(r.bedrock_arns),
                ctx,
            )  # fmt: skip
        ],
    }
    if r.repository_arns:
        pull = [
            _allow("EcrAuth", ["ecr:GetAuthorizationToken"], "*", ctx),  # no resource-level permissions
            _allow(
                "PullStackImages",
                ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
                list(r.repository_arns),
                ctx,
            ),  # fmt: skip
        ]
        policies["ecr.api"] = pull
        policies["ecr.dkr"] = pull
    if r.reranker_endpoint_arn_pattern:
        policies["sagemaker.runtime"] = [
            _allow("InvokeStackReranker", ["sagemaker:InvokeEndpoint"], [r.reranker_endpoint_arn_pattern], ctx)
        ]
    return policies


def s3_policy(ctx: AwsContext, r: EndpointResources) -> list[dict]:
    statements = [
        _allow("EcrImageLayers", ["s3:GetObject"], [f"{ecr_layer_bucket(ctx)}/*"], ctx, own_account=False),
    ]
    if r.model_data is not None:
        bucket, prefix = r.model_data
        arn = f"arn:{ctx.partition}:s3:::{bucket}"
        statements.append(_allow("ReadRerankerModel", ["s3:GetObject"], [f"{arn}/{prefix}*"], ctx))
        statements.append(_allow("ListRerankerModel", ["s3:ListBucket"], [arn], ctx))
    return statements


def attach_endpoint_policies(
    ctx: AwsContext,
    interface_endpoint_ids: Mapping[str, pulumi.Input[str]],
    s3_endpoint_id: pulumi.Input[str],
    resources: EndpointResources,
    *,
    name: str = "endpoint-policy",
    parent: pulumi.Resource | None = None,
) -> dict[str, aws.ec2.VpcEndpointPolicy]:
    """One ``VpcEndpointPolicy`` per endpoint the stack knows; a warning for the others."""
    opts = pulumi.ResourceOptions(parent=parent)
    policies = interface_policies(ctx, resources)
    created = {}
    for svc, endpoint_id in interface_endpoint_ids.items():
        if svc not in policies:
            pulumi.log.warn(f"VPC endpoint {svc}: no policy known for it; it keeps the default (full access)")
            continue
        created[svc] = aws.ec2.VpcEndpointPolicy(
            f"{name}-{svc.replace('.', '-')}", vpc_endpoint_id=endpoint_id, policy=document(*policies[svc]), opts=opts
        )
    created["s3"] = aws.ec2.VpcEndpointPolicy(
        f"{name}-s3", vpc_endpoint_id=s3_endpoint_id, policy=document(*s3_policy(ctx, resources)), opts=opts
    )
    return created
