"""Service: the API on ECS Fargate behind an Application Load Balancer.

* ``ServiceIdentity`` creates the task role and the task execution role first, so the
  OpenSearch domain's access policy can name the task role before the service exists.
* ``Service`` grants those roles exactly what they use, and runs the container:

  - task role: ``bedrock:InvokeModel*`` on the configured model ids (foundation models and,
    for cross-region inference profiles, the profile), ``sagemaker:InvokeEndpoint`` on the
    reranker endpoint, ``secretsmanager:GetSecretValue`` on the Aurora master secret, and
    the OpenSearch HTTP verbs on the domain;
  - execution role: pull the API image, write its log group, read the two secrets ECS
    injects (``COGNIS_API_KEYS``, ``COGNIS_REDIS_PASSWORD``).

* The ALB terminates TLS (certificate from ``cognis:certificateArn``, TLS 1.2+ policy),
  redirects HTTP to HTTPS and forwards to the tasks on port 8080. Target health is the
  readiness endpoint (``GET /ready``: stores reachable); the container's own ECS health
  check is liveness (``GET /health``), so a store outage does not make ECS kill every task.
* Deployments use the circuit breaker with rollback; the service scales on CPU and on
  requests per target.
* Environment variables point at the other components' outputs (``COGNIS_*``).

Without an image (no ``cognis:imageTag`` or ``cognis:image`` yet), everything except the
task definition, the ECS service and its autoscaling is created; push an image with
``scripts/build_and_push_image.sh`` and run ``pulumi up`` again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws

from .base import CognisComponent
from .context import AwsContext
from .iam import assume_role_policy, document, statement
from .search import DATA_PLANE_ACTIONS

CONTAINER_NAME = "api"
#: Bedrock cross-region inference profile prefixes ("us.anthropic.claude-...").
INFERENCE_PROFILE_PREFIXES: tuple[str, ...] = ("us", "eu", "apac", "us-gov", "ca", "jp", "au", "global")
LIVENESS_PATH = "/health"
READINESS_PATH = "/ready"


@dataclass(frozen=True)
class ServiceSettings:
    """Size, scaling and edge of the API service (stack config)."""

    certificate_arn: str
    cpu: int = 1024
    memory: int = 2048
    desired_count: int = 2
    min_count: int = 2
    max_count: int = 10
    cpu_target_percent: float = 60.0
    requests_per_target: int = 1000
    cpu_architecture: str = "X86_64"
    port: int = 8080
    ssl_policy: str = "ELBSecurityPolicy-TLS13-1-2-Res-2021-06"
    log_retention_days: int = 30
    health_check_grace_s: int = 180
    alb_deletion_protection: bool = False
    api_domain_name: str | None = None
    bedrock_model_id: str = "anthropic.claude-3-5-haiku-20241022-v1:0"
    bedrock_extra_model_ids: tuple[str, ...] = ()
    first_tenant: str = "default"

    def __post_init__(self) -> None:
        if not self.certificate_arn.startswith("arn:") or ":acm:" not in self.certificate_arn:
            raise ValueError("cognis:certificateArn must be an ACM certificate ARN (arn:aws:acm:...)")
        if (self.cpu, self.memory) not in _FARGATE_SIZES:
            raise ValueError(f"cognis:cpu/cognis:memory {self.cpu}/{self.memory} is not a valid Fargate size")
        if not 1 <= self.min_count <= self.desired_count <= self.max_count:
            raise ValueError("need 1 <= cognis:minCount <= cognis:desiredCount <= cognis:maxCount")
        if self.cpu_architecture not in ("X86_64", "ARM64"):
            raise ValueError("cognis:cpuArchitecture must be X86_64 or ARM64")
        if not self.ssl_policy.startswith(
            ("ELBSecurityPolicy-TLS13-", "ELBSecurityPolicy-TLS-1-2", "ELBSecurityPolicy-FS-1-2")
        ):
            raise ValueError(f"cognis:albSslPolicy {self.ssl_policy} allows TLS below 1.2")
        if "=" in self.first_tenant or "," in self.first_tenant or not self.first_tenant:
            raise ValueError("cognis:firstTenant must be a non-empty name without '=' or ','")


# Fargate CPU units -> allowed memory (MiB).
_FARGATE_SIZES = {
    *((256, m) for m in (512, 1024, 2048)),
    *((512, m) for m in range(1024, 4097, 1024)),
    *((1024, m) for m in range(2048, 8193, 1024)),
    *((2048, m) for m in range(4096, 16385, 1024)),
    *((4096, m) for m in range(8192, 30721, 1024)),
    *((8192, m) for m in range(16384, 61441, 4096)),
    *((16384, m) for m in range(32768, 122881, 8192)),
}


def bedrock_resource_arns(model_id: str, ctx: AwsContext) -> list[str]:
    """ARNs ``bedrock:InvokeModel`` needs for one model id.

    A plain id (``anthropic.claude-...``) is a foundation model in this region. A
    cross-region inference profile id (``us.anthropic.claude-...``) needs the profile
    and the foundation model in every region the profile may route to.
    """
    if model_id.startswith("arn:"):
        return [model_id]
    prefix, _, base = model_id.partition(".")
    p = ctx.partition
    if prefix in INFERENCE_PROFILE_PREFIXES and base:
        arns = [
            ctx.arn("bedrock", f"inference-profile/{model_id}"),
            f"arn:{p}:bedrock:*::foundation-model/{base}",
        ]
        if prefix == "global":
            arns.append(f"arn:{p}:bedrock:::foundation-model/{base}")
        return arns
    return [f"arn:{p}:bedrock:{ctx.region}::foundation-model/{model_id}"]


@dataclass
class ServiceIdentityArgs:
    context: AwsContext
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
            description="cognis-memory API task role",
            assume_role_policy=trust,
            tags=self.tags(f"{name}-task"),
            opts=self.child_opts(),
        )
        self.execution_role = aws.iam.Role(
            f"{name}-execution",
            description="cognis-memory API task execution role (image pull, logs, secrets)",
            assume_role_policy=trust,
            tags=self.tags(f"{name}-execution"),
            opts=self.child_opts(),
        )
        self.task_role_arn = self.task_role.arn
        self.execution_role_arn = self.execution_role.arn
        self.register_outputs({"taskRoleArn": self.task_role_arn, "executionRoleArn": self.execution_role_arn})


@dataclass
class ServiceArgs:
    settings: ServiceSettings
    context: AwsContext
    identity: ServiceIdentity
    # network
    vpc_id: pulumi.Input[str]
    public_subnet_ids: Sequence[pulumi.Input[str]]
    private_subnet_ids: Sequence[pulumi.Input[str]]
    alb_security_group_id: pulumi.Input[str]
    service_security_group_id: pulumi.Input[str]
    # image: full URI, or None before the first push
    image_uri: str | pulumi.Output[str] | None
    image_repository_arn: pulumi.Input[str] | None
    # stores
    postgres_host: pulumi.Input[str]
    postgres_port: pulumi.Input[int]
    postgres_db: str
    postgres_secret_arn: pulumi.Input[str]
    opensearch_url: pulumi.Input[str]
    opensearch_domain_arn: pulumi.Input[str]
    redis_url: pulumi.Input[str]
    redis_secret_arn: pulumi.Input[str]
    # reranker (None: disabled)
    reranker_endpoint_name: pulumi.Input[str] | None
    reranker_endpoint_arn: pulumi.Input[str] | None
    # first API key (a secret) and telemetry
    api_key: pulumi.Input[str]
    metrics_namespace: str
    service_name: str
    log_group_name: str
    log_kms_key_arn: pulumi.Input[str]
    #: Task definition family (unique per stack in the account).
    family: str = "cognis-memory-api"
    tags: Mapping[str, str] = field(default_factory=dict)


def container_environment(args: ServiceArgs) -> list[dict[str, Any]]:
    """The API's ``COGNIS_*`` environment, pointing at the other components."""
    s = args.settings
    env: dict[str, Any] = {
        "COGNIS_STORE": "dual",
        "COGNIS_POSTGRES_HOST": args.postgres_host,
        "COGNIS_POSTGRES_PORT": pulumi.Output.from_input(args.postgres_port).apply(lambda p: str(int(p))),
        "COGNIS_POSTGRES_DB": args.postgres_db,
        "COGNIS_POSTGRES_SECRET_ARN": args.postgres_secret_arn,
        "COGNIS_POSTGRES_SSLMODE": "require",
        "COGNIS_OPENSEARCH_URL": args.opensearch_url,
        "COGNIS_OPENSEARCH_AUTH": "sigv4",
        "COGNIS_REDIS_URL": args.redis_url,
        "COGNIS_RERANKER": "sagemaker" if args.reranker_endpoint_name is not None else "none",
        "COGNIS_LLM": "bedrock",
        "COGNIS_BEDROCK_MODEL_ID": s.bedrock_model_id,
        "COGNIS_AWS_REGION": args.context.region,
        "COGNIS_METRICS_NAMESPACE": args.metrics_namespace,
        "COGNIS_SERVICE_NAME": args.service_name,
        "COGNIS_HOST": "0.0.0.0",
        # The root filesystem is read-only: anything local goes to the /tmp volume.
        "COGNIS_DATA_DIR": "/tmp/cognis",
        "COGNIS_PORT": str(s.port),
        "HF_HUB_OFFLINE": "1",
    }
    if args.reranker_endpoint_name is not None:
        env["COGNIS_SAGEMAKER_ENDPOINT"] = args.reranker_endpoint_name
    return [{"name": k, "value": v} for k, v in sorted(env.items())]


class Service(CognisComponent):
    """ECS cluster, task definition, Fargate service, ALB, IAM policies and autoscaling."""

    api_url: pulumi.Output[str]
    alb_dns_name: pulumi.Output[str]
    alb_arn_suffix: pulumi.Output[str]
    target_group_arn_suffix: pulumi.Output[str]
    cluster_name: pulumi.Output[str]
    service_name: pulumi.Output[str] | None
    log_group_name: pulumi.Output[str]
    api_keys_secret_arn: pulumi.Output[str]

    def __init__(self, name: str, args: ServiceArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("cognis:service:Service", name, args.tags, opts)
        s = args.settings
        ctx = args.context

        # --- first API key: "key=tenant", injected as COGNIS_API_KEYS ----------------------
        api_keys = aws.secretsmanager.Secret(
            f"{name}-api-keys",
            description="cognis-memory bootstrap API keys (COGNIS_API_KEYS: key=tenant)",
            recovery_window_in_days=7,
            tags=self.tags(f"{name}-api-keys"),
            opts=self.child_opts(),
        )
        aws.secretsmanager.SecretVersion(
            f"{name}-api-keys",
            secret_id=api_keys.id,
            secret_string=pulumi.Output.secret(pulumi.Output.concat(args.api_key, "=", s.first_tenant)),
            opts=self.child_opts(),
        )

        log_group = aws.cloudwatch.LogGroup(
            f"{name}-logs",
            name=args.log_group_name,
            retention_in_days=s.log_retention_days,
            kms_key_id=args.log_kms_key_arn,
            tags=self.tags(f"{name}-logs"),
            opts=self.child_opts(),
        )

        # --- IAM: grant the roles exactly what they use -------------------------------------
        task_statements = [
            statement(
                "InvokeBedrockModels",
                ["bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"],
                sorted(
                    {
                        arn
                        for m in (s.bedrock_model_id, *s.bedrock_extra_model_ids)
                        for arn in bedrock_resource_arns(m, ctx)
                    }
                ),
            ),
            statement(
                "ReadDatabaseSecret",
                ["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
                [args.postgres_secret_arn],
            ),
            statement(
                "OpenSearchHttp",
                list(DATA_PLANE_ACTIONS),
                [args.opensearch_domain_arn, pulumi.Output.concat(args.opensearch_domain_arn, "/*")],
            ),
        ]
        if args.reranker_endpoint_arn is not None:
            task_statements.append(
                statement("InvokeReranker", ["sagemaker:InvokeEndpoint"], [args.reranker_endpoint_arn])
            )
        aws.iam.RolePolicy(
            f"{name}-task", role=args.identity.task_role.id, policy=document(*task_statements), opts=self.child_opts()
        )

        execution_statements = [
            statement("EcrAuth", ["ecr:GetAuthorizationToken"], "*"),  # no resource-level permissions
            statement(
                "WriteLogs", ["logs:CreateLogStream", "logs:PutLogEvents"], [pulumi.Output.concat(log_group.arn, ":*")]
            ),
            statement("ReadTaskSecrets", ["secretsmanager:GetSecretValue"], [api_keys.arn, args.redis_secret_arn]),
        ]
        if args.image_repository_arn is not None:
            execution_statements.insert(
                1,
                statement(
                    "PullApiImage",
                    ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
                    [args.image_repository_arn],
                ),
            )
        execution_policy = aws.iam.RolePolicy(
            f"{name}-execution",
            role=args.identity.execution_role.id,
            policy=document(*execution_statements),
            opts=self.child_opts(),
        )

        # --- load balancer -------------------------------------------------------------------
        alb = aws.lb.LoadBalancer(
            f"{name}-alb",
            load_balancer_type="application",
            internal=False,
            subnets=list(args.public_subnet_ids),
            security_groups=[args.alb_security_group_id],
            drop_invalid_header_fields=True,
            enable_deletion_protection=s.alb_deletion_protection,
            enable_http2=True,
            idle_timeout=60,
            tags=self.tags(f"{name}-alb"),
            opts=self.child_opts(),
        )
        target_group = aws.lb.TargetGroup(
            f"{name}-tg",
            port=s.port,
            protocol="HTTP",
            target_type="ip",
            vpc_id=args.vpc_id,
            deregistration_delay=30,
            health_check=aws.lb.TargetGroupHealthCheckArgs(
                enabled=True,
                path=READINESS_PATH,
                protocol="HTTP",
                port="traffic-port",
                matcher="200",
                interval=15,
                timeout=5,
                healthy_threshold=2,
                unhealthy_threshold=3,
            ),
            tags=self.tags(f"{name}-tg"),
            opts=self.child_opts(),
        )
        https = aws.lb.Listener(
            f"{name}-https",
            load_balancer_arn=alb.arn,
            port=443,
            protocol="HTTPS",
            ssl_policy=s.ssl_policy,
            certificate_arn=s.certificate_arn,
            default_actions=[aws.lb.ListenerDefaultActionArgs(type="forward", target_group_arn=target_group.arn)],
            tags=self.tags(f"{name}-https"),
            opts=self.child_opts(),
        )
        aws.lb.Listener(
            f"{name}-http",
            load_balancer_arn=alb.arn,
            port=80,
            protocol="HTTP",
            default_actions=[
                aws.lb.ListenerDefaultActionArgs(
                    type="redirect",
                    redirect=aws.lb.ListenerDefaultActionRedirectArgs(
                        protocol="HTTPS", port="443", status_code="HTTP_301"
                    ),
                )
            ],
            tags=self.tags(f"{name}-http"),
            opts=self.child_opts(),
        )

        cluster = aws.ecs.Cluster(
            f"{name}-cluster",
            settings=[aws.ecs.ClusterSettingArgs(name="containerInsights", value="enabled")],
            tags=self.tags(f"{name}-cluster"),
            opts=self.child_opts(),
        )

        # --- task definition, service, autoscaling (once an image exists) -------------------
        self.service_name = None
        self.task_definition_arn = None
        if args.image_uri is None:
            pulumi.log.warn(
                "no API image configured yet (cognis:imageTag or cognis:image): the ECS service is not "
                "created. Run scripts/build_and_push_image.sh, then pulumi up again.",
                resource=self,
            )
        else:
            task_definition = aws.ecs.TaskDefinition(
                f"{name}-task",
                family=args.family,
                cpu=str(s.cpu),
                memory=str(s.memory),
                network_mode="awsvpc",
                requires_compatibilities=["FARGATE"],
                runtime_platform=aws.ecs.TaskDefinitionRuntimePlatformArgs(
                    operating_system_family="LINUX", cpu_architecture=s.cpu_architecture
                ),
                execution_role_arn=args.identity.execution_role_arn,
                task_role_arn=args.identity.task_role_arn,
                volumes=[aws.ecs.TaskDefinitionVolumeArgs(name="tmp")],
                container_definitions=pulumi.Output.json_dumps([self._container(args, log_group.name, api_keys.arn)]),
                tags=self.tags(f"{name}-task"),
                opts=self.child_opts(),
            )
            service = aws.ecs.Service(
                f"{name}-service",
                cluster=cluster.arn,
                task_definition=task_definition.arn,
                launch_type="FARGATE",
                desired_count=s.desired_count,
                deployment_minimum_healthy_percent=100,
                deployment_maximum_percent=200,
                deployment_circuit_breaker=aws.ecs.ServiceDeploymentCircuitBreakerArgs(enable=True, rollback=True),
                health_check_grace_period_seconds=s.health_check_grace_s,
                network_configuration=aws.ecs.ServiceNetworkConfigurationArgs(
                    subnets=list(args.private_subnet_ids),
                    security_groups=[args.service_security_group_id],
                    assign_public_ip=False,
                ),
                load_balancers=[
                    aws.ecs.ServiceLoadBalancerArgs(
                        target_group_arn=target_group.arn, container_name=CONTAINER_NAME, container_port=s.port
                    )
                ],
                availability_zone_rebalancing="ENABLED",
                enable_ecs_managed_tags=True,
                propagate_tags="SERVICE",
                enable_execute_command=False,
                wait_for_steady_state=True,
                tags=self.tags(f"{name}-service"),
                # Autoscaling owns the running count after creation.
                opts=self.child_opts(depends_on=[https, execution_policy], ignore_changes=["desired_count"]),
            )
            scaling = aws.appautoscaling.Target(
                f"{name}-scaling",
                service_namespace="ecs",
                scalable_dimension="ecs:service:DesiredCount",
                resource_id=pulumi.Output.concat("service/", cluster.name, "/", service.name),
                min_capacity=s.min_count,
                max_capacity=s.max_count,
                tags=self.tags(f"{name}-scaling"),
                opts=self.child_opts(),
            )
            tracking = aws.appautoscaling.PolicyTargetTrackingScalingPolicyConfigurationArgs
            predefined = (
                aws.appautoscaling.PolicyTargetTrackingScalingPolicyConfigurationPredefinedMetricSpecificationArgs
            )
            aws.appautoscaling.Policy(
                f"{name}-cpu",
                policy_type="TargetTrackingScaling",
                service_namespace=scaling.service_namespace,
                scalable_dimension=scaling.scalable_dimension,
                resource_id=scaling.resource_id,
                target_tracking_scaling_policy_configuration=tracking(
                    target_value=float(s.cpu_target_percent),
                    predefined_metric_specification=predefined(
                        predefined_metric_type="ECSServiceAverageCPUUtilization"
                    ),
                    scale_in_cooldown=300,
                    scale_out_cooldown=60,
                ),
                opts=self.child_opts(),
            )
            aws.appautoscaling.Policy(
                f"{name}-requests",
                policy_type="TargetTrackingScaling",
                service_namespace=scaling.service_namespace,
                scalable_dimension=scaling.scalable_dimension,
                resource_id=scaling.resource_id,
                target_tracking_scaling_policy_configuration=tracking(
                    target_value=float(s.requests_per_target),
                    predefined_metric_specification=predefined(
                        predefined_metric_type="ALBRequestCountPerTarget",
                        resource_label=pulumi.Output.concat(alb.arn_suffix, "/", target_group.arn_suffix),
                    ),
                    scale_in_cooldown=300,
                    scale_out_cooldown=60,
                ),
                opts=self.child_opts(),
            )
            self.service_name = service.name
            self.task_definition_arn = task_definition.arn

        self.alb_dns_name = alb.dns_name
        self.alb_arn_suffix = alb.arn_suffix
        self.target_group_arn_suffix = target_group.arn_suffix
        self.api_url = (
            pulumi.Output.from_input(f"https://{s.api_domain_name}")
            if s.api_domain_name
            else pulumi.Output.concat("https://", alb.dns_name)
        )
        self.cluster_name = cluster.name
        self.log_group_name = log_group.name
        self.api_keys_secret_arn = api_keys.arn
        self.register_outputs(
            {
                "apiUrl": self.api_url,
                "albDnsName": self.alb_dns_name,
                "clusterName": self.cluster_name,
                "serviceName": self.service_name,
                "logGroupName": self.log_group_name,
                "apiKeysSecretArn": self.api_keys_secret_arn,
            }
        )

    @staticmethod
    def _container(
        args: ServiceArgs, log_group_name: pulumi.Input[str], api_keys_secret_arn: pulumi.Input[str]
    ) -> dict[str, Any]:
        s = args.settings
        url = f"http://127.0.0.1:{s.port}{LIVENESS_PATH}"
        probe = f"urllib.request.urlopen('{url}', timeout=4).status == 200"
        liveness = f"import sys, urllib.request; sys.exit(0 if {probe} else 1)"
        return {
            "name": CONTAINER_NAME,
            "image": args.image_uri,
            "essential": True,
            "portMappings": [{"containerPort": s.port, "protocol": "tcp", "name": "http", "appProtocol": "http"}],
            "environment": container_environment(args),
            "secrets": [
                {"name": "COGNIS_API_KEYS", "valueFrom": api_keys_secret_arn},
                {"name": "COGNIS_REDIS_PASSWORD", "valueFrom": args.redis_secret_arn},
            ],
            "logConfiguration": {
                "logDriver": "awslogs",
                "options": {
                    "awslogs-group": log_group_name,
                    "awslogs-region": args.context.region,
                    "awslogs-stream-prefix": CONTAINER_NAME,
                    "mode": "non-blocking",
                    "max-buffer-size": "25m",
                },
            },
            "healthCheck": {
                "command": ["CMD", "python", "-c", liveness],
                "interval": 30,
                "timeout": 5,
                "retries": 3,
                "startPeriod": 120,
            },
            "readonlyRootFilesystem": True,
            "mountPoints": [{"sourceVolume": "tmp", "containerPath": "/tmp", "readOnly": False}],
            "linuxParameters": {"initProcessEnabled": True},
            "ulimits": [{"name": "nofile", "softLimit": 65536, "hardLimit": 65536}],
            "stopTimeout": 30,
        }
