"""cognis-memory on AWS: read the stack config, wire the components, export outputs.

One ``pulumi up`` creates everything, the API image included (built and pushed here unless
``cognis:image``/``cognis:imageTag`` names one). See docs/deploy.md for the walkthrough and
Pulumi.example.yaml / Pulumi.dev.yaml for every setting. ``cognis_infra`` is an installed
package (infra/pyproject.toml; `pulumi install` puts it into infra/.venv).
"""

from pathlib import Path

import pulumi

from cognis_infra import config, context
from cognis_infra.cache import Cache, CacheArgs
from cognis_infra.database import INSTANCE_CLASS, Database, DatabaseArgs
from cognis_infra.encryption import Encryption, EncryptionArgs
from cognis_infra.endpoint_policies import EndpointResources, attach_endpoint_policies
from cognis_infra.naming import physical_name
from cognis_infra.network import Network, NetworkArgs
from cognis_infra.observability import Observability, ObservabilityArgs
from cognis_infra.registry import ImageBuild, Registry, RegistryArgs
from cognis_infra.reranker import Reranker, RerankerArgs
from cognis_infra.search import Search, SearchArgs
from cognis_infra.service import Service
from cognis_infra.service_args import EMBEDDING_MODELS, ServiceArgs
from cognis_infra.service_identity import ServiceIdentity, ServiceIdentityArgs
from cognis_infra.zone_offerings import needs_for

#: The checkout this program is in: the Docker build context (handed to the build as a relative path).
CHECKOUT = Path(__file__).resolve().parents[1]

cfg = config.load(build_context=CHECKOUT)
#: The instance types the zones must offer (zone_offerings.py): the cache's, OpenSearch's, Aurora's.
zone_needs = needs_for(
    cfg.cache.node_type,
    (cfg.search.instance_type, cfg.search.dedicated_master_type),
    INSTANCE_CLASS,
    cfg.database.engine_version,
)
ctx = context.lookup(cfg.network.az_count, cfg.availability_zone_ids, needs=zone_needs)
tags = cfg.tags
prefix = cfg.prefix

keys = Encryption("encryption", EncryptionArgs(context=ctx, alias=prefix, protect=cfg.protect, tags=tags))
network = Network(
    "network",
    NetworkArgs(
        settings=cfg.network,
        context=ctx,
        alb_ingress_cidrs=cfg.alb_ingress_cidrs,
        service_port=cfg.service.port,
        log_kms_key_arn=keys.key_arn,
        tags=tags,
    ),
)
sg = network.security_group_ids
identity = ServiceIdentity("identity", ServiceIdentityArgs(context=ctx, prefix=prefix, tags=tags))
registry = Registry(
    "registry",
    RegistryArgs(
        repository_name=physical_name(prefix, "api", max_len=256),
        build=(
            ImageBuild(
                context=cfg.build_context,
                cpu_architecture=cfg.service.cpu_architecture,
                base_image=cfg.base_image,
                # the default model is in every image; another named one is fetched into it at build
                fetch_models=tuple(m for m in [cfg.service.embedding_model] if m != EMBEDDING_MODELS[0]),
            )
            if cfg.builds_image
            else None
        ),
        protect=cfg.protect,
        tags=tags,
    ),
)

search = Search(
    "search",
    SearchArgs(
        settings=cfg.search,
        context=ctx,
        domain_name=cfg.opensearch_domain_name,
        subnet_ids=network.private_subnet_ids,
        security_group_id=sg["search"],
        access_role_arn=identity.task_role_arn,
        log_kms_key_arn=keys.key_arn,
        protect=cfg.protect,
        tags=tags,
    ),
)
database = Database(
    "database",
    DatabaseArgs(
        settings=cfg.database,
        subnet_ids=network.private_subnet_ids,
        security_group_id=sg["database"],
        cluster_identifier=physical_name(prefix, "aurora", max_len=63),
        final_snapshot_identifier=physical_name(prefix, "final", max_len=255),
        log_kms_key_arn=keys.key_arn,
        protect=cfg.protect,
        tags=tags,
    ),
)
cache = Cache(
    "cache",
    CacheArgs(
        settings=cfg.cache,
        subnet_ids=network.private_subnet_ids,
        security_group_id=sg["cache"],
        group_id=physical_name(prefix, "cache", max_len=40),
        auth_token=cfg.cache_auth_token,
        log_kms_key_arn=keys.key_arn,
        secret_name_prefix=f"{prefix}/cache-auth-",
        tags=tags,
    ),
)
reranker = (
    Reranker(
        "reranker",
        RerankerArgs(
            settings=cfg.reranker,
            context=ctx,
            prefix=prefix,
            subnet_ids=network.private_subnet_ids,
            security_group_id=sg["reranker"],
            log_kms_key_arn=keys.key_arn,
            tags=tags,
        ),
    )
    if cfg.reranker.enabled
    else None
)

if cfg.image:
    image_uri, image_repo_arn = cfg.image, None
elif cfg.image_tag:
    image_uri = pulumi.Output.concat(registry.repository_url, ":", cfg.image_tag)
    image_repo_arn = registry.repository_arn
else:
    image_uri, image_repo_arn = registry.image_ref, registry.repository_arn

service = Service(
    "api",
    ServiceArgs(
        settings=cfg.service,
        context=ctx,
        identity=identity,
        prefix=prefix,
        vpc_id=network.vpc_id,
        public_subnet_ids=network.public_subnet_ids,
        private_subnet_ids=network.private_subnet_ids,
        alb_security_group_id=sg["alb"],
        service_security_group_id=sg["service"],
        image_uri=image_uri,
        image_repository_arn=image_repo_arn,
        postgres_host=database.endpoint,
        postgres_port=database.port,
        postgres_db=database.database_name,
        postgres_secret_arn=database.secret_arn,
        postgres_app_user=database.app_user,
        postgres_cluster_resource_id=database.cluster_resource_id,
        database_instances=database.instances,
        opensearch_url=search.url,
        opensearch_domain_arn=search.domain_arn,
        redis_url=cache.url,
        redis_secret_arn=cache.auth_secret_arn,
        redis_secret_version=cache.auth_secret_version,
        reranker_endpoint_name=reranker.endpoint_name if reranker else None,
        reranker_endpoint_arn_pattern=reranker.endpoint_arn_pattern if reranker else None,
        api_key=cfg.api_key,
        metrics_namespace=cfg.metrics_namespace,
        service_name=cfg.service_name,
        log_group_name=f"/cognis-memory/{cfg.stack}/api",
        family=physical_name(prefix, "api", max_len=255),
        log_kms_key_arn=keys.key_arn,
        tags=tags,
    ),
)
# Each VPC endpoint admits only this stack's calls on this stack's resources (endpoint_policies.py).
attach_endpoint_policies(
    ctx,
    network.interface_endpoint_ids,
    network.s3_endpoint_id,
    EndpointResources(
        secret_arns=[service.api_keys_secret_arn, cache.auth_secret_arn, database.secret_arn],
        log_group_arns=[service.log_group_arn],
        # An image from elsewhere (cognis:image) may live in any repository: then ECR keeps its default policy.
        repository_arns=(
            [image_repo_arn, *([reranker.image_repository_arn] if reranker else [])] if image_repo_arn else []
        ),
        bedrock_arns=service.bedrock_invoke_arns,
        reranker_endpoint_arn_pattern=reranker.endpoint_arn_pattern if reranker else None,
        model_data=(cfg.reranker.model_bucket, cfg.reranker.model_prefix) if reranker else None,
    ),
    parent=network,
)

observability = Observability(
    "observability",
    ObservabilityArgs(
        settings=cfg.observability,
        context=ctx,
        prefix=prefix,
        metrics_namespace=cfg.metrics_namespace,
        service_name=cfg.service_name,
        alb_arn_suffix=service.alb_arn_suffix,
        target_group_arn_suffix=service.target_group_arn_suffix,
        opensearch_domain_name=search.domain_name,
        db_cluster_identifier=database.cluster_identifier,
        db_max_acu=database.max_acu,
        redis_replication_group_id=cache.replication_group_id,
        ecs_cluster_name=service.cluster_name,
        ecs_service_name=service.service_name,
        min_tasks=cfg.service.min_count,
        reranker_endpoint_name=reranker.endpoint_name if reranker else None,
        reranker_variant=Reranker.variant_name,
        kms_key_id=keys.key_id,
        tags=tags,
        opensearch_volume_gb=cfg.search.volume_size_gb,
        opensearch_dedicated_masters=cfg.search.dedicated_master_type is not None,
        opensearch_node_count=cfg.search.node_count,
        redis_member_clusters=cache.member_clusters,
        redis_node_count=cache.node_count,
    ),
)

pulumi.export("apiUrl", service.api_url)
pulumi.export("albDnsName", service.alb_dns_name)
pulumi.export("albZoneId", service.alb_zone_id)
pulumi.export("dashboardUrl", observability.dashboard_url)
pulumi.export("alarmTopicArn", observability.topic_arn)
pulumi.export("logGroupName", service.log_group_name)
pulumi.export("ecrRepositoryUrl", registry.repository_url)
pulumi.export("apiImage", image_uri)
pulumi.export("ecsClusterName", service.cluster_name)
pulumi.export("ecsServiceName", service.service_name)
pulumi.export("apiKeysSecretArn", service.api_keys_secret_arn)
pulumi.export("opensearchDomainName", search.domain_name)
pulumi.export("opensearchEndpoint", search.endpoint)
pulumi.export("auroraClusterIdentifier", database.cluster_identifier)
pulumi.export("auroraEndpoint", database.endpoint)
pulumi.export("auroraSecretArn", database.secret_arn)
pulumi.export("auroraAppUser", database.app_user)
pulumi.export("cacheAuthSecretArn", cache.auth_secret_arn)
pulumi.export("cachePrimaryEndpoint", cache.primary_endpoint)
pulumi.export("cacheReplicationGroupId", cache.replication_group_id)
pulumi.export("rerankerEndpointName", reranker.endpoint_name if reranker else None)
