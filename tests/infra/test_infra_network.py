"""Network: subnets over 3 AZs, NAT, endpoints, least-access security groups."""

from __future__ import annotations

import ipaddress

import pytest

from cognis_infra.network import DEFAULT_INTERFACE_ENDPOINTS, NetworkSettings, subnet_cidrs
from tests.infra.infra_harness import ENDPOINT_SERVICE_GAPS, REGION, parse_json, run_program

#: The chosen AZs: the first three zone ids (euw1-az1..3), as their names in the mocked account.
CHOSEN = ["eu-west-1b", "eu-west-1c", "eu-west-1a"]

SUBNET = "aws:ec2/subnet:Subnet"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"


def _subnets(program, tier):
    return sorted((s for s in program.of_type(SUBNET) if s["tags"]["Tier"] == tier), key=lambda s: s.name)


def test_vpc_has_dns_for_private_endpoints(program):
    vpc = program.one("aws:ec2/vpc:Vpc")
    assert vpc["cidrBlock"] == "10.40.0.0/16"
    assert vpc["enableDnsHostnames"] is True and vpc["enableDnsSupport"] is True


def test_availability_zones_are_looked_up_without_opt_in_zones(program):
    calls = [args for token, args in program.calls if token == "aws:index/getAvailabilityZones:getAvailabilityZones"]
    assert calls == [{"state": "available", "filters": [{"name": "opt-in-status", "values": ["opt-in-not-required"]}]}]


@pytest.mark.parametrize("tier", ["public", "private"])
def test_three_subnets_per_tier_one_per_az_inside_the_vpc(program, tier):
    subnets = _subnets(program, tier)
    assert [s["availabilityZone"] for s in subnets] == CHOSEN
    vpc = ipaddress.ip_network("10.40.0.0/16")
    nets = [ipaddress.ip_network(s["cidrBlock"]) for s in subnets]
    assert all(n.subnet_of(vpc) for n in nets)
    assert all(s["mapPublicIpOnLaunch"] is False for s in subnets)
    assert all(s["vpcId"] == "vpc-network-vpc" for s in subnets)


def test_subnets_do_not_overlap(program):
    nets = [ipaddress.ip_network(s["cidrBlock"]) for s in program.of_type(SUBNET)]
    assert len(nets) == 6
    for i, a in enumerate(nets):
        for b in nets[i + 1 :]:
            assert not a.overlaps(b), (a, b)


def test_subnet_plan_for_a_16_and_a_20():
    private, public = subnet_cidrs("10.40.0.0/16", 3)
    assert private == ["10.40.0.0/19", "10.40.32.0/19", "10.40.64.0/19"]
    assert public == ["10.40.96.0/22", "10.40.100.0/22", "10.40.104.0/22"]
    private, public = subnet_cidrs("172.16.0.0/20", 3)
    assert private == ["172.16.0.0/23", "172.16.2.0/23", "172.16.4.0/23"]
    assert all(ipaddress.ip_network(p).subnet_of(ipaddress.ip_network("172.16.0.0/20")) for p in public)


def test_routing_public_to_igw_private_to_nat_in_same_az(program):
    routes = {r.name: r for r in program.of_type("aws:ec2/route:Route")}
    assert routes["network-public-default"]["gatewayId"] == "igw-network-igw"
    nats = {n.name: n for n in program.of_type("aws:ec2/natGateway:NatGateway")}
    assert len(nats) == 3
    for i in range(3):
        nat = nats[f"network-nat-{i}"]
        assert nat["subnetId"] == f"subnet-network-public-{i}"  # NATs live in public subnets
        route = routes[f"network-private-default-{i}"]
        assert route["destinationCidrBlock"] == "0.0.0.0/0"
        assert route["natGatewayId"] == f"nat-network-nat-{i}"
        assert route["routeTableId"] == f"rtb-network-private-rt-{i}"
    assocs = {
        a["subnetId"]: a["routeTableId"] for a in program.of_type("aws:ec2/routeTableAssociation:RouteTableAssociation")
    }
    for i in range(3):
        assert assocs[f"subnet-network-private-{i}"] == f"rtb-network-private-rt-{i}"
        assert assocs[f"subnet-network-public-{i}"] == "rtb-network-public-rt"


def test_single_nat_gateway_option():
    run = run_program({"natGateways": 1})
    assert len(run.of_type("aws:ec2/natGateway:NatGateway")) == 1
    private_routes = [r for r in run.of_type("aws:ec2/route:Route") if r.name.startswith("network-private-default")]
    assert len(private_routes) == 3 and {r["natGatewayId"] for r in private_routes} == {"nat-network-nat-0"}


def test_network_settings_validation():
    with pytest.raises(ValueError, match="natGateways"):
        NetworkSettings(nat_gateways=2)
    with pytest.raises(ValueError, match="too small"):
        NetworkSettings(cidr="10.0.0.0/24")


def test_vpc_endpoints_keep_aws_api_traffic_off_nat(program):
    endpoints = {e["serviceName"]: e for e in program.of_type("aws:ec2/vpcEndpoint:VpcEndpoint")}
    s3 = endpoints.pop(f"com.amazonaws.{REGION}.s3")
    assert s3["vpcEndpointType"] == "Gateway"
    assert sorted(s3["routeTableIds"]) == [f"rtb-network-private-rt-{i}" for i in range(3)]
    expected = {f"com.amazonaws.{REGION}.{svc}" for svc in DEFAULT_INTERFACE_ENDPOINTS}
    assert set(endpoints) == expected
    for svc in ("ecr.api", "ecr.dkr", "logs", "secretsmanager", "bedrock-runtime", "sagemaker.runtime"):
        assert f"com.amazonaws.{REGION}.{svc}" in endpoints
    for name, ep in endpoints.items():
        assert ep["vpcEndpointType"] == "Interface"
        assert ep["privateDnsEnabled"] is True
        assert ep["securityGroupIds"] == ["sg-network-endpoints-sg"]
        missing = ENDPOINT_SERVICE_GAPS.get(name.removeprefix(f"com.amazonaws.{REGION}."))
        expected = [f"subnet-network-private-{i}" for i, az in enumerate(CHOSEN) if az != missing]
        assert sorted(ep["subnetIds"]) == expected, name


def test_endpoints_go_only_where_the_service_is_offered(program):
    """bedrock-runtime is not offered in eu-west-1c in the mocked region: its endpoint skips that AZ's subnet."""
    lookups = sorted(args["serviceName"] for token, args in program.calls if token.endswith("getVpcEndpointService"))
    assert lookups == sorted(f"com.amazonaws.{REGION}.{svc}" for svc in DEFAULT_INTERFACE_ENDPOINTS)
    assert all(args["serviceType"] == "Interface" for token, args in program.calls if token.endswith("Service"))
    bedrock = next(e for e in program.of_type("aws:ec2/vpcEndpoint:VpcEndpoint") if e.name == "network-bedrock-runtime")
    assert sorted(bedrock["subnetIds"]) == ["subnet-network-private-0", "subnet-network-private-2"]


def test_a_service_offered_in_none_of_the_zones_gets_no_endpoint():
    run = run_program({"azCount": 2, "natGateways": 1, "opensearchInstanceCount": 2,
                       "vpcInterfaceEndpoints": ["logs"]}, endpoint_gaps={"logs": "eu-west-1b|eu-west-1c"})  # fmt: skip
    assert {e["serviceName"] for e in run.of_type("aws:ec2/vpcEndpoint:VpcEndpoint")} == {f"com.amazonaws.{REGION}.s3"}


def _rules(program, type_):
    return [
        (
            r["securityGroupId"].removeprefix("sg-network-").removesuffix("-sg"),
            r.get("cidrIpv4") or r["referencedSecurityGroupId"].removeprefix("sg-network-").removesuffix("-sg"),
            r["ipProtocol"],
            int(r["fromPort"]),
            int(r["toPort"]),
        )
        for r in program.of_type(type_)
    ]


def test_ingress_is_least_access(program):
    assert sorted(_rules(program, INGRESS)) == sorted(
        [
            ("alb", "0.0.0.0/0", "tcp", 443, 443),
            ("alb", "0.0.0.0/0", "tcp", 80, 80),
            ("service", "alb", "tcp", 8080, 8080),
            ("database", "service", "tcp", 5432, 5432),
            ("search", "service", "tcp", 443, 443),
            ("cache", "service", "tcp", 6379, 6379),
            ("endpoints", "service", "tcp", 443, 443),
            ("endpoints", "reranker", "tcp", 443, 443),
        ]
    )


def test_egress_is_least_access(program):
    assert sorted(_rules(program, EGRESS)) == sorted(
        [
            ("alb", "service", "tcp", 8080, 8080),
            ("service", "database", "tcp", 5432, 5432),
            ("service", "search", "tcp", 443, 443),
            ("service", "cache", "tcp", 6379, 6379),
            ("service", "endpoints", "tcp", 443, 443),
            ("service", "0.0.0.0/0", "tcp", 443, 443),
            ("reranker", "endpoints", "tcp", 443, 443),
            ("reranker", "0.0.0.0/0", "tcp", 443, 443),
        ]
    )


def test_security_groups_have_no_inline_rules(program):
    for sg in program.of_type("aws:ec2/securityGroup:SecurityGroup"):
        assert "ingress" not in sg.inputs and "egress" not in sg.inputs
        assert sg["vpcId"] == "vpc-network-vpc"


def test_alb_ingress_can_be_restricted():
    run = run_program({"albIngressCidrs": ["203.0.113.0/24"]})
    world = [r for r in run.of_type(INGRESS) if r.get("cidrIpv4")]
    assert {r["cidrIpv4"] for r in world} == {"203.0.113.0/24"}


def test_flow_logs_capture_rejected_traffic_into_encrypted_group(program):
    flow = program.one("aws:ec2/flowLog:FlowLog")
    assert flow["trafficType"] == "REJECT" and flow["vpcId"] == "vpc-network-vpc"
    group = next(g for g in program.of_type("aws:cloudwatch/logGroup:LogGroup") if g.name == "network-flow-logs")
    assert flow["logDestination"] == group.outputs["arn"]
    assert group["kmsKeyId"] == program.one("aws:kms/key:Key").outputs["arn"]
    policy = parse_json(
        next(p for p in program.of_type("aws:iam/rolePolicy:RolePolicy") if p.name == "network-flow-logs")["policy"]
    )
    assert all(r.startswith(group.outputs["arn"]) for r in policy["Statement"][0]["Resource"])


def test_interface_endpoints_are_configurable():
    run = run_program({"vpcInterfaceEndpoints": ["ecr.api", "ecr.dkr"]})
    names = sorted(e["serviceName"] for e in run.of_type("aws:ec2/vpcEndpoint:VpcEndpoint"))
    assert names == [f"com.amazonaws.{REGION}.{s}" for s in ("ecr.api", "ecr.dkr", "s3")]
