"""Reranker: a SageMaker real-time endpoint serving a BGE cross-encoder.

The model runs in Hugging Face Text Embeddings Inference (TEI), the Hugging Face inference
container for embedding and reranker models. Its weights are *not* fetched from the Hugging Face
Hub: ``scripts/stage_reranker_model.py`` stages a pinned revision (or a local directory) under an
S3 prefix once, ``cognis:rerankerModelS3Uri`` names that prefix, and SageMaker copies it to
``/opt/ml/model`` (uncompressed ``S3Prefix`` model data) before the container starts, where TEI
loads it (``HF_MODEL_ID=/opt/ml/model``). The container runs with network isolation (no inbound
or outbound network at all) and its instances sit in the private subnets (``vpc_config``).

For a reranker (sequence classification) model, TEI routes ``/invocations`` to ``/rerank``,
which is exactly what the API's SageMaker reranker sends by default (``payload_format="tei"``)::

    {"query": "...", "texts": ["doc 0", ...], "truncate": true, "raw_scores": false}

answered with ``[{"index": 1, "score": 0.93}, ...]``. ``MAX_CLIENT_BATCH_SIZE`` is raised
above TEI's default of 32 so one request can carry every candidate the API sends.

The endpoint scales on invocations per instance (target tracking). SageMaker refuses to
update an endpoint when the update changes the instance type of a variant registered with
Application Auto Scaling, so the endpoint *name* carries the instance type: a new
``cognis:rerankerInstanceType`` creates a new endpoint (and its scaling target) next to the
old one, the API moves to it, and the old endpoint and target are deleted at the end of the
same ``pulumi up``. Every other change (model, counts, image) is an in-place update of the
endpoint, which auto scaling allows, made with ``RetainAllVariantProperties`` so that the instance
count autoscaling reached is kept (:mod:`.sagemaker_endpoint`; without the flag ``UpdateEndpoint``
resets the variant to the configuration's initial count).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from .base import CognisComponent
from .context import AwsContext
from .iam import assume_role_policy, document, statement
from .naming import physical_name, slug
from .sagemaker_endpoint import SageMakerEndpoint

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


#: Where SageMaker puts the model data and TEI reads it.
MODEL_DIR = "/opt/ml/model"
_S3_PREFIX_RE = re.compile(r"^s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/(?P<prefix>.+/)$")
#: SageMaker endpoint names: 63 characters of ``[a-zA-Z0-9](-*[a-zA-Z0-9])*``.
ENDPOINT_NAME_MAX = 63


@dataclass(frozen=True)
class RerankerSettings:
    """Model data, hardware and scaling of the reranker endpoint (stack config)."""

    enabled: bool = True
    #: ``s3://bucket/prefix/`` of the staged model (scripts/stage_reranker_model.py prints it).
    model_s3_uri: str | None = None
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
    log_retention_days: int = 30

    def __post_init__(self) -> None:
        if not self.instance_type.startswith("ml."):
            raise ValueError(f"cognis:rerankerInstanceType must be an ml.* instance type, got {self.instance_type}")
        if not 1 <= self.min_instances <= self.max_instances:
            raise ValueError("need 1 <= cognis:rerankerMinInstances <= cognis:rerankerMaxInstances")
        if self.max_client_batch < 1:
            raise ValueError("cognis:rerankerMaxClientBatch must be positive")
        if self.enabled and self.model_s3_uri is None:
            raise ValueError(
                "cognis:rerankerModelS3Uri is required with the reranker enabled: stage the model with "
                "scripts/stage_reranker_model.py (it prints the URI and sets it), or set cognis:rerankerEnabled false"
            )
        if self.model_s3_uri is not None and not _S3_PREFIX_RE.match(self.model_s3_uri):
            raise ValueError(f"cognis:rerankerModelS3Uri must be s3://<bucket>/<prefix>/, got {self.model_s3_uri}")

    @property
    def uses_gpu(self) -> bool:
        family = self.instance_type.split(".")[1]
        return family.startswith(("g", "p"))

    @property
    def model_bucket(self) -> str:
        return _S3_PREFIX_RE.match(str(self.model_s3_uri))["bucket"]  # type: ignore[index]

    @property
    def model_prefix(self) -> str:
        return _S3_PREFIX_RE.match(str(self.model_s3_uri))["prefix"]  # type: ignore[index]


@dataclass
class RerankerArgs:
    settings: RerankerSettings
    context: AwsContext
    #: Stack prefix (``cognis-<stack>``): the endpoint name is ``<prefix>-reranker-<instance type>``.
    prefix: str
    subnet_ids: Sequence[pulumi.Input[str]]
    security_group_id: pulumi.Input[str]
    log_kms_key_arn: pulumi.Input[str]
    tags: Mapping[str, str] = field(default_factory=dict)


#: Room kept for the instance type in endpoint names (``ml-p4de-24xlarge`` is 16 characters).
_INSTANCE_SLUG_MAX = 20


def _endpoint_stem(prefix: str) -> str:
    return physical_name(prefix, "reranker", max_len=ENDPOINT_NAME_MAX - 1 - _INSTANCE_SLUG_MAX)


def endpoint_name(prefix: str, instance_type: str) -> str:
    """``<prefix>-reranker-<instance type>``: a new instance type is a new endpoint."""
    return f"{_endpoint_stem(prefix)}-{slug(instance_type)[:_INSTANCE_SLUG_MAX]}".rstrip("-")


def endpoint_name_pattern(prefix: str) -> str:
    """Every endpoint name :func:`endpoint_name` gives this prefix (for IAM resource ARNs)."""
    return f"{_endpoint_stem(prefix)}-*"


def endpoint_log_group(name: str) -> str:
    """The log group SageMaker writes an endpoint's container output to."""
    return f"/aws/sagemaker/Endpoints/{name}"


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


#: What SageMaker needs to attach the endpoint's instances to the VPC (these EC2 actions take no
#: resource-level permissions, hence "*" with named actions only).
VPC_ACTIONS: tuple[str, ...] = (
    "ec2:CreateNetworkInterface",
    "ec2:CreateNetworkInterfacePermission",
    "ec2:DeleteNetworkInterface",
    "ec2:DeleteNetworkInterfacePermission",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeVpcs",
    "ec2:DescribeDhcpOptions",
    "ec2:DescribeSubnets",
    "ec2:DescribeSecurityGroups",
)


class Reranker(CognisComponent):
    """SageMaker model (S3 weights, network isolation, VPC), endpoint configuration, endpoint,
    its log group and autoscaling."""

    endpoint_name: pulumi.Output[str]
    endpoint_arn: pulumi.Output[str]
    #: ARN pattern covering the current and the next endpoint (IAM grants survive a replacement).
    endpoint_arn_pattern: str
    variant_name: str = VARIANT

    def __init__(self, name: str, args: RerankerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("cognis:reranker:Reranker", name, args.tags, opts)
        s = args.settings
        ctx = args.context
        image = s.image or default_image(s, ctx.region)
        physical = endpoint_name(args.prefix, s.instance_type)
        bucket_arn = f"arn:{ctx.partition}:s3:::{s.model_bucket}"

        logs = self.log_group(
            f"{name}-logs",
            retention_days=s.log_retention_days,
            kms_key_arn=args.log_kms_key_arn,
            physical_name=endpoint_log_group(physical),
        )
        role = aws.iam.Role(
            f"{name}-role",
            name_prefix=physical_name(args.prefix, "reranker", max_len=37) + "-",
            description="SageMaker execution role of the cognis-memory reranker",
            assume_role_policy=assume_role_policy(ctx.service_principal("sagemaker"), source_account=ctx.account_id),
            tags=self.tags(f"{name}-role"),
            opts=self.child_opts(),
        )
        role_policy = aws.iam.RolePolicy(
            f"{name}-role",
            role=role.id,
            policy=document(
                statement(
                    "ReadModelData",
                    ["s3:GetObject"],
                    [f"{bucket_arn}/{s.model_prefix}*"],
                ),
                statement(
                    "ListModelData",
                    ["s3:ListBucket"],
                    [bucket_arn],
                    condition={"StringLike": {"s3:prefix": [f"{s.model_prefix}*"]}},
                ),
                # GetAuthorizationToken supports no resource-level permissions.
                statement("EcrAuth", ["ecr:GetAuthorizationToken"], "*"),
                statement(
                    "PullInferenceImage",
                    ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
                    [image_repository_arn(image, ctx.partition)],
                ),
                statement("AttachToVpc", list(VPC_ACTIONS), "*"),
                statement(
                    "EndpointLogs",
                    ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                    [pulumi.Output.concat(logs.arn, ":*")],
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
            enable_network_isolation=True,
            vpc_config=aws.sagemaker.ModelVpcConfigArgs(
                subnets=list(args.subnet_ids), security_group_ids=[args.security_group_id]
            ),
            primary_container=aws.sagemaker.ModelPrimaryContainerArgs(
                image=image,
                model_data_source=aws.sagemaker.ModelPrimaryContainerModelDataSourceArgs(
                    s3_data_sources=[
                        aws.sagemaker.ModelPrimaryContainerModelDataSourceS3DataSourceArgs(
                            s3_uri=str(s.model_s3_uri), s3_data_type="S3Prefix", compression_type="None"
                        )
                    ]
                ),
                environment={
                    "HF_MODEL_ID": MODEL_DIR,
                    "HF_HUB_OFFLINE": "1",
                    "MAX_CLIENT_BATCH_SIZE": str(s.max_client_batch),
                },
            ),
            tags=self.tags(f"{name}-model"),
            # Deleted by the endpoint once no endpoint runs on it (sagemaker_endpoint.py), not by Pulumi.
            opts=self.child_opts(depends_on=[role_policy], retain_on_delete=True),
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
            # AWS: never delete a configuration a live endpoint uses. The endpoint deletes the one it left
            # after an update that succeeded (sagemaker_endpoint.py); a failed update keeps it.
            opts=self.child_opts(retain_on_delete=True),
        )
        # Updated with RetainAllVariantProperties, so a new configuration (model, image, counts) keeps the
        # running instance count (sagemaker_endpoint.py); replaced (a new name) when the instance type
        # changes: the new endpoint is created before the old one goes.
        endpoint = SageMakerEndpoint(
            f"{name}-endpoint",
            name=physical,
            endpoint_config_name=config.name,
            region=ctx.region,
            tags=self.tags(physical),
            opts=self.child_opts(depends_on=[logs], delete_before_replace=False),
        )
        target = aws.appautoscaling.Target(
            f"{name}-scaling",
            service_namespace="sagemaker",
            scalable_dimension="sagemaker:variant:DesiredInstanceCount",
            resource_id=endpoint.name.apply(lambda n: f"endpoint/{n}/variant/{VARIANT}"),
            min_capacity=s.min_instances,
            max_capacity=s.max_instances,
            tags=self.tags(f"{name}-scaling"),
            # The resource id names the endpoint: a new endpoint gets a new target, and the old
            # target is deregistered before the old endpoint is deleted.
            opts=self.child_opts(replace_on_changes=["resourceId"], delete_before_replace=False),
        )
        self.target_tracking_policy(
            f"{name}-invocations",
            target,
            target_value=s.invocations_per_instance,
            metric_type="SageMakerVariantInvocationsPerInstance",
            opts=self.child_opts(replace_on_changes=["resourceId"]),
        )

        self.image = image
        self.image_repository_arn = image_repository_arn(image, ctx.partition)
        self.endpoint_name = endpoint.name
        self.endpoint_arn = endpoint.arn
        self.endpoint_arn_pattern = ctx.arn("sagemaker", f"endpoint/{endpoint_name_pattern(args.prefix)}")
        self.register_outputs(
            {"endpointName": self.endpoint_name, "endpointArn": self.endpoint_arn, "image": image, "variant": VARIANT}
        )
