"""Network: VPC over three AZs, NAT, VPC endpoints and least-access security groups.

Layout (defaults): a /16 VPC; one public /22 and one private /19 subnet per AZ; an
internet gateway for the public subnets; NAT gateways (one per AZ by default) for the
private ones. Everything except the load balancer lives in private subnets.

Security groups, and the only paths between them::

    internet --80/443--> alb --8080--> service --5432--> database
                                               --443---> search
                                               --6379--> cache
                                               --443---> endpoints (VPC interface endpoints)
                                               --443---> 0.0.0.0/0 (AWS APIs via NAT)
                                   reranker --443---> endpoints, 0.0.0.0/0 (S3 gateway, NAT)

An interface endpoint is placed only in the chosen AZs whose zone offers that service
(``aws.ec2.get_vpc_endpoint_service``): not every service is in every AZ, and creating an
endpoint in a subnet of an AZ the service lacks fails.

Rules are separate ``aws.vpc.SecurityGroup{Ingress,Egress}Rule`` resources (no inline
rules), so security groups can reference each other without cycles.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from .base import CognisComponent
from .context import AwsContext

#: Interface endpoints that keep the service's AWS API traffic off the NAT gateways.
DEFAULT_INTERFACE_ENDPOINTS: tuple[str, ...] = (
    "ecr.api",  # image manifest and auth
    "ecr.dkr",  # image layers are then served from S3 (gateway endpoint)
    "logs",  # awslogs driver and EMF metrics
    "secretsmanager",  # ECS secrets injection, Aurora master secret
    "bedrock-runtime",  # LLM calls
    "sagemaker.runtime",  # reranker calls
)

#: Security groups the network creates, by role.
SECURITY_GROUP_ROLES: tuple[str, ...] = ("alb", "service", "database", "search", "cache", "endpoints", "reranker")


@dataclass(frozen=True)
class NetworkSettings:
    """Sizing of the network (stack config)."""

    cidr: str = "10.40.0.0/16"
    az_count: int = 3
    nat_gateways: int = 3
    interface_endpoints: tuple[str, ...] = DEFAULT_INTERFACE_ENDPOINTS
    flow_log_retention_days: int = 30

    def __post_init__(self) -> None:
        net = ipaddress.ip_network(self.cidr)
        if net.prefixlen > 20:
            raise ValueError(f"cognis:vpcCidr {self.cidr} is too small; use a /16 to /20")
        if not 2 <= self.az_count <= 6:
            raise ValueError("cognis:azCount must be between 2 and 6")
        if self.nat_gateways not in (1, self.az_count):
            raise ValueError(f"cognis:natGateways must be 1 or {self.az_count} (one per AZ)")


@dataclass
class NetworkArgs:
    settings: NetworkSettings
    context: AwsContext
    #: CIDRs allowed to reach the load balancer on 80/443.
    alb_ingress_cidrs: Sequence[str]
    #: Port the API containers listen on.
    service_port: int
    #: KMS key for the flow-log group.
    log_kms_key_arn: pulumi.Input[str]
    tags: Mapping[str, str] = field(default_factory=dict)


def subnet_cidrs(cidr: str, az_count: int) -> tuple[list[str], list[str]]:
    """Split the VPC CIDR: private subnets take the first quarters, public ones are small.

    For a /16: private /19s at .0, .32, .64 (+ ...); public /22s starting at .96.
    """
    net = ipaddress.ip_network(cidr)
    private_prefix = net.prefixlen + 3
    public_prefix = net.prefixlen + 6
    private = [str(s) for s in list(net.subnets(new_prefix=private_prefix))[:az_count]]
    # Public subnets come after the last private one.
    start = ipaddress.ip_network(private[-1]).broadcast_address + 1
    public_all = [s for s in net.subnets(new_prefix=public_prefix) if s.network_address >= start]
    public = [str(s) for s in public_all[:az_count]]
    return private, public


class Network(CognisComponent):
    """VPC, subnets, routing, VPC endpoints and the security groups of every tier."""

    vpc_id: pulumi.Output[str]
    public_subnet_ids: list[pulumi.Output[str]]
    private_subnet_ids: list[pulumi.Output[str]]
    security_group_ids: dict[str, pulumi.Output[str]]

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("cognis:network:Network", name, args.tags, opts)
        s = args.settings
        ctx = args.context
        azs = ctx.availability_zones
        private_cidrs, public_cidrs = subnet_cidrs(s.cidr, s.az_count)

        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=s.cidr,
            enable_dns_hostnames=True,  # required for private DNS of interface endpoints
            enable_dns_support=True,
            tags=self.tags(f"{name}-vpc"),
            opts=self.child_opts(),
        )
        igw = aws.ec2.InternetGateway(
            f"{name}-igw", vpc_id=vpc.id, tags=self.tags(f"{name}-igw"), opts=self.child_opts()
        )

        # --- public subnets: ALB and NAT gateways only -------------------------------
        public_rt = aws.ec2.RouteTable(
            f"{name}-public-rt", vpc_id=vpc.id, tags=self.tags(f"{name}-public"), opts=self.child_opts()
        )
        aws.ec2.Route(
            f"{name}-public-default",
            route_table_id=public_rt.id,
            destination_cidr_block="0.0.0.0/0",
            gateway_id=igw.id,
            opts=self.child_opts(),
        )
        public_subnets = []
        for i, (az, cidr) in enumerate(zip(azs, public_cidrs, strict=True)):
            subnet = aws.ec2.Subnet(
                f"{name}-public-{i}",
                vpc_id=vpc.id,
                availability_zone=az,
                cidr_block=cidr,
                map_public_ip_on_launch=False,  # nothing here needs an automatic public IP
                tags={**self.tags(f"{name}-public-{az}"), "Tier": "public"},
                opts=self.child_opts(),
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-public-{i}", subnet_id=subnet.id, route_table_id=public_rt.id, opts=self.child_opts()
            )
            public_subnets.append(subnet)

        # --- NAT: one per AZ (HA) or a single shared one (cheaper) -------------------
        nat_ids = []
        for i in range(s.nat_gateways):
            eip = aws.ec2.Eip(
                f"{name}-nat-{i}", domain="vpc", tags=self.tags(f"{name}-nat-{azs[i]}"), opts=self.child_opts()
            )
            nat = aws.ec2.NatGateway(
                f"{name}-nat-{i}",
                allocation_id=eip.id,
                subnet_id=public_subnets[i].id,
                connectivity_type="public",
                tags=self.tags(f"{name}-nat-{azs[i]}"),
                opts=self.child_opts(depends_on=[igw]),
            )
            nat_ids.append(nat.id)

        # --- private subnets: tasks, data stores, endpoints ---------------------------
        private_subnets = []
        private_route_tables = []
        for i, (az, cidr) in enumerate(zip(azs, private_cidrs, strict=True)):
            subnet = aws.ec2.Subnet(
                f"{name}-private-{i}",
                vpc_id=vpc.id,
                availability_zone=az,
                cidr_block=cidr,
                map_public_ip_on_launch=False,
                tags={**self.tags(f"{name}-private-{az}"), "Tier": "private"},
                opts=self.child_opts(),
            )
            rt = aws.ec2.RouteTable(
                f"{name}-private-rt-{i}", vpc_id=vpc.id, tags=self.tags(f"{name}-private-{az}"), opts=self.child_opts()
            )
            aws.ec2.Route(
                f"{name}-private-default-{i}",
                route_table_id=rt.id,
                destination_cidr_block="0.0.0.0/0",
                nat_gateway_id=nat_ids[i % len(nat_ids)],
                opts=self.child_opts(),
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-private-{i}", subnet_id=subnet.id, route_table_id=rt.id, opts=self.child_opts()
            )
            private_subnets.append(subnet)
            private_route_tables.append(rt)

        # --- security groups ------------------------------------------------------------
        sgs: dict[str, aws.ec2.SecurityGroup] = {}
        descriptions = {
            "alb": "Load balancer: HTTPS (and HTTP redirect) from allowed CIDRs",
            "service": "API tasks: traffic from the load balancer only",
            "database": "Aurora PostgreSQL: from API tasks only",
            "search": "OpenSearch: HTTPS from API tasks only",
            "cache": "Redis: TLS from API tasks only",
            "endpoints": "VPC interface endpoints: HTTPS from API tasks and the reranker only",
            "reranker": "SageMaker reranker instances: no inbound; HTTPS out for model and image downloads",
        }
        for role in SECURITY_GROUP_ROLES:
            sgs[role] = aws.ec2.SecurityGroup(
                f"{name}-{role}-sg",
                vpc_id=vpc.id,
                description=descriptions[role],
                revoke_rules_on_delete=True,
                tags=self.tags(f"{name}-{role}"),
                opts=self.child_opts(),
            )

        def ingress(rule: str, role: str, port: int, *, cidr: str | None = None, source: str | None = None) -> None:
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-{rule}",
                security_group_id=sgs[role].id,
                ip_protocol="tcp",
                from_port=port,
                to_port=port,
                cidr_ipv4=cidr,
                referenced_security_group_id=sgs[source].id if source else None,
                description=f"{source or cidr} -> {role}:{port}",
                tags=self.tags(f"{name}-{rule}"),
                opts=self.child_opts(),
            )

        def egress(rule: str, role: str, port: int, *, cidr: str | None = None, dest: str | None = None) -> None:
            aws.vpc.SecurityGroupEgressRule(
                f"{name}-{rule}",
                security_group_id=sgs[role].id,
                ip_protocol="tcp",
                from_port=port,
                to_port=port,
                cidr_ipv4=cidr,
                referenced_security_group_id=sgs[dest].id if dest else None,
                description=f"{role} -> {dest or cidr}:{port}",
                tags=self.tags(f"{name}-{rule}"),
                opts=self.child_opts(),
            )

        for j, cidr in enumerate(args.alb_ingress_cidrs):
            ingress(f"alb-https-in-{j}", "alb", 443, cidr=cidr)
            ingress(f"alb-http-in-{j}", "alb", 80, cidr=cidr)  # redirected to HTTPS
        egress("alb-to-service", "alb", args.service_port, dest="service")
        ingress("service-from-alb", "service", args.service_port, source="alb")
        egress("service-to-database", "service", 5432, dest="database")
        egress("service-to-search", "service", 443, dest="search")
        egress("service-to-cache", "service", 6379, dest="cache")
        egress("service-to-endpoints", "service", 443, dest="endpoints")
        egress("service-to-aws-apis", "service", 443, cidr="0.0.0.0/0")  # via NAT
        ingress("database-from-service", "database", 5432, source="service")
        ingress("search-from-service", "search", 443, source="service")
        ingress("cache-from-service", "cache", 6379, source="service")
        ingress("endpoints-from-service", "endpoints", 443, source="service")
        egress("reranker-to-endpoints", "reranker", 443, dest="endpoints")
        egress("reranker-to-aws-apis", "reranker", 443, cidr="0.0.0.0/0")  # S3 gateway endpoint, NAT
        ingress("endpoints-from-reranker", "endpoints", 443, source="reranker")

        # --- VPC endpoints ------------------------------------------------------------------
        s3_endpoint = aws.ec2.VpcEndpoint(
            f"{name}-s3",
            vpc_id=vpc.id,
            service_name=ctx.endpoint_service("s3"),
            vpc_endpoint_type="Gateway",
            route_table_ids=[rt.id for rt in private_route_tables],
            tags=self.tags(f"{name}-s3"),
            opts=self.child_opts(),
        )
        endpoint_ids: dict[str, pulumi.Output[str]] = {}
        self.endpoint_zones: dict[str, tuple[str, ...]] = {}
        for svc in s.interface_endpoints:
            service_name = ctx.endpoint_service(svc)
            lookup = aws.ec2.get_vpc_endpoint_service(service_name=service_name, service_type="Interface")
            offered = set(lookup.availability_zones)
            subnets = [sn for az, sn in zip(azs, private_subnets, strict=True) if az in offered]
            if not subnets:
                pulumi.log.warn(f"{service_name} is offered in none of {', '.join(azs)}: no endpoint", resource=self)
                continue
            self.endpoint_zones[svc] = tuple(az for az in azs if az in offered)
            ep = aws.ec2.VpcEndpoint(
                f"{name}-{svc.replace('.', '-')}",
                vpc_id=vpc.id,
                service_name=service_name,
                vpc_endpoint_type="Interface",
                private_dns_enabled=True,
                subnet_ids=[sn.id for sn in subnets],
                security_group_ids=[sgs["endpoints"].id],
                tags=self.tags(f"{name}-{svc}"),
                opts=self.child_opts(),
            )
            endpoint_ids[svc] = ep.id

        # --- flow logs (rejected traffic) ------------------------------------------------
        flow_group = self.log_group(
            f"{name}-flow-logs",
            retention_days=s.flow_log_retention_days,
            kms_key_arn=args.log_kms_key_arn,
        )
        flow_role = aws.iam.Role(
            f"{name}-flow-logs",
            assume_role_policy=pulumi.Output.json_dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": ctx.service_principal("vpc-flow-logs")},
                            "Action": "sts:AssumeRole",
                            "Condition": {"StringEquals": {"aws:SourceAccount": ctx.account_id}},
                        }
                    ],
                }
            ),
            tags=self.tags(f"{name}-flow-logs"),
            opts=self.child_opts(),
        )
        aws.iam.RolePolicy(
            f"{name}-flow-logs",
            role=flow_role.id,
            policy=pulumi.Output.json_dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Sid": "WriteFlowLogs",
                            "Effect": "Allow",
                            "Action": ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                            "Resource": [flow_group.arn, pulumi.Output.concat(flow_group.arn, ":*")],
                        }
                    ],
                }
            ),
            opts=self.child_opts(),
        )
        aws.ec2.FlowLog(
            f"{name}-flow-logs",
            vpc_id=vpc.id,
            traffic_type="REJECT",
            log_destination_type="cloud-watch-logs",
            log_destination=flow_group.arn,
            iam_role_arn=flow_role.arn,
            tags=self.tags(f"{name}-flow-logs"),
            opts=self.child_opts(),
        )

        self.vpc_id = vpc.id
        self.vpc_cidr = s.cidr
        self.public_subnet_ids = [sn.id for sn in public_subnets]
        self.private_subnet_ids = [sn.id for sn in private_subnets]
        self.security_group_ids = {role: sg.id for role, sg in sgs.items()}
        self.interface_endpoint_ids = endpoint_ids
        self.s3_endpoint_id = s3_endpoint.id
        self.register_outputs(
            {
                "vpcId": self.vpc_id,
                "publicSubnetIds": self.public_subnet_ids,
                "privateSubnetIds": self.private_subnet_ids,
                "securityGroupIds": self.security_group_ids,
                "interfaceEndpointIds": endpoint_ids,
            }
        )
