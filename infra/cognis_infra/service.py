"""Service: the API on ECS Fargate behind an Application Load Balancer.

* ``ServiceIdentity`` creates the task role and the task execution role first, so the
  OpenSearch domain's access policy can name the task role before the service exists.
* ``Service`` grants those roles exactly what they use, and runs the containers:

  - task role: ``bedrock:InvokeModel*`` on the configured model ids (foundation models and,
    for cross-region inference profiles, the profile, and the models behind it only through
    it), ``sagemaker:InvokeEndpoint`` on the
    stack's reranker endpoints (the name pattern, so a replaced endpoint stays callable while
    tasks roll over), ``bedrock:GetFoundationModel`` on the models (the start-up lifecycle
    check), ``rds-db:connect`` as the database's application role, and the OpenSearch HTTP
    verbs on the domain; *not* the Aurora master secret;
  - execution role: pull the API image, write its log group, read the two secrets ECS
    injects (``COGNIS_API_KEYS``, ``COGNIS_REDIS_PASSWORD``).

* Migrations: a one-off task (``cognis-memory migrate`` in the API image) with its own task role,
  the only one that may read the master secret, and its own execution role, runs to completion in
  every ``pulumi up`` that changes its task definition (:class:`~.ecs_run.EcsTaskRun`), after the
  Aurora instances are available and before the ECS service is created or updated. The API tasks
  run with ``COGNIS_POSTGRES_MIGRATE=false`` and only check that the schema is current.
* TLS: PostgreSQL with ``verify-full`` against the RDS CA bundle the image carries
  (:data:`RDS_CA_BUNDLE`); Redis (``rediss://``) and OpenSearch (``https://``) verify the
  certificate and host name against the image's system CAs.
* Edge: HTTPS with the ACM certificate (HTTP redirects), or, for a development stack with
  ``cognis:httpOnly``, plain HTTP only.

* Telemetry: the API runs with ``COGNIS_TELEMETRY=emf`` (set, not detected). With
  ``cognis:traces`` a non-essential ADOT collector sidecar takes the API's OTLP spans on the
  task's localhost and sends them to X-Ray (task role: ``xray:PutTraceSegments`` and
  ``xray:PutTelemetryRecords``).

* Health: the ALB target group and the container's ECS health check both use *liveness*
  (``GET /health``). ECS replaces tasks that fail either, so checking readiness (``GET
  /ready``: the stores answer) there would replace the whole fleet, again and again, during
  any store outage longer than the check window. Readiness is measured instead by a
  non-essential probe container in each task that asks ``/ready`` every 30 s and writes the
  answer as a CloudWatch EMF metric (``Ready``: 1 or 0, dimension ``service``): it feeds an
  alarm and the dashboard, never a restart.
* Deployments use the circuit breaker with rollback; the service redeploys when the secrets
  it injects get a new version (rotation), and scales on CPU and on requests per target.
* Environment variables point at the other components' outputs (``COGNIS_*``); further
  variables (e.g. a telemetry mode) go through ``ServiceArgs.extra_environment``, and further
  containers (e.g. a collector sidecar) through :func:`task_containers`.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from .base import CognisComponent
from .containers import CONTAINER_NAME, LIVENESS_PATH, MIGRATION_CONTAINER_NAME, migration_container, task_containers
from .ecs_deployment import EcsDeploymentCheck
from .ecs_run import EcsTaskRun
from .iam import assume_role_policy, document, statement
from .naming import physical_name
from .search import DATA_PLANE_ACTIONS
from .service_args import (
    ServiceArgs,
    bedrock_invoke_statements,
    bedrock_model_arns,
    bedrock_resource_arns,
    check_certificate_location,
    check_model_region,
    resolved_model_id,
)

#: Tag of the forwarding HTTP listener of an HTTP-only (development) stack; the tls-only policy reads it.
HTTP_ONLY_TAG = "CognisHttpOnly"
#: What pulling an image from ECR takes (besides ecr:GetAuthorizationToken).
ECR_PULL_ACTIONS: tuple[str, ...] = (
    "ecr:BatchGetImage",
    "ecr:GetDownloadUrlForLayer",
    "ecr:BatchCheckLayerAvailability",
)


def container_insights_log_group(cluster_name: str) -> str:
    """The log group Container Insights writes an ECS cluster's performance events to."""
    return f"/aws/ecs/containerinsights/{cluster_name}/performance"


class Service(CognisComponent):
    """ECS cluster, task definition, Fargate service, ALB, IAM policies and autoscaling."""

    api_url: pulumi.Output[str]
    alb_dns_name: pulumi.Output[str]
    alb_zone_id: pulumi.Output[str]
    alb_arn_suffix: pulumi.Output[str]
    target_group_arn_suffix: pulumi.Output[str]
    cluster_name: pulumi.Output[str]
    service_name: pulumi.Output[str]
    log_group_name: pulumi.Output[str]
    api_keys_secret_arn: pulumi.Output[str]

    def _migration(
        self, name: str, args: ServiceArgs, cluster: aws.ecs.Cluster, log_group: aws.cloudwatch.LogGroup
    ) -> EcsTaskRun:
        """The migration task definition, its two roles (the only ones that read the master secret), and its run
        in this update (again whenever the task definition changes: a new image brings new migrations)."""
        ctx = args.context
        trust = assume_role_policy(ctx.service_principal("ecs-tasks"), source_account=ctx.account_id)
        task_role = aws.iam.Role(
            f"{name}-migration-task",
            name_prefix=physical_name(args.prefix, "migration", max_len=37) + "-",
            description="cognis-memory schema migration task role (reads the Aurora master secret)",
            assume_role_policy=trust,
            tags=self.tags(f"{name}-migration-task"),
            opts=self.child_opts(),
        )
        task_policy = aws.iam.RolePolicy(
            f"{name}-migration-task",
            role=task_role.id,
            policy=document(
                statement(
                    "ReadDatabaseOwnerSecret",
                    ["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
                    [args.postgres_secret_arn],
                )
            ),
            opts=self.child_opts(),
        )
        execution_role = aws.iam.Role(
            f"{name}-migration-execution",
            name_prefix=physical_name(args.prefix, "migration-exec", max_len=37) + "-",
            description="cognis-memory schema migration task execution role (image pull, logs)",
            assume_role_policy=trust,
            tags=self.tags(f"{name}-migration-execution"),
            opts=self.child_opts(),
        )
        execution_statements = [
            statement("EcrAuth", ["ecr:GetAuthorizationToken"], "*"),  # no resource-level permissions
            statement(
                "WriteLogs", ["logs:CreateLogStream", "logs:PutLogEvents"], [pulumi.Output.concat(log_group.arn, ":*")]
            ),
        ]
        if args.image_repository_arn is not None:
            execution_statements.insert(
                1, statement("PullApiImage", list(ECR_PULL_ACTIONS), [args.image_repository_arn])
            )
        execution_policy = aws.iam.RolePolicy(
            f"{name}-migration-execution",
            role=execution_role.id,
            policy=document(*execution_statements),
            opts=self.child_opts(),
        )
        s = args.settings
        task_definition = aws.ecs.TaskDefinition(
            f"{name}-migration",
            family=physical_name(args.prefix, "migration", max_len=255),
            cpu=str(s.cpu),
            memory=str(s.memory),
            network_mode="awsvpc",
            requires_compatibilities=["FARGATE"],
            runtime_platform=aws.ecs.TaskDefinitionRuntimePlatformArgs(
                operating_system_family="LINUX", cpu_architecture=s.cpu_architecture
            ),
            execution_role_arn=execution_role.arn,
            task_role_arn=task_role.arn,
            volumes=[aws.ecs.TaskDefinitionVolumeArgs(name="tmp")],
            container_definitions=pulumi.Output.json_dumps([migration_container(args, log_group.name)]),
            tags=self.tags(f"{name}-migration"),
            opts=self.child_opts(),
        )
        self.migration_task_role = task_role
        self.migration_task_definition = task_definition
        return EcsTaskRun(
            f"{name}-migrate",
            cluster=cluster.arn,
            task_definition=task_definition.arn,
            container_name=MIGRATION_CONTAINER_NAME,
            subnets=list(args.private_subnet_ids),
            security_groups=[args.service_security_group_id],
            region=ctx.region,
            log_stream_prefix=MIGRATION_CONTAINER_NAME,
            opts=self.child_opts(depends_on=[task_policy, execution_policy, *args.database_instances]),
        )

    def __init__(self, name: str, args: ServiceArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("cognis:service:Service", name, args.tags, opts)
        s = args.settings
        ctx = args.context

        # --- first API key: "key=tenant", injected as COGNIS_API_KEYS ----------------------
        api_keys = aws.secretsmanager.Secret(
            f"{name}-api-keys",
            name_prefix=f"{args.prefix}/api-keys-",
            description="cognis-memory bootstrap API keys (COGNIS_API_KEYS: key=tenant)",
            recovery_window_in_days=7,
            tags=self.tags(f"{name}-api-keys"),
            opts=self.child_opts(),
        )
        api_keys_version = aws.secretsmanager.SecretVersion(
            f"{name}-api-keys",
            secret_id=api_keys.id,
            secret_string=pulumi.Output.secret(pulumi.Output.concat(args.api_key, "=", s.first_tenant)),
            opts=self.child_opts(),
        )

        log_group = self.log_group(
            f"{name}-logs",
            retention_days=s.log_retention_days,
            kms_key_arn=args.log_kms_key_arn,
            physical_name=args.log_group_name,
        )

        # --- IAM: grant the roles exactly what they use -------------------------------------
        p = ctx.partition
        model_id = resolved_model_id(s, ctx.region)
        check_model_region(model_id, ctx.region)
        check_certificate_location(s, ctx)
        models = (model_id, *s.bedrock_extra_model_ids)
        self.model_id = model_id
        self.bedrock_invoke_arns = sorted({arn for m in models for arn in bedrock_resource_arns(m, ctx)})
        task_statements = [
            *bedrock_invoke_statements(models, ctx),
            # The start-up lifecycle check (GetFoundationModel: Active, Legacy, end of life) of each model.
            statement(
                "ReadModelLifecycle",
                ["bedrock:GetFoundationModel"],
                sorted({arn for m in models for arn in bedrock_model_arns(m, ctx)}),
            ),
            statement(
                "ConnectAsAppRole",
                ["rds-db:connect"],
                [
                    pulumi.Output.concat(
                        f"arn:{p}:rds-db:{ctx.region}:{ctx.account_id}:dbuser:",
                        args.postgres_cluster_resource_id,
                        f"/{args.postgres_app_user}",
                    )
                ],
            ),
            statement(
                "OpenSearchHttp",
                list(DATA_PLANE_ACTIONS),
                [args.opensearch_domain_arn, pulumi.Output.concat(args.opensearch_domain_arn, "/*")],
            ),
        ]
        if args.reranker_endpoint_arn_pattern is not None:
            task_statements.append(
                statement("InvokeReranker", ["sagemaker:InvokeEndpoint"], [args.reranker_endpoint_arn_pattern])
            )
        if s.traces:  # the collector sidecar runs with the task role; X-Ray has no resource-level permissions
            task_statements.append(statement("WriteTraces", ["xray:PutTraceSegments", "xray:PutTelemetryRecords"], "*"))
        task_policy = aws.iam.RolePolicy(
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
                statement("PullApiImage", list(ECR_PULL_ACTIONS), [args.image_repository_arn]),
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
                # Liveness: ECS replaces load-balancer-unhealthy tasks (readiness is the probe's).
                path=LIVENESS_PATH,
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
        forward = [aws.lb.ListenerDefaultActionArgs(type="forward", target_group_arn=target_group.arn)]
        if s.http_only:
            # Development only (cognis:httpOnly): port 80 forwards, there is no HTTPS listener. The tag is what
            # the tls-only policy accepts a forwarding HTTP listener for.
            listener = aws.lb.Listener(
                f"{name}-http",
                load_balancer_arn=alb.arn,
                port=80,
                protocol="HTTP",
                default_actions=forward,
                tags={**self.tags(f"{name}-http"), HTTP_ONLY_TAG: "true"},
                opts=self.child_opts(),
            )
        else:
            listener = aws.lb.Listener(
                f"{name}-https",
                load_balancer_arn=alb.arn,
                port=443,
                protocol="HTTPS",
                ssl_policy=s.ssl_policy,
                certificate_arn=s.certificate_arn,
                default_actions=forward,
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

        # --- cluster (its Container Insights log group first: retention and the stack's key) ----
        cluster_name = physical_name(args.prefix, "api", max_len=255)
        insights_logs = self.log_group(
            f"{name}-insights-logs",
            retention_days=s.log_retention_days,
            kms_key_arn=args.log_kms_key_arn,
            physical_name=container_insights_log_group(cluster_name),
        )
        cluster = aws.ecs.Cluster(
            f"{name}-cluster",
            name=cluster_name,
            settings=[aws.ecs.ClusterSettingArgs(name="containerInsights", value="enabled")],
            tags=self.tags(cluster_name),
            opts=self.child_opts(depends_on=[insights_logs]),
        )

        # --- task definition, service, autoscaling --------------------------------------------
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
            container_definitions=pulumi.Output.json_dumps(task_containers(args, log_group.name, api_keys.arn)),
            tags=self.tags(f"{name}-task"),
            opts=self.child_opts(),
        )
        # --- the schema migration: a one-off task with its own roles, run before the service -----
        migration = self._migration(name, args, cluster, log_group)

        redeploy_triggers = {
            "apiKeysSecretVersion": api_keys_version.version_id,
            "cacheAuthSecretVersion": args.redis_secret_version,
        }
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
            # ECS reads secrets when a task starts: a new secret version (a rotated API key or
            # cache token) rolls the tasks over in the same `pulumi up`.
            force_new_deployment=True,
            triggers=redeploy_triggers,
            tags=self.tags(f"{name}-service"),
            # Autoscaling owns the running count after creation. Tasks start only when the roles' policies
            # exist (image pull, secrets, database, Bedrock), the Aurora instances accept connections and the
            # schema is migrated: otherwise a fast first deploy fails its tasks and the circuit breaker rolls back.
            opts=self.child_opts(
                depends_on=[listener, execution_policy, task_policy, migration, *args.database_instances],
                ignore_changes=["desired_count"],
            ),
        )
        # The steady-state wait also ends when the circuit breaker's rollback is steady: this check fails
        # the update unless the service runs the task definition just deployed (ecs_deployment.py).
        EcsDeploymentCheck(
            f"{name}-deployment",
            cluster=cluster.arn,
            service=service.name,
            task_definition=task_definition.arn,
            deployment_triggers=redeploy_triggers,
            region=ctx.region,
            opts=self.child_opts(depends_on=[service]),
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
        self.target_tracking_policy(
            f"{name}-cpu",
            scaling,
            target_value=s.cpu_target_percent,
            metric_type="ECSServiceAverageCPUUtilization",
        )
        self.target_tracking_policy(
            f"{name}-requests",
            scaling,
            target_value=s.requests_per_target,
            metric_type="ALBRequestCountPerTarget",
            resource_label=pulumi.Output.concat(alb.arn_suffix, "/", target_group.arn_suffix),
        )

        self.service_name = service.name
        self.task_definition_arn = task_definition.arn
        self.alb_dns_name = alb.dns_name
        self.alb_zone_id = alb.zone_id
        self.alb_arn_suffix = alb.arn_suffix
        self.target_group_arn_suffix = target_group.arn_suffix
        scheme = "http://" if s.http_only else "https://"
        self.api_url = (
            pulumi.Output.from_input(f"{scheme}{s.api_domain_name}")
            if s.api_domain_name
            else pulumi.Output.concat(scheme, alb.dns_name)
        )
        self.migration_task_role_arn = self.migration_task_role.arn
        self.cluster_name = cluster.name
        self.log_group_name = log_group.name
        self.log_group_arn = log_group.arn
        self.api_keys_secret_arn = api_keys.arn
        self.register_outputs(
            {
                "apiUrl": self.api_url,
                "albDnsName": self.alb_dns_name,
                "albZoneId": self.alb_zone_id,
                "clusterName": self.cluster_name,
                "serviceName": self.service_name,
                "logGroupName": self.log_group_name,
                "apiKeysSecretArn": self.api_keys_secret_arn,
            }
        )
