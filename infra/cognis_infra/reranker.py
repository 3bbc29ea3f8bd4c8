"""Reranker: a SageMaker real-time endpoint serving a BGE cross-encoder.

The model runs in Hugging Face Text Embeddings Inference (TEI), the Hugging Face
inference container for embedding and reranker models, which downloads ``HF_MODEL_ID``
from the Hugging Face Hub when the endpoint starts. For a reranker (sequence
classification) model, TEI routes ``/invocations`` to ``/rerank``, which is exactly what
the API's SageMaker reranker sends by default (``payload_format="tei"``)::

    {"query": "...", "texts": ["doc 0", ...], "truncate": true, "raw_scores": false}

answered with ``[{"index": 1, "score": 0.93}, ...]``. ``MAX_CLIENT_BATCH_SIZE`` is raised
above TEI's default of 32 so one request can carry every candidate the API sends.

The endpoint scales on invocations per instance (target tracking) between the
configured minimum and maximum instance counts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from .base import CognisComponent
from .context import AwsContext
from .iam import assume_role_policy, document, statement

VARIANT = "AllTraffic"
TEI_VERSION = "1.8.2"
#: TEI image repository and tag per device (SageMaker Hugging Face TEI containers).
TEI_IMAGES = {
    "gpu": ("tei", f"2.0.1-tei{TEI_VERSION}-gpu-py310-cu122-ubuntu22.04"),
    "cpu": ("tei-cpu", f"2.0.1-tei{TEI_VERSION}-cpu-py310-ubuntu22.04"),
}
#: Account hosting the TEI images, per region (commercial partition; from the SageMaker
#: Python SDK's image config). Other regions: set ``cognis:rerankerImage``.
TEI_ACCOUNTS: dict[str, str] = {
    "af-south-1": "510948584623",
    "ap-east-1": "651117190479",
    "ap-northeast-1": "354813040037",
    "ap-northeast-2": "366743142698",
    "ap-northeast-3": "867004704886",
    "ap-south-1": "720646828776",
    "ap-south-2": "628508329040",
    "ap-southeast-1": "121021644041",
    "ap-southeast-2": "783357654285",
    "ap-southeast-3": "951798379941",
    "ap-southeast-4": "106583098589",
    "ca-central-1": "341280168497",
    "ca-west-1": "190319476487",
    "eu-central-1": "492215442770",
    "eu-central-2": "680994064768",
    "eu-north-1": "662702820516",
    "eu-south-1": "978288397137",
    "eu-south-2": "104374241257",
    "eu-west-1": "141502667606",
    "eu-west-2": "764974769150",
    "eu-west-3": "659782779980",
    "il-central-1": "898809789911",
    "me-central-1": "272398656194",
    "me-south-1": "801668240914",
    "sa-east-1": "737474898029",
    "us-east-1": "683313688378",
    "us-east-2": "257758044811",
    "us-west-1": "746614075791",
    "us-west-2": "246618743249",
}
_IMAGE_RE = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/(?P<repo>[^:@]+)[:@].+$"
)


@dataclass(frozen=True)
class RerankerSettings:
    """Model, hardware and scaling of the reranker endpoint (stack config)."""

    enabled: bool = True
    model_id: str = "BAAI/bge-reranker-v2-m3"
    instance_type: str = "ml.g5.xlarge"
    min_instances: int = 1
    max_instances: int = 2
    #: Target invocations per instance per minute for autoscaling.
    invocations_per_instance: int = 300
    #: Full image URI; default: the region's Hugging Face TEI image for the instance's device.
    image: str | None = None
    #: Largest number of texts in one request (TEI's --max-client-batch-size).
    max_client_batch: int = 128
    startup_timeout_s: int = 900

    def __post_init__(self) -> None:
        if not self.instance_type.startswith("ml."):
            raise ValueError(f"cognis:rerankerInstanceType must be an ml.* instance type, got {self.instance_type}")
        if not 1 <= self.min_instances <= self.max_instances:
            raise ValueError("need 1 <= cognis:rerankerMinInstances <= cognis:rerankerMaxInstances")
        if self.max_client_batch < 1:
            raise ValueError("cognis:rerankerMaxClientBatch must be positive")
        if "/" not in self.model_id:
            raise ValueError(f"cognis:rerankerModelId must be a Hugging Face Hub id (org/name), got {self.model_id}")

    @property
    def uses_gpu(self) -> bool:
        family = self.instance_type.split(".")[1]
        return family.startswith(("g", "p"))


@dataclass
class RerankerArgs:
    settings: RerankerSettings
    context: AwsContext
    tags: Mapping[str, str] = field(default_factory=dict)


def default_image(settings: RerankerSettings, region: str) -> str:
    """The Hugging Face TEI image for the region and the instance's device (GPU or CPU)."""
    account = TEI_ACCOUNTS.get(region)
    if account is None:
        raise ValueError(
            f"no default Hugging Face TEI image known for {region}; set cognis:rerankerImage "
            "(sagemaker.huggingface.get_huggingface_llm_image_uri('huggingface-tei') prints it)"
        )
    repository, tag = TEI_IMAGES["gpu" if settings.uses_gpu else "cpu"]
    return f"{account}.dkr.ecr.{region}.amazonaws.com/{repository}:{tag}"


def image_repository_arn(image: str, partition: str) -> str:
    """ARN of the ECR repository an image URI points at (for the pull permission)."""
    m = _IMAGE_RE.match(image)
    if not m:
        raise ValueError(f"cognis:rerankerImage must be an ECR image URI (<account>.dkr.ecr.<region>...), got {image}")
    return f"arn:{partition}:ecr:{m['region']}:{m['account']}:repository/{m['repo']}"


class Reranker(CognisComponent):
    """SageMaker model, endpoint configuration, endpoint and autoscaling."""

    endpoint_name: pulumi.Output[str]
    endpoint_arn: pulumi.Output[str]
    variant_name: str = VARIANT

    def __init__(self, name: str, args: RerankerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("cognis:reranker:Reranker", name, args.tags, opts)
        s = args.settings
        ctx = args.context
        image = s.image or default_image(s, ctx.region)

        role = aws.iam.Role(
            f"{name}-role",
            description="SageMaker execution role of the cognis-memory reranker",
            assume_role_policy=assume_role_policy(ctx.service_principal("sagemaker"), source_account=ctx.account_id),
            tags=self.tags(f"{name}-role"),
            opts=self.child_opts(),
        )
        role_policy = aws.iam.RolePolicy(
            f"{name}-role",
            role=role.id,
            policy=document(
                # GetAuthorizationToken supports no resource-level permissions.
                statement("EcrAuth", ["ecr:GetAuthorizationToken"], "*"),
                statement(
                    "PullInferenceImage",
                    ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
                    [image_repository_arn(image, ctx.partition)],
                ),
                statement(
                    "EndpointLogs",
                    ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                    [ctx.arn("logs", "log-group:/aws/sagemaker/Endpoints/*")],
                ),
                statement(
                    "EndpointMetrics",
                    ["cloudwatch:PutMetricData"],
                    "*",
                    condition={"StringLike": {"cloudwatch:namespace": "/aws/sagemaker/Endpoints*"}},
                ),
            ),
            opts=self.child_opts(),
        )
        model = aws.sagemaker.Model(
            f"{name}-model",
            execution_role_arn=role.arn,
            primary_container=aws.sagemaker.ModelPrimaryContainerArgs(
                image=image,
                environment={
                    "HF_MODEL_ID": s.model_id,
                    "MAX_CLIENT_BATCH_SIZE": str(s.max_client_batch),
                },
            ),
            tags=self.tags(f"{name}-model"),
            opts=self.child_opts(depends_on=[role_policy]),
        )
        config = aws.sagemaker.EndpointConfiguration(
            f"{name}-config",
            production_variants=[
                aws.sagemaker.EndpointConfigurationProductionVariantArgs(
                    variant_name=VARIANT,
                    model_name=model.name,
                    instance_type=s.instance_type,
                    initial_instance_count=s.min_instances,
                    initial_variant_weight=1.0,
                    container_startup_health_check_timeout_in_seconds=s.startup_timeout_s,
                    model_data_download_timeout_in_seconds=s.startup_timeout_s,
                )
            ],
            tags=self.tags(f"{name}-config"),
            opts=self.child_opts(),
        )
        endpoint = aws.sagemaker.Endpoint(
            f"{name}-endpoint",
            endpoint_config_name=config.name,
            tags=self.tags(f"{name}-endpoint"),
            opts=self.child_opts(),
        )
        target = aws.appautoscaling.Target(
            f"{name}-scaling",
            service_namespace="sagemaker",
            scalable_dimension="sagemaker:variant:DesiredInstanceCount",
            resource_id=endpoint.name.apply(lambda n: f"endpoint/{n}/variant/{VARIANT}"),
            min_capacity=s.min_instances,
            max_capacity=s.max_instances,
            tags=self.tags(f"{name}-scaling"),
            opts=self.child_opts(),
        )
        aws.appautoscaling.Policy(
            f"{name}-invocations",
            policy_type="TargetTrackingScaling",
            service_namespace=target.service_namespace,
            scalable_dimension=target.scalable_dimension,
            resource_id=target.resource_id,
            target_tracking_scaling_policy_configuration=aws.appautoscaling.PolicyTargetTrackingScalingPolicyConfigurationArgs(
                target_value=float(s.invocations_per_instance),
                predefined_metric_specification=aws.appautoscaling.PolicyTargetTrackingScalingPolicyConfigurationPredefinedMetricSpecificationArgs(
                    predefined_metric_type="SageMakerVariantInvocationsPerInstance",
                ),
                scale_in_cooldown=300,
                scale_out_cooldown=60,
            ),
            opts=self.child_opts(),
        )

        self.image = image
        self.endpoint_name = endpoint.name
        self.endpoint_arn = endpoint.arn
        self.register_outputs(
            {"endpointName": self.endpoint_name, "endpointArn": self.endpoint_arn, "image": image, "variant": VARIANT}
        )
