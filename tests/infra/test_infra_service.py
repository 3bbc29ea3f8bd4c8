"""Service: ECS Fargate task (API + readiness probe) and service, ALB, IAM scoping, autoscaling, wiring."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cognis_infra.containers import READINESS_PROBE
from cognis_infra.context import AwsContext
from cognis_infra.service_args import ServiceSettings, bedrock_resource_arns
from cognis_infra.telemetry import READINESS_METRIC, names
from tests.infra.infra_harness import ACCOUNT, API_KEY, CERT_ARN, REGION, is_secret, parse_json, reveal

TASK_DEF = "aws:ecs/taskDefinition:TaskDefinition"
SERVICE = "aws:ecs/service:Service"
LISTENER = "aws:lb/listener:Listener"


def _by_name(program, type_, name):
    return next(r for r in program.of_type(type_) if r.name == name)


@pytest.fixture(scope="module")
def containers(program):
    return {c["name"]: c for c in parse_json(program.one(TASK_DEF, "api-task")["containerDefinitions"])}


@pytest.fixture(scope="module")
def container(containers):
    return containers["api"]


@pytest.fixture(scope="module")
def env(container):
    return {e["name"]: e["value"] for e in container["environment"]}


def test_ecr_repository_is_immutable_scanned_and_kms_encrypted(program):
    repo = program.one("aws:ecr/repository:Repository")
    assert repo["name"] == "cognis-test-api" and repo.options["protect"] is True
    assert repo["imageTagMutability"] == "IMMUTABLE"
    assert repo["imageScanningConfiguration"] == {"scanOnPush": True}
    assert repo["encryptionConfigurations"] == [{"encryptionType": "KMS"}]
    assert repo["forceDelete"] is False
    lifecycle = parse_json(program.one("aws:ecr/lifecyclePolicy:LifecyclePolicy")["policy"])
    assert [r["action"]["type"] for r in lifecycle["rules"]] == ["expire"]


def test_the_lifecycle_policy_never_expires_a_tagged_image(program):
    """Every image a task definition runs (current, rolled back to, an older cognis:imageTag) is tagged; a
    "keep the last N" rule over tagged images expired the one a rolled-back service still ran once N newer
    builds were pushed. Only untagged images expire (fact 69)."""
    lifecycle = parse_json(program.one("aws:ecr/lifecyclePolicy:LifecyclePolicy")["policy"])
    for rule in lifecycle["rules"]:
        assert rule["selection"]["tagStatus"] == "untagged", rule


def test_task_definition_is_fargate_1_vcpu_2_gb(program):
    td = program.one(TASK_DEF, "api-task")
    assert (td["cpu"], td["memory"]) == ("1024", "2048")
    assert td["family"] == "cognis-test-api"
    assert td["networkMode"] == "awsvpc" and td["requiresCompatibilities"] == ["FARGATE"]
    assert td["runtimePlatform"] == {"operatingSystemFamily": "LINUX", "cpuArchitecture": "X86_64"}
    roles = {r.name: r.outputs["arn"] for r in program.of_type("aws:iam/role:Role")}
    assert td["taskRoleArn"] == roles["identity-task"]
    assert td["executionRoleArn"] == roles["identity-execution"]


def test_container_runs_on_8080_with_a_liveness_check(container):
    assert container["portMappings"][0]["containerPort"] == 8080
    assert container["readonlyRootFilesystem"] is True
    assert container["mountPoints"] == [{"sourceVolume": "tmp", "containerPath": "/tmp", "readOnly": False}]
    assert "/health" in container["healthCheck"]["command"][-1]  # liveness, like the ALB
    logs = container["logConfiguration"]
    assert logs["logDriver"] == "awslogs"
    assert logs["options"]["awslogs-group"] == "/cognis-memory/test/api"
    assert logs["options"]["awslogs-region"] == REGION


def test_environment_points_at_the_other_components(program, env):
    """Every COGNIS_* value is read from the other resources' recorded outputs."""
    cluster = program.one("aws:rds/cluster:Cluster").outputs
    domain = program.one("aws:opensearch/domain:Domain").outputs
    redis = program.one("aws:elasticache/replicationGroup:ReplicationGroup").outputs
    endpoint = program.named("reranker-endpoint").outputs
    assert env == {
        "COGNIS_STORE": "dual",
        "COGNIS_POSTGRES_HOST": cluster["endpoint"],
        "COGNIS_POSTGRES_PORT": "5432",
        "COGNIS_POSTGRES_DB": "cognis",
        "COGNIS_POSTGRES_APP_USER": "cognis_app",
        "COGNIS_POSTGRES_IAM_AUTH": "true",
        "COGNIS_POSTGRES_MIGRATE": "false",
        "COGNIS_POSTGRES_SSLMODE": "verify-full",
        "COGNIS_POSTGRES_SSLROOTCERT": "/etc/cognis/certs/rds-global-bundle.pem",
        "COGNIS_OPENSEARCH_URL": f"https://{domain['endpoint']}:443",
        "COGNIS_OPENSEARCH_AUTH": "sigv4",
        "COGNIS_REDIS_URL": f"rediss://{redis['primaryEndpointAddress']}:6379/0",
        "COGNIS_RERANKER": "sagemaker",
        "COGNIS_SAGEMAKER_ENDPOINT": endpoint["name"],
        "COGNIS_LLM": "bedrock",
        "COGNIS_BEDROCK_MODEL_ID": "eu.amazon.nova-2-lite-v1:0",  # eu-west-1: the EU profile
        "COGNIS_AWS_REGION": REGION,
        "COGNIS_METRICS_NAMESPACE": "CognisMemory",
        "COGNIS_SERVICE_NAME": "cognis-test",
        "COGNIS_TELEMETRY": "emf",
        "COGNIS_EMBEDDING_MODEL": "all-MiniLM-L6-v2",
        "COGNIS_EMBEDDING_WORKERS": "1",
        "COGNIS_OPENSEARCH_SHARDS": "1",
        "COGNIS_HOST": "0.0.0.0",
        "COGNIS_PORT": "8080",
        "COGNIS_DATA_DIR": "/tmp/cognis",
        "HF_HUB_OFFLINE": "1",
    }


def test_the_api_runs_a_model_thread_per_vcpu_of_its_task():
    from tests.infra.infra_harness import run_program

    for cpu, memory, threads in (("1024", "2048", "1"), ("2048", "4096", "2"), ("512", "1024", "1")):
        run = run_program({"cpu": cpu, "memory": memory})
        containers = json.loads(run.one(TASK_DEF, "api-task")["containerDefinitions"])
        (api,) = [c for c in containers if c["name"] == "api"]
        assert {"name": "COGNIS_EMBEDDING_WORKERS", "value": threads} in api["environment"], cpu


def test_the_stack_sets_the_opensearch_shards_of_the_indices_the_api_creates():
    from tests.infra.infra_harness import run_program

    run = run_program({"opensearchShards": "6"})
    containers = json.loads(run.one(TASK_DEF, "api-task")["containerDefinitions"])
    (api,) = [c for c in containers if c["name"] == "api"]
    assert {"name": "COGNIS_OPENSEARCH_SHARDS", "value": "6"} in api["environment"]
    with pytest.raises(ValueError, match="cognis:opensearchShards"):
        run_program({"opensearchShards": "0"})


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
    assert API_KEY not in program.one(TASK_DEF, "api-task")["containerDefinitions"]


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
    assert svc["taskDefinition"] == program.one(TASK_DEF, "api-task").outputs["arn"]
    assert svc["cluster"] == program.one("aws:ecs/cluster:Cluster").outputs["arn"]
    assert svc["enableExecuteCommand"] is False


def test_service_waits_for_the_role_policies_and_the_listener(program):
    """Tasks must not start before their roles can pull, read secrets and reach the stores."""
    deps = program.one(SERVICE).options["dependencies"]
    for name in ("api-task", "api-execution", "api-https"):
        assert any(d.endswith(f"::{name}") for d in deps), (name, deps)


def test_cluster_is_named_for_the_stack_with_its_insights_log_group(program):
    cluster = program.one("aws:ecs/cluster:Cluster")
    assert cluster["name"] == "cognis-test-api"
    assert cluster["settings"] == [{"name": "containerInsights", "value": "enabled"}]
    group = next(g for g in program.of_type("aws:cloudwatch/logGroup:LogGroup") if g.name == "api-insights-logs")
    assert group["name"] == "/aws/ecs/containerinsights/cognis-test-api/performance"
    assert group["retentionInDays"] == 30
    assert group["kmsKeyId"] == program.one("aws:kms/key:Key").outputs["arn"]
    assert any(d.endswith("::api-insights-logs") for d in cluster.options["dependencies"])


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


def test_target_group_checks_liveness(program):
    """ECS replaces tasks the load balancer reports unhealthy: checking /ready (503 while a store is
    down) would replace every task during any store outage, so the ALB checks /health."""
    tg = program.one("aws:lb/targetGroup:TargetGroup")
    assert tg["port"] == 8080 and tg["protocol"] == "HTTP" and tg["targetType"] == "ip"
    assert tg["vpcId"] == "vpc-network-vpc"
    hc = tg["healthCheck"]
    assert hc["path"] == "/health" and hc["matcher"] == "200"


def test_readiness_probe_is_a_non_essential_sidecar(containers, container):
    probe = containers["readiness-probe"]
    assert probe["essential"] is False and container["essential"] is True
    assert probe["image"] == container["image"]
    assert probe["entryPoint"] == ["python", "-c", READINESS_PROBE]
    assert probe["command"] == ["http://127.0.0.1:8080/ready", names.DEFAULT_NAMESPACE, "cognis-test", "30"]
    assert probe["dependsOn"] == [{"containerName": "api", "condition": "HEALTHY"}]
    assert "healthCheck" not in probe  # nothing about it can restart the task
    assert probe["logConfiguration"]["options"]["awslogs-group"] == "/cognis-memory/test/api"


class _Ready(BaseHTTPRequestHandler):
    answers: list[int] = []

    def do_GET(self):
        status = self.answers.pop(0)
        self.send_response(status)
        self.end_headers()
        self.wfile.write(json.dumps({"ready": status == 200}).encode())

    def log_message(self, *args):
        pass


def test_readiness_probe_writes_one_emf_point_per_probe(containers):
    """Run the probe's own code (the task's entry point and arguments) against a local /ready that
    answers 200 then 503: two EMF lines, Ready 1 then 0, in the alarm's namespace and dimension."""
    _Ready.answers = [200, 503]
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ready)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        probe = containers["readiness-probe"]
        url = f"http://127.0.0.1:{server.server_address[1]}/ready"
        args = [url, *probe["command"][1:3], "0.01", "2"]
        out = subprocess.run([sys.executable, "-c", probe["entryPoint"][2], *args], capture_output=True, text=True,
                             timeout=30, check=True).stdout  # fmt: skip
    finally:
        server.shutdown()
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line[READINESS_METRIC] for line in lines] == [1, 0]
    for line in lines:
        (directive,) = line["_aws"]["CloudWatchMetrics"]
        assert directive["Namespace"] == names.DEFAULT_NAMESPACE
        assert directive["Dimensions"] == [[names.DIM_SERVICE]]
        assert directive["Metrics"] == [{"Name": READINESS_METRIC, "Unit": "Count"}]
        assert line[names.DIM_SERVICE] == "cognis-test"


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
    # The default model in an EU Region: Nova 2 Lite through the EU inference profile (fact 64); the foundation
    # model in the Regions the profile routes to, only through that profile (bedrock:InferenceProfileArn).
    profile = f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/eu.amazon.nova-2-lite-v1:0"
    assert stmts["InvokeBedrockModels"]["Resource"] == [profile]
    assert "Condition" not in stmts["InvokeBedrockModels"]
    assert stmts["InvokeModelsThroughProfile0"] == {
        "Sid": "InvokeModelsThroughProfile0",
        "Effect": "Allow",
        "Action": ["bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"],
        "Resource": ["arn:aws:bedrock:*::foundation-model/amazon.nova-2-lite-v1:0"],
        "Condition": {"StringEquals": {"bedrock:InferenceProfileArn": profile}},
    }
    # No statement lets the role call a foundation model directly, in any Region, without the condition.
    for st in stmts.values():
        if any(":foundation-model/" in r for r in st["Resource"]) and "bedrock:InvokeModel" in st["Action"]:
            assert st.get("Condition", {}).get("StringEquals", {}).get("bedrock:InferenceProfileArn") == profile
    assert stmts["ReadModelLifecycle"] == {
        "Sid": "ReadModelLifecycle",
        "Effect": "Allow",
        "Action": ["bedrock:GetFoundationModel"],
        "Resource": [f"arn:aws:bedrock:{REGION}::foundation-model/amazon.nova-2-lite-v1:0"],
    }
    assert stmts["InvokeReranker"] == {
        "Sid": "InvokeReranker",
        "Effect": "Allow",
        "Action": ["sagemaker:InvokeEndpoint"],
        "Resource": [f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/cognis-test-reranker-*"],
    }
    # The API tasks cannot read the Aurora master secret: only the migration task's role can.
    db = program.one("aws:rds/cluster:Cluster").outputs
    assert not any(a.startswith("secretsmanager:") for st in stmts.values() for a in st["Action"])
    assert db["masterUserSecrets"][0]["secretArn"] not in json.dumps(stmts)
    domain = program.one("aws:opensearch/domain:Domain").outputs
    assert stmts["OpenSearchHttp"]["Resource"] == [domain["arn"], f"{domain['arn']}/*"]
    assert all(a.startswith("es:ESHttp") for a in stmts["OpenSearchHttp"]["Action"])
    for stmt in stmts.values():
        assert stmt["Resource"] != "*" and "*" not in stmt["Resource"]


def test_roles_carry_the_stack_name(program):
    roles = {r.name: r for r in program.of_type("aws:iam/role:Role")}
    assert roles["identity-task"]["namePrefix"] == "cognis-test-task-"
    assert roles["identity-execution"]["namePrefix"] == "cognis-test-execution-"
    assert roles["reranker-role"]["namePrefix"] == "cognis-test-reranker-"


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
    assert program.exports["albZoneId"] == alb["zoneId"]  # for a Route 53 alias record
    assert program.exports["logGroupName"] == "/cognis-memory/test/api"
    assert program.exports["rerankerEndpointName"] == program.named("reranker-endpoint").outputs["name"]
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
        "cachePrimaryEndpoint",
        "albZoneId",
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
            "bedrockModelId": "eu.anthropic.claude-haiku-4-5-20251001-v1:0",
            "bedrockExtraModelIds": ["amazon.titan-embed-text-v2:0"],
        }
    )
    stmts = _policy(run, "api-task")
    profile = f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/eu.anthropic.claude-haiku-4-5-20251001-v1:0"
    # the profile and the plain foundation model directly; the model behind the profile only through it
    assert stmts["InvokeBedrockModels"]["Resource"] == [
        profile,
        f"arn:aws:bedrock:{REGION}::foundation-model/amazon.titan-embed-text-v2:0",
    ]
    assert stmts["InvokeModelsThroughProfile0"]["Resource"] == [
        "arn:aws:bedrock:*::foundation-model/anthropic.claude-haiku-4-5-20251001-v1:0"
    ]
    assert stmts["InvokeModelsThroughProfile0"]["Condition"] == {
        "StringEquals": {"bedrock:InferenceProfileArn": profile}
    }
    assert stmts["ReadModelLifecycle"]["Resource"] == [
        f"arn:aws:bedrock:{REGION}::foundation-model/amazon.titan-embed-text-v2:0",
        f"arn:aws:bedrock:{REGION}::foundation-model/anthropic.claude-haiku-4-5-20251001-v1:0",
    ]
    (container, _) = parse_json(run.one(TASK_DEF, "api-task")["containerDefinitions"])
    env = {e["name"]: e["value"] for e in container["environment"]}
    assert env["COGNIS_BEDROCK_MODEL_ID"] == "eu.anthropic.claude-haiku-4-5-20251001-v1:0"


def test_the_default_model_is_the_runtimes_and_active():
    """One default for the runtime and the stack (providers/bedrock_models.py, linked into the infra package):
    Amazon Nova 2 Lite through the US profile in US Regions, the EU one in EU Regions and the global one
    elsewhere; the schema says ""."""
    import yaml

    from cognis_infra import bedrock_models as infra_models
    from cognis_memory.config import Settings
    from cognis_memory.providers import bedrock_models
    from tests.infra.infra_harness import REPO

    assert infra_models.default_model_id is bedrock_models.default_model_id or (
        infra_models.DEFAULT_FOUNDATION_MODEL == bedrock_models.DEFAULT_FOUNDATION_MODEL
    )
    assert (REPO / "infra/cognis_infra/bedrock_models.py").resolve() == (
        REPO / "runtime/cognis_memory/providers/bedrock_models.py"
    ).resolve()
    assert bedrock_models.DEFAULT_FOUNDATION_MODEL == "amazon.nova-2-lite-v1:0"
    assert bedrock_models.default_model_id("us-east-1") == "us.amazon.nova-2-lite-v1:0"
    assert bedrock_models.default_model_id("eu-west-1") == "eu.amazon.nova-2-lite-v1:0"
    assert bedrock_models.default_model_id("ap-northeast-1") == "global.amazon.nova-2-lite-v1:0"  # no jp./apac.
    assert bedrock_models.default_model_id("us-gov-west-1") == "global.amazon.nova-2-lite-v1:0"
    assert Settings(aws_region="us-west-2").llm.bedrock_model_id == "us.amazon.nova-2-lite-v1:0"
    assert Settings(aws_region="eu-central-1").llm.bedrock_model_id == "eu.amazon.nova-2-lite-v1:0"
    assert Settings(aws_region="sa-east-1").llm.bedrock_model_id == "global.amazon.nova-2-lite-v1:0"
    schema = yaml.safe_load((REPO / "Pulumi.yaml").read_text())["config"]
    assert schema["cognis:bedrockModelId"]["default"] == ""  # = the runtime's default for the stack's Region
    assert "claude-3-5-haiku" not in (REPO / "Pulumi.yaml").read_text()


@pytest.mark.parametrize(
    "model_id, region, ok",
    [
        ("us.amazon.nova-2-lite-v1:0", "us-east-1", True),
        ("us.amazon.nova-2-lite-v1:0", "eu-west-1", False),
        ("us.amazon.nova-2-lite-v1:0", "us-gov-west-1", False),
        ("eu.anthropic.claude-haiku-4-5-20251001-v1:0", "eu-central-1", True),
        ("apac.amazon.nova-lite-v1:0", "ap-southeast-1", True),
        ("global.amazon.nova-2-lite-v1:0", "sa-east-1", True),
        ("amazon.titan-embed-text-v2:0", "eu-west-1", True),
    ],
)
def test_a_geographic_profile_must_match_the_region(model_id, region, ok):
    from cognis_infra.service_args import check_model_region

    if ok:
        check_model_region(model_id, region)
    else:
        with pytest.raises(ValueError, match="cognis:bedrockModelId"):
            check_model_region(model_id, region)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"certificate_arn": "not-an-arn"}, "certificateArn"),
        ({"cpu": 1024, "memory": 1024}, "Fargate size"),
        ({"min_count": 3, "desired_count": 2}, "minCount"),
        ({"ssl_policy": "ELBSecurityPolicy-2016-08"}, "TLS below 1.2"),
        ({"cpu_architecture": "MIPS"}, "cpuArchitecture"),
        ({"first_tenant": "a=b"}, "firstTenant"),
        ({"first_tenant": "a:b"}, "firstTenant"),
        ({"first_tenant": "tén ant"}, "firstTenant"),
    ],
)
def test_service_settings_validation(kwargs, message):
    base = {"certificate_arn": CERT_ARN}
    with pytest.raises(ValueError, match=message):
        ServiceSettings(**{**base, **kwargs})


def test_the_first_tenant_rule_is_the_services_id_rule():
    from cognis_infra.service_args import TENANT_ID
    from cognis_memory.validation import ID_PATTERN

    assert TENANT_ID.pattern == ID_PATTERN.pattern


# --- the deployment check: a rollback by the circuit breaker fails the update (ECS protocol level) -------------

CLUSTER = "arn:aws:ecs:eu-west-1:123456789012:cluster/cognis-test-api"
NEW_TD = "arn:aws:ecs:eu-west-1:123456789012:task-definition/cognis-test-api:8"
OLD_TD = "arn:aws:ecs:eu-west-1:123456789012:task-definition/cognis-test-api:7"
CHECK = {"cluster": CLUSTER, "service": "cognis-test-api", "taskDefinition": NEW_TD, "region": "eu-west-1",
         "deploymentTriggers": {"apiKeysSecretVersion": "v1", "cacheAuthSecretVersion": "v1"}}  # fmt: skip


def _ecs_check(deployments, service_deployments):
    import boto3
    from botocore.stub import Stubber

    client = boto3.client("ecs", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="y")
    stub = Stubber(client)
    for primary_list, latest in zip(deployments, service_deployments, strict=True):
        stub.add_response("describe_services", {"services": [{"serviceName": "cognis-test-api",
                          "serviceArn": f"{CLUSTER}/cognis-test-api".replace(":cluster/", ":service/"),
                          "deployments": primary_list}], "failures": []},
                          {"cluster": CLUSTER, "services": ["cognis-test-api"]})  # fmt: skip
        stub.add_response("list_service_deployments", {"serviceDeployments": latest},
                          {"cluster": CLUSTER, "service": "cognis-test-api"})  # fmt: skip
    return client, stub


def _deployment(td, status="PRIMARY", rollout="COMPLETED", reason="ECS deployment completed."):
    return {"id": f"ecs-svc/{td[-1]}", "status": status, "taskDefinition": td, "rolloutState": rollout,
            "rolloutStateReason": reason}  # fmt: skip


def _service_deployment(status, reason="", at="2026-12-07T08:00:00Z"):
    return {"serviceDeploymentArn": f"arn:aws:ecs:eu-west-1:123456789012:service-deployment/x/{status}",
            "status": status, "statusReason": reason, "createdAt": at}  # fmt: skip


def test_a_deployment_rolled_back_by_the_circuit_breaker_fails_the_update():
    """After the rollback the service is steady (the provider's wait succeeded) on the old task definition;
    the check fails, naming what ECS says."""
    from cognis_infra.ecs_deployment import EcsDeploymentFailed, check_deployment

    rolled_back = "Service deployment rolled back because the circuit breaker threshold was exceeded."
    client, stub = _ecs_check(
        [[_deployment(OLD_TD)]],
        [[_service_deployment("SUCCESSFUL", at="2026-12-06T08:00:00Z"), _service_deployment("ROLLBACK_SUCCESSFUL",
                                                                                             rolled_back)]],
    )  # fmt: skip
    with stub, pytest.raises(EcsDeploymentFailed, match="circuit breaker") as failed:
        check_deployment(CHECK, client=client, poll_s=0)
    assert OLD_TD in str(failed.value) and "ROLLBACK_SUCCESSFUL" in str(failed.value)


def test_a_rolled_back_redeploy_of_the_same_task_definition_fails_too():
    """A secret rotation redeploys the same task definition: only the service deployment says it was undone."""
    from cognis_infra.ecs_deployment import EcsDeploymentFailed, check_deployment

    client, stub = _ecs_check([[_deployment(NEW_TD)]], [[_service_deployment("ROLLBACK_SUCCESSFUL", "tasks failed")]])
    with stub, pytest.raises(EcsDeploymentFailed, match="ROLLBACK_SUCCESSFUL: tasks failed"):
        check_deployment(CHECK, client=client, poll_s=0)


def test_a_first_deployment_that_failed_without_a_rollback_target_fails():
    from cognis_infra.ecs_deployment import EcsDeploymentFailed, check_deployment

    client, stub = _ecs_check([[_deployment(NEW_TD, rollout="FAILED", reason="tasks failed to start")]], [[]])
    with stub, pytest.raises(EcsDeploymentFailed, match="FAILED: tasks failed to start"):
        check_deployment(CHECK, client=client, poll_s=0)


def test_a_completed_deployment_passes_after_waiting_for_it_to_settle():
    from cognis_infra.ecs_deployment import check_deployment

    client, stub = _ecs_check(
        [[_deployment(NEW_TD, rollout="IN_PROGRESS"), _deployment(OLD_TD, status="ACTIVE")], [_deployment(NEW_TD)]],
        [[_service_deployment("IN_PROGRESS")], [_service_deployment("SUCCESSFUL")]],
    )
    with stub:
        assert check_deployment(CHECK, client=client, poll_s=0) == {"deploymentId": "ecs-svc/8",
                                                                    "rolloutState": "COMPLETED"}  # fmt: skip
        stub.assert_no_pending_responses()


def test_the_check_follows_the_service_and_its_redeploy_triggers(program):
    check = program.named("api-deployment")
    service = program.one("aws:ecs/service:Service")
    assert check.type == "pulumi-python:dynamic:Resource"
    assert check["taskDefinition"] == service["taskDefinition"]
    assert check["service"] == service.outputs["name"] and check["cluster"] == service["cluster"]
    assert check["deploymentTriggers"] == service["triggers"]
    assert any(d.endswith("::api-service") for d in check.options["dependencies"])
    from cognis_infra.ecs_deployment import CHECK_INPUTS, EcsDeploymentCheckProvider

    assert set(CHECK_INPUTS) <= set(CHECK)
    again = EcsDeploymentCheckProvider().diff("id", dict(CHECK), {**CHECK, "deploymentTriggers": {"x": "v2"}})
    assert again.changes is True and not again.replaces
