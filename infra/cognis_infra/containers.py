"""The containers of the API's task definitions: the API itself, its readiness probe and the
optional ADOT collector sidecar, and the one-off migration task's container; their environment,
logging and health checks."""

from __future__ import annotations

import json
from typing import Any

import pulumi

from .service_args import ServiceArgs, resolved_model_id
from .telemetry import READINESS_METRIC, names

CONTAINER_NAME = "api"
PROBE_CONTAINER_NAME = "readiness-probe"
COLLECTOR_CONTAINER_NAME = "otel-collector"
#: Where the collector sidecar takes OTLP/HTTP; containers of one awsvpc task share localhost.
COLLECTOR_OTLP_HTTP = "127.0.0.1:4318"
#: The one-off migration task's container (runs ``cognis-memory migrate`` in the API image).
MIGRATION_CONTAINER_NAME = "migrate"
#: Where the API image carries the Amazon RDS CA bundle (Dockerfile; docker/certs/rds-global-bundle.pem).
RDS_CA_BUNDLE = "/etc/cognis/certs/rds-global-bundle.pem"
LIVENESS_PATH = "/health"
READINESS_PATH = "/ready"

#: The readiness probe (standard library only; runs in the API image): ``url namespace service
#: interval [count]``. One EMF line per probe: ``Ready`` is 1 when ``url`` answers 200, else 0.
READINESS_PROBE = f"""
import json, sys, time, urllib.request
url, namespace, service, interval = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
count = int(sys.argv[5]) if len(sys.argv) > 5 else -1
while count != 0:
    started = time.time()
    try:
        ready = 1 if urllib.request.urlopen(url, timeout=5).status == 200 else 0
    except Exception:
        ready = 0
    metric = {{"Namespace": namespace, "Dimensions": [["{names.DIM_SERVICE}"]],
              "Metrics": [{{"Name": "{READINESS_METRIC}", "Unit": "Count"}}]}}
    print(json.dumps({{"_aws": {{"Timestamp": int(started * 1000), "CloudWatchMetrics": [metric]}},
                      "{names.DIM_SERVICE}": service, "{READINESS_METRIC}": ready}}), flush=True)
    count -= 1
    if count:
        time.sleep(max(0.0, interval - (time.time() - started)))
"""


def container_environment(args: ServiceArgs) -> list[dict[str, Any]]:
    """The API's ``COGNIS_*`` environment, pointing at the other components."""
    s = args.settings
    env: dict[str, Any] = {
        "COGNIS_STORE": "dual",
        "COGNIS_POSTGRES_HOST": args.postgres_host,
        "COGNIS_POSTGRES_PORT": pulumi.Output.from_input(args.postgres_port).apply(lambda p: str(int(p))),
        "COGNIS_POSTGRES_DB": args.postgres_db,
        "COGNIS_POSTGRES_APP_USER": args.postgres_app_user,
        "COGNIS_POSTGRES_IAM_AUTH": "true",
        # The migration task migrates; the API only checks the schema and never sees the owner's secret.
        "COGNIS_POSTGRES_MIGRATE": "false",
        "COGNIS_POSTGRES_SSLMODE": "verify-full",
        "COGNIS_POSTGRES_SSLROOTCERT": RDS_CA_BUNDLE,
        "COGNIS_OPENSEARCH_URL": args.opensearch_url,
        "COGNIS_OPENSEARCH_AUTH": "sigv4",
        "COGNIS_REDIS_URL": args.redis_url,
        "COGNIS_RERANKER": "sagemaker" if args.reranker_endpoint_name is not None else "none",
        "COGNIS_LLM": "bedrock",
        "COGNIS_BEDROCK_MODEL_ID": resolved_model_id(s, args.context.region),
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
    env["COGNIS_TELEMETRY"] = s.telemetry_mode
    env["COGNIS_EMBEDDING_MODEL"] = s.embedding_model
    # One model thread per vCPU of the task (cognis:cpu in CPU units, 1024 per vCPU), said outright: what a
    # container sees of its host's CPUs need not be its task's share.
    env["COGNIS_EMBEDDING_WORKERS"] = str(max(1, s.cpu // 1024))
    env["COGNIS_OPENSEARCH_SHARDS"] = str(s.opensearch_shards)
    if s.traces:
        env["COGNIS_TRACES"] = "otlp"
        env["COGNIS_OTLP_ENDPOINT"] = f"http://{COLLECTOR_OTLP_HTTP}/v1/traces"
        env["COGNIS_TRACE_SAMPLE_RATIO"] = repr(float(s.trace_sample_ratio))
    env.update(args.extra_environment)
    return [{"name": k, "value": v} for k, v in sorted(env.items())]


def _log_configuration(args: ServiceArgs, log_group_name: pulumi.Input[str], stream_prefix: str) -> dict[str, Any]:
    return {
        "logDriver": "awslogs",
        "options": {
            "awslogs-group": log_group_name,
            "awslogs-region": args.context.region,
            "awslogs-stream-prefix": stream_prefix,
            "mode": "non-blocking",
            "max-buffer-size": "25m",
        },
    }


def api_container(
    args: ServiceArgs, log_group_name: pulumi.Input[str], api_keys_secret_arn: pulumi.Input[str]
) -> dict[str, Any]:
    """The API container: liveness health check, secrets from Secrets Manager, read-only root."""
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
        "logConfiguration": _log_configuration(args, log_group_name, CONTAINER_NAME),
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


def readiness_probe_container(args: ServiceArgs, log_group_name: pulumi.Input[str]) -> dict[str, Any]:
    """Non-essential sidecar: asks ``/ready`` and logs the answer as an EMF metric; never restarts anything."""
    s = args.settings
    return {
        "name": PROBE_CONTAINER_NAME,
        "image": args.image_uri,
        "essential": False,
        "entryPoint": ["python", "-c", READINESS_PROBE],
        "command": [
            f"http://127.0.0.1:{s.port}{READINESS_PATH}",
            args.metrics_namespace,
            args.service_name,
            str(s.readiness_probe_interval_s),
        ],
        "memoryReservation": 64,
        # Start probing once the API answers its liveness check.
        "dependsOn": [{"containerName": CONTAINER_NAME, "condition": "HEALTHY"}],
        "logConfiguration": _log_configuration(args, log_group_name, PROBE_CONTAINER_NAME),
        "readonlyRootFilesystem": True,
        "stopTimeout": 5,
    }


def migration_container(args: ServiceArgs, log_group_name: pulumi.Input[str]) -> dict[str, Any]:
    """``cognis-memory migrate`` in the API image: the schema owner's secret, nothing of the API's."""
    env = {
        "COGNIS_STORE": "dual",
        "COGNIS_POSTGRES_HOST": args.postgres_host,
        "COGNIS_POSTGRES_PORT": pulumi.Output.from_input(args.postgres_port).apply(lambda p: str(int(p))),
        "COGNIS_POSTGRES_DB": args.postgres_db,
        "COGNIS_POSTGRES_SECRET_ARN": args.postgres_secret_arn,
        "COGNIS_POSTGRES_APP_USER": args.postgres_app_user,
        "COGNIS_POSTGRES_SSLMODE": "verify-full",
        "COGNIS_POSTGRES_SSLROOTCERT": RDS_CA_BUNDLE,
        "COGNIS_EMBEDDING_MODEL": args.settings.embedding_model,
        "COGNIS_AWS_REGION": args.context.region,
        "COGNIS_TELEMETRY": "json",
        "COGNIS_DATA_DIR": "/tmp/cognis",
        "HF_HUB_OFFLINE": "1",
    }
    return {
        "name": MIGRATION_CONTAINER_NAME,
        "image": args.image_uri,
        "essential": True,
        "command": ["migrate"],
        "environment": [{"name": k, "value": v} for k, v in sorted(env.items())],
        "logConfiguration": _log_configuration(args, log_group_name, MIGRATION_CONTAINER_NAME),
        "readonlyRootFilesystem": True,
        "mountPoints": [{"sourceVolume": "tmp", "containerPath": "/tmp", "readOnly": False}],
    }


def collector_config(region: str) -> dict[str, Any]:
    """The collector's whole configuration: OTLP/HTTP from the task's own localhost in, X-Ray out.
    Traces only, so the task role needs X-Ray writes and nothing else."""
    return {
        "receivers": {"otlp": {"protocols": {"http": {"endpoint": COLLECTOR_OTLP_HTTP}}}},
        "processors": {"batch": {}},
        "exporters": {"awsxray": {"region": region}},
        "service": {
            "pipelines": {"traces": {"receivers": ["otlp"], "processors": ["batch"], "exporters": ["awsxray"]}}
        },
    }


def collector_container(args: ServiceArgs, log_group_name: pulumi.Input[str]) -> dict[str, Any]:
    """Non-essential ADOT collector sidecar; its configuration comes from an environment variable
    (the collector's ``env:`` config source), so no file or parameter has to be staged. JSON is YAML."""
    return {
        "name": COLLECTOR_CONTAINER_NAME,
        "image": args.settings.adot_collector_image,
        "essential": False,
        "command": ["--config=env:COGNIS_COLLECTOR_CONFIG"],
        "environment": [
            {"name": "COGNIS_COLLECTOR_CONFIG", "value": json.dumps(collector_config(args.context.region))}
        ],
        "logConfiguration": _log_configuration(args, log_group_name, COLLECTOR_CONTAINER_NAME),
        "stopTimeout": 10,
    }


def task_containers(
    args: ServiceArgs, log_group_name: pulumi.Input[str], api_keys_secret_arn: pulumi.Input[str]
) -> list[dict[str, Any]]:
    """Every container of the task: the API first, then its sidecars (the collector when traces are on)."""
    api = api_container(args, log_group_name, api_keys_secret_arn)
    containers = [api, readiness_probe_container(args, log_group_name)]
    if args.settings.traces:
        api["dependsOn"] = [{"containerName": COLLECTOR_CONTAINER_NAME, "condition": "START"}]
        containers.append(collector_container(args, log_group_name))
    return containers
