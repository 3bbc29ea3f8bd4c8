"""Service: ECR, ECS Fargate task and service, ALB, IAM scoping, autoscaling, wiring."""

from __future__ import annotations

import pytest
from cognis_infra.context import AwsContext
from cognis_infra.service import ServiceSettings, bedrock_resource_arns

from tests.infra.infra_harness import ACCOUNT, API_KEY, CERT_ARN, REGION, is_secret, parse_json, reveal

TASK_DEF = "aws:ecs/taskDefinition:TaskDefinition"
SERVICE = "aws:ecs/service:Service"
LISTENER = "aws:lb/listener:Listener"


def _by_name(program, type_, name):
    return next(r for r in program.of_type(type_) if r.name == name)


@pytest.fixture(scope="module")
def container(program):
    (c,) = parse_json(program.one(TASK_DEF)["containerDefinitions"])
    return c


@pytest.fixture(scope="module")
def env(container):
    return {e["name"]: e["value"] for e in container["environment"]}


def test_ecr_repository_is_immutable_scanned_and_kms_encrypted(program):
    repo = program.one("aws:ecr/repository:Repository")
    assert repo["imageTagMutability"] == "IMMUTABLE"
    assert repo["imageScanningConfiguration"] == {"scanOnPush": True}
    assert repo["encryptionConfigurations"] == [{"encryptionType": "KMS"}]
    assert repo["forceDelete"] is False
    lifecycle = parse_json(program.one("aws:ecr/lifecyclePolicy:LifecyclePolicy")["policy"])
    assert [r["action"]["type"] for r in lifecycle["rules"]] == ["expire", "expire"]


def test_task_definition_is_fargate_1_vcpu_2_gb(program):
    td = program.one(TASK_DEF)
    assert (td["cpu"], td["memory"]) == ("1024", "2048")
    assert td["family"] == "cognis-test-api"
    assert td["networkMode"] == "awsvpc" and td["requiresCompatibilities"] == ["FARGATE"]
    assert td["runtimePlatform"] == {"operatingSystemFamily": "LINUX", "cpuArchitecture": "X86_64"}
    roles = {r.name: r.outputs["arn"] for r in program.of_type("aws:iam/role:Role")}
    assert td["taskRoleArn"] == roles["identity-task"]
    assert td["executionRoleArn"] == roles["identity-execution"]


def test_container_runs_the_pushed_image_on_8080(program, container):
    repo = program.one("aws:ecr/repository:Repository")
    assert container["image"] == f"{repo.outputs['repositoryUrl']}:20250101-abc1234"
    assert container["portMappings"][0]["containerPort"] == 8080
    assert container["readonlyRootFilesystem"] is True
    assert container["mountPoints"] == [{"sourceVolume": "tmp", "containerPath": "/tmp", "readOnly": False}]
    assert "/health" in container["healthCheck"]["command"][-1]  # liveness; the ALB checks /ready
    logs = container["logConfiguration"]
    assert logs["logDriver"] == "awslogs"
    assert logs["options"]["awslogs-group"] == "/cognis-memory/test/api"
    assert logs["options"]["awslogs-region"] == REGION


def test_environment_points_at_the_other_components(program, env):
    """Every COGNIS_* value is read from the other resources' recorded outputs."""
    cluster = program.one("aws:rds/cluster:Cluster").outputs
    domain = program.one("aws:opensearch/domain:Domain").outputs
    redis = program.one("aws:elasticache/replicationGroup:ReplicationGroup").outputs
    endpoint = program.one("aws:sagemaker/endpoint:Endpoint").outputs
    assert env == {
        "COGNIS_STORE": "dual",
        "COGNIS_POSTGRES_HOST": cluster["endpoint"],
        "COGNIS_POSTGRES_PORT": "5432",
        "COGNIS_POSTGRES_DB": "cognis",
        "COGNIS_POSTGRES_SECRET_ARN": cluster["masterUserSecrets"][0]["secretArn"],
        "COGNIS_POSTGRES_SSLMODE": "require",
        "COGNIS_OPENSEARCH_URL": f"https://{domain['endpoint']}:443",
        "COGNIS_OPENSEARCH_AUTH": "sigv4",
        "COGNIS_REDIS_URL": f"rediss://{redis['primaryEndpointAddress']}:6379/0",
        "COGNIS_RERANKER": "sagemaker",
        "COGNIS_SAGEMAKER_ENDPOINT": endpoint["name"],
        "COGNIS_LLM": "bedrock",
        "COGNIS_BEDROCK_MODEL_ID": "anthropic.claude-3-5-haiku-20241022-v1:0",
        "COGNIS_AWS_REGION": REGION,
        "COGNIS_METRICS_NAMESPACE": "CognisMemory",
        "COGNIS_SERVICE_NAME": "cognis-memory",
        "COGNIS_HOST": "0.0.0.0",
        "COGNIS_PORT": "8080",
        "COGNIS_DATA_DIR": "/tmp/cognis",
        "HF_HUB_OFFLINE": "1",
    }


def test_secrets_are_injected_from_secrets_manager(program, container):
    secrets = {s["name"]: s["valueFrom"] for s in container["secrets"]}
    api_keys = _by_name(program, "aws:secretsmanager/secret:Secret", "api-api-keys")
    redis = _by_name(program, "aws:secretsmanager/secret:Secret", "cache-auth")
    assert secrets == {"COGNIS_API_KEYS": api_keys.outputs["arn"], "COGNIS_REDIS_PASSWORD": redis.outputs["arn"]}
    version = _by_name(program, "aws:secretsmanager/secretVersion:SecretVersion", "api-api-keys")
    assert is_secret(version["secretString"])
    assert reveal(version["secretString"]) == f"{API_KEY}=default"
    assert version["secretId"] == api_keys.id
    # The key never appears in plain text in the task definition.
    assert API_KEY not in program.one(TASK_DEF)["containerDefinitions"]


def test_service_deploys_with_circuit_breaker_in_private_subnets(program):
    svc = program.one(SERVICE)
    assert svc["launchType"] == "FARGATE"
    assert svc["desiredCount"] == 2
    assert svc["deploymentCircuitBreaker"] == {"enable": True, "rollback": True}
    assert svc["deploymentMinimumHealthyPercent"] == 100
    net = svc["networkConfiguration"]
    assert sorted(net["subnets"]) == [f"subnet-network-private-{i}" for i in range(3)]
    assert net["securityGroups"] == ["sg-network-service-sg"] and net["assignPublicIp"] is False
    tg = program.one("aws:lb/targetGroup:TargetGroup")
    assert svc["loadBalancers"] == [{"targetGroupArn": tg.id, "containerName": "api", "containerPort": 8080}]
    assert svc["taskDefinition"] == program.one(TASK_DEF).outputs["arn"]
    assert svc["cluster"] == program.one("aws:ecs/cluster:Cluster").outputs["arn"]
    assert svc["enableExecuteCommand"] is False


def test_alb_is_public_and_only_takes_tls(program):
    alb = program.one("aws:lb/loadBalancer:LoadBalancer")
    assert alb["internal"] is False and alb["loadBalancerType"] == "application"
    assert sorted(alb["subnets"]) == [f"subnet-network-public-{i}" for i in range(3)]
    assert alb["securityGroups"] == ["sg-network-alb-sg"]
    assert alb["dropInvalidHeaderFields"] is True
    listeners = {int(r["port"]): r for r in program.of_type(LISTENER)}
    https, http = listeners[443], listeners[80]
    assert https["protocol"] == "HTTPS" and https["certificateArn"] == CERT_ARN
    assert https["sslPolicy"] == "ELBSecurityPolicy-TLS13-1-2-Res-2021-06"
    assert https["defaultActions"] == [
        {"type": "forward", "targetGroupArn": program.one("aws:lb/targetGroup:TargetGroup").id}
    ]
    assert http["protocol"] == "HTTP"
    assert http["defaultActions"] == [
        {"type": "redirect", "redirect": {"protocol": "HTTPS", "port": "443", "statusCode": "HTTP_301"}}
    ]


def test_target_group_checks_readiness(program):
    tg = program.one("aws:lb/targetGroup:TargetGroup")
    assert tg["port"] == 8080 and tg["protocol"] == "HTTP" and tg["targetType"] == "ip"
    assert tg["vpcId"] == "vpc-network-vpc"
    hc = tg["healthCheck"]
    assert hc["path"] == "/ready" and hc["matcher"] == "200"


def test_autoscaling_on_cpu_and_request_count(program):
    svc, cluster = program.one(SERVICE), program.one("aws:ecs/cluster:Cluster")
    target = next(t for t in program.of_type("aws:appautoscaling/target:Target") if t["serviceNamespace"] == "ecs")
    assert target["resourceId"] == f"service/{cluster.outputs['name']}/{svc.outputs['name']}"
    assert (target["minCapacity"], target["maxCapacity"]) == (2, 10)
    policies = {
        p["targetTrackingScalingPolicyConfiguration"]["predefinedMetricSpecification"]["predefinedMetricType"]: p
        for p in program.of_type("aws:appautoscaling/policy:Policy")
        if p["serviceNamespace"] == "ecs"
    }
    assert set(policies) == {"ECSServiceAverageCPUUtilization", "ALBRequestCountPerTarget"}
    assert policies["ECSServiceAverageCPUUtilization"]["targetTrackingScalingPolicyConfiguration"]["targetValue"] == 60
    requests = policies["ALBRequestCountPerTarget"]["targetTrackingScalingPolicyConfiguration"]
    alb, tg = program.one("aws:lb/loadBalancer:LoadBalancer"), program.one("aws:lb/targetGroup:TargetGroup")
    assert (
        requests["predefinedMetricSpecification"]["resourceLabel"]
        == f"{alb.outputs['arnSuffix']}/{tg.outputs['arnSuffix']}"
    )
    assert all(p["resourceId"] == target["resourceId"] for p in policies.values())


def _policy(program, name):
    doc = parse_json(_by_name(program, "aws:iam/rolePolicy:RolePolicy", name)["policy"])
    return {s["Sid"]: s for s in doc["Statement"]}


def test_task_role_is_scoped_to_named_resources(program):
    stmts = _policy(program, "api-task")
    roles = {r.name: r for r in program.of_type("aws:iam/role:Role")}
    assert _by_name(program, "aws:iam/rolePolicy:RolePolicy", "api-task")["role"] == roles["identity-task"].id
    assert stmts["InvokeBedrockModels"]["Action"] == ["bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"]
    assert stmts["InvokeBedrockModels"]["Resource"] == [
        f"arn:aws:bedrock:{REGION}::foundation-model/anthropic.claude-3-5-haiku-20241022-v1:0"
    ]
    endpoint = program.one("aws:sagemaker/endpoint:Endpoint")
    assert stmts["InvokeReranker"] == {
        "Sid": "InvokeReranker",
        "Effect": "Allow",
        "Action": ["sagemaker:InvokeEndpoint"],
        "Resource": [endpoint.outputs["arn"]],
    }
    db = program.one("aws:rds/cluster:Cluster").outputs
    assert stmts["ReadDatabaseSecret"]["Resource"] == [db["masterUserSecrets"][0]["secretArn"]]
    domain = program.one("aws:opensearch/domain:Domain").outputs
    assert stmts["OpenSearchHttp"]["Resource"] == [domain["arn"], f"{domain['arn']}/*"]
    assert all(a.startswith("es:ESHttp") for a in stmts["OpenSearchHttp"]["Action"])
    for stmt in stmts.values():
        assert stmt["Resource"] != "*" and "*" not in stmt["Resource"]


def test_execution_role_pulls_the_image_writes_logs_reads_two_secrets(program):
    stmts = _policy(program, "api-execution")
    repo = program.one("aws:ecr/repository:Repository").outputs
    assert stmts["EcrAuth"] == {
        "Sid": "EcrAuth",
        "Effect": "Allow",
        "Action": ["ecr:GetAuthorizationToken"],
        "Resource": "*",
    }
    assert stmts["PullApiImage"]["Resource"] == [repo["arn"]]
    assert stmts["WriteLogs"]["Resource"] == [f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/cognis-memory/test/api:*"]
    secrets = {s.name: s.outputs["arn"] for s in program.of_type("aws:secretsmanager/secret:Secret")}
    assert sorted(stmts["ReadTaskSecrets"]["Resource"]) == sorted([secrets["api-api-keys"], secrets["cache-auth"]])


def test_roles_trust_only_ecs_tasks_of_this_account(program):
    for name in ("identity-task", "identity-execution"):
        role = next(r for r in program.of_type("aws:iam/role:Role") if r.name == name)
        (stmt,) = parse_json(role["assumeRolePolicy"])["Statement"]
        assert stmt["Principal"] == {"Service": "ecs-tasks.amazonaws.com"}
        assert stmt["Action"] == "sts:AssumeRole"
        assert stmt["Condition"] == {"StringEquals": {"aws:SourceAccount": ACCOUNT}}
        assert "managedPolicyArns" not in role.inputs


def test_exports(program):
    alb = program.one("aws:lb/loadBalancer:LoadBalancer").outputs
    assert program.exports["apiUrl"] == f"https://{alb['dnsName']}"
    assert program.exports["logGroupName"] == "/cognis-memory/test/api"
    assert program.exports["rerankerEndpointName"] == program.one("aws:sagemaker/endpoint:Endpoint").outputs["name"]
    assert program.exports["dashboardUrl"].endswith("#dashboards/dashboard/cognis-test")
    assert set(program.exports) >= {
        "apiUrl",
        "dashboardUrl",
        "logGroupName",
        "ecrRepositoryUrl",
        "ecsServiceName",
        "opensearchDomainName",
        "auroraClusterIdentifier",
        "auroraSecretArn",
        "redisPrimaryEndpoint",
        "rerankerEndpointName",
        "apiKeysSecretArn",
    }


CTX = AwsContext("us-east-1", ACCOUNT, "aws", "amazonaws.com", ("a", "b", "c"))


def test_bedrock_arns_for_foundation_models_and_inference_profiles():
    assert bedrock_resource_arns("amazon.titan-embed-text-v2:0", CTX) == [
        "arn:aws:bedrock:us-east-1::foundation-model/amazon.titan-embed-text-v2:0"
    ]
    assert bedrock_resource_arns("us.anthropic.claude-3-5-haiku-20241022-v1:0", CTX) == [
        f"arn:aws:bedrock:us-east-1:{ACCOUNT}:inference-profile/us.anthropic.claude-3-5-haiku-20241022-v1:0",
        "arn:aws:bedrock:*::foundation-model/anthropic.claude-3-5-haiku-20241022-v1:0",
    ]


def test_extra_bedrock_models_are_granted():
    from tests.infra.infra_harness import run_program

    run = run_program(
        {
            "bedrockModelId": "us.anthropic.claude-3-5-haiku-20241022-v1:0",
            "bedrockExtraModelIds": ["amazon.titan-embed-text-v2:0"],
        }
    )
    stmts = _policy(run, "api-task")
    resources = stmts["InvokeBedrockModels"]["Resource"]
    assert (
        f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/us.anthropic.claude-3-5-haiku-20241022-v1:0" in resources
    )
    assert f"arn:aws:bedrock:{REGION}::foundation-model/amazon.titan-embed-text-v2:0" in resources
    (container,) = parse_json(run.one(TASK_DEF)["containerDefinitions"])
    env = {e["name"]: e["value"] for e in container["environment"]}
    assert env["COGNIS_BEDROCK_MODEL_ID"] == "us.anthropic.claude-3-5-haiku-20241022-v1:0"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"certificate_arn": "not-an-arn"}, "certificateArn"),
        ({"cpu": 1024, "memory": 1024}, "Fargate size"),
        ({"min_count": 3, "desired_count": 2}, "minCount"),
        ({"ssl_policy": "ELBSecurityPolicy-2016-08"}, "TLS below 1.2"),
        ({"cpu_architecture": "MIPS"}, "cpuArchitecture"),
        ({"first_tenant": "a=b"}, "firstTenant"),
    ],
)
def test_service_settings_validation(kwargs, message):
    base = {"certificate_arn": CERT_ARN}
    with pytest.raises(ValueError, match=message):
        ServiceSettings(**{**base, **kwargs})
