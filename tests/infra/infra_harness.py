"""Run the Pulumi program in-process under mocks and record every resource.

``run_program(config)`` sets fresh mocks and config, executes ``infra/__main__.py``
inside ``@pulumi.runtime.test`` (which waits for every registration and output), and
returns the recorded resources (type, name, inputs, outputs, and the resource options the
engine received: ``protect``, ``retainOnDelete``, ``replaceOnChanges``, ``deleteBeforeReplace``,
``dependencies``), the provider function calls and the resolved stack exports. Tests then
assert on plain data: nothing is asserted inside an ``apply`` that could silently not run.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import runpy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import pulumi
from pulumi.runtime.mocks import MockMonitor

REPO = Path(__file__).resolve().parents[2]
INFRA = REPO / "infra"
POLICIES = INFRA / "policies"

PROJECT = "cognis"
STACK = "test"
REGION = "eu-west-1"
ACCOUNT = "123456789012"
AZS = ["eu-west-1a", "eu-west-1b", "eu-west-1c"]
#: Zone ids in the mocked account: the names map to zone ids out of order, as they do in AWS.
ZONE_IDS = ["euw1-az3", "euw1-az1", "euw1-az2"]
CERT_ARN = f"arn:aws:acm:{REGION}:{ACCOUNT}:certificate/0f0e0d0c-1111-2222-3333-444455556666"
API_KEY = "k3y-Abcdefghijklmnopqrstuvwxyz0123456789"
CACHE_TOKEN = "cache-Token-0123456789abcdef"
MODEL_S3_URI = "s3://cognis-models-123456789012-eu-west-1/models/BAAI/bge-reranker-v2-m3/0123abcd/"

#: The smallest valid configuration: everything else takes its default (the image is built).
BASE_CONFIG: dict[str, Any] = {
    "certificateArn": CERT_ARN,
    "rerankerModelS3Uri": MODEL_S3_URI,
    "alarmEmail": "oncall@acme-memory.io",
    "apiKey": API_KEY,
    "cacheAuthToken": CACHE_TOKEN,
}
SECRET_KEYS = ("apiKey", "cacheAuthToken")
#: Interface endpoint services the mocked region lacks in some AZs (names, "|"-separated).
ENDPOINT_SERVICE_GAPS: dict[str, str] = {"bedrock-runtime": "eu-west-1c"}


@dataclass
class Res:
    """One registered resource."""

    type: str
    name: str
    inputs: dict
    outputs: dict
    id: str
    custom: bool
    #: Resource options as the engine received them (see ``OptionsRecordingMonitor``).
    options: dict = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.inputs[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.inputs.get(key, default)


@dataclass
class ProgramRun:
    resources: list[Res]
    calls: list[tuple[str, dict]]
    exports: dict[str, Any]
    #: URNs as the mock monitor built them (parent component types included).
    urns: list[str] = field(default_factory=list)

    def of_type(self, type_: str) -> list[Res]:
        return [r for r in self.resources if r.type == type_]

    def one(self, type_: str, name: str | None = None) -> Res:
        found = [r for r in self.of_type(type_) if name is None or r.name == name]
        assert len(found) == 1, f"expected one {type_} {name or ''}, found {[r.name for r in found]}"
        return found[0]

    def named(self, name: str) -> Res:
        found = [r for r in self.resources if r.name == name]
        assert len(found) == 1, f"expected one resource named {name}, found {len(found)}"
        return found[0]

    @property
    def types(self) -> set[str]:
        return {r.type for r in self.resources}


def _arn(service: str, resource: str, region: str = REGION) -> str:
    return f"arn:aws:{service}:{region}:{ACCOUNT}:{resource}"


def _computed(typ: str, name: str, inputs: dict) -> tuple[str, dict]:
    """Physical id and the computed outputs AWS would return for a resource."""
    autoname = inputs.get("name") or f"{name}-a1b2c3d"
    out: dict[str, Any] = {}
    rid = f"{name}-id"
    if typ == "aws:ec2/vpc:Vpc":
        rid = f"vpc-{name}"
    elif typ == "aws:ec2/subnet:Subnet":
        rid = f"subnet-{name}"
    elif typ == "aws:ec2/securityGroup:SecurityGroup":
        rid = f"sg-{name}"
        out["arn"] = _arn("ec2", f"security-group/{rid}")
    elif typ == "aws:ec2/natGateway:NatGateway":
        rid = f"nat-{name}"
    elif typ == "aws:ec2/eip:Eip":
        rid = f"eipalloc-{name}"
    elif typ == "aws:ec2/routeTable:RouteTable":
        rid = f"rtb-{name}"
    elif typ == "aws:ec2/internetGateway:InternetGateway":
        rid = f"igw-{name}"
    elif typ == "aws:ec2/vpcEndpoint:VpcEndpoint":
        rid = f"vpce-{name}"
    elif typ == "aws:kms/key:Key":
        rid = f"key-{name}"
        out.update(keyId=rid, arn=_arn("kms", f"key/{rid}"))
    elif typ == "aws:cloudwatch/logGroup:LogGroup":
        rid = autoname
        out.update(name=autoname, arn=_arn("logs", f"log-group:{autoname}"))
    elif typ == "aws:iam/role:Role":
        rid = autoname
        out.update(name=autoname, arn=f"arn:aws:iam::{ACCOUNT}:role/{autoname}", uniqueId=f"AROA{name.upper()}")
    elif typ == "aws:secretsmanager/secret:Secret":
        rid = _arn("secretsmanager", f"secret:{autoname}-AbCdEf")
        out.update(arn=rid, name=autoname)
    elif typ == "aws:opensearch/domain:Domain":
        dn = inputs["domainName"]
        rid = _arn("es", f"domain/{dn}")
        out.update(
            arn=rid,
            domainId=f"{ACCOUNT}/{dn}",
            endpoint=f"vpc-{dn}-abcdefghijklmnop.{REGION}.es.amazonaws.com",
        )
    elif typ == "aws:rds/cluster:Cluster":
        cid = inputs.get("clusterIdentifier") or f"{name}-a1b2c3d"
        rid = cid
        out.update(
            arn=_arn("rds", f"cluster:{cid}"),
            clusterIdentifier=cid,
            clusterResourceId="cluster-ABCDEFGHIJKLMNOPQRSTUV0123",
            engineVersionActual="17.5" if inputs.get("engineVersion") == "17" else inputs.get("engineVersion"),
            endpoint=f"{cid}.cluster-cxyz.{REGION}.rds.amazonaws.com",
            readerEndpoint=f"{cid}.cluster-ro-cxyz.{REGION}.rds.amazonaws.com",
            port=inputs.get("port", 5432),
            masterUserSecrets=[
                {
                    "secretArn": _arn("secretsmanager", f"secret:rds!cluster-{cid}-XyZ123"),
                    "secretStatus": "active",
                    "kmsKeyId": _arn("kms", "key/aws-secretsmanager"),
                }
            ],
        )
    elif typ == "aws:rds/clusterInstance:ClusterInstance":
        rid = f"{name}-a1b2c3d"
        out.update(identifier=rid, arn=_arn("rds", f"db:{rid}"))
    elif typ in (
        "aws:rds/subnetGroup:SubnetGroup",
        "aws:rds/clusterParameterGroup:ClusterParameterGroup",
        "aws:elasticache/subnetGroup:SubnetGroup",
        "aws:ecs/cluster:Cluster",
        "aws:ecs/service:Service",
        "aws:sagemaker/model:Model",
        "aws:sagemaker/endpointConfiguration:EndpointConfiguration",
    ):
        rid = autoname
        out.update(name=autoname, arn=_arn(typ.split(":")[1].split("/")[0], f"{typ.split(':')[-1].lower()}/{autoname}"))
    elif typ == "aws:elasticache/replicationGroup:ReplicationGroup":
        rid = inputs.get("replicationGroupId") or f"{name}-a1b2c3d"
        out.update(
            memberClusters=[f"{rid}-{i:03d}" for i in range(1, int(inputs.get("numCacheClusters") or 1) + 1)],
            arn=_arn("elasticache", f"replicationgroup:{rid}"),
            primaryEndpointAddress=f"master.{rid}.abcdef.euw1.cache.amazonaws.com",
            readerEndpointAddress=f"replica.{rid}.abcdef.euw1.cache.amazonaws.com",
        )
    elif typ == "aws:sagemaker/endpoint:Endpoint":
        rid = autoname
        out.update(name=autoname, arn=_arn("sagemaker", f"endpoint/{autoname.lower()}"))
    elif typ == "aws:secretsmanager/secretVersion:SecretVersion":
        rid = f"{name}|v1"
        content = json.dumps(inputs.get("secretString"), sort_keys=True, default=str).encode()
        out.update(versionId="v-" + hashlib.sha256(content).hexdigest()[:12])
    elif typ == "docker-build:index:Image":
        digest = "sha256:" + "ab12" * 16
        rid = f"{name}-image"
        out.update(digest=digest, ref=f"{inputs['tags'][0]}@{digest}", contextHash="c0ffee")
    elif typ == "aws:lb/loadBalancer:LoadBalancer":
        rid = _arn("elasticloadbalancing", f"loadbalancer/app/{autoname}/50dc6c495c0c9188")
        out.update(
            arn=rid,
            arnSuffix=f"app/{autoname}/50dc6c495c0c9188",
            dnsName=f"{autoname}-123456789.{REGION}.elb.amazonaws.com",
            zoneId="Z32O12XQLNTSW2",
        )
    elif typ == "aws:lb/targetGroup:TargetGroup":
        rid = _arn("elasticloadbalancing", f"targetgroup/{autoname}/73e2d6bc24d8a067")
        out.update(arn=rid, arnSuffix=f"targetgroup/{autoname}/73e2d6bc24d8a067")
    elif typ == "aws:lb/listener:Listener":
        rid = _arn("elasticloadbalancing", f"listener/app/{name}/1/2")
        out.update(arn=rid)
    elif typ == "aws:ecr/repository:Repository":
        rid = autoname
        out.update(
            name=autoname,
            arn=_arn("ecr", f"repository/{autoname}"),
            repositoryUrl=f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/{autoname}",
            registryId=ACCOUNT,
        )
    elif typ == "aws:ecs/taskDefinition:TaskDefinition":
        rid = f"{inputs.get('family', name)}:1"
        out.update(arn=_arn("ecs", f"task-definition/{rid}"), revision=1)
    elif typ == "aws:sns/topic:Topic":
        rid = _arn("sns", autoname)
        out.update(arn=rid, name=autoname)
    elif typ == "aws:cloudwatch/metricAlarm:MetricAlarm":
        rid = autoname
        out.update(arn=_arn("cloudwatch", f"alarm:{autoname}"))
    elif typ == "aws:appautoscaling/target:Target":
        rid = inputs.get("resourceId", name)
    elif typ == "pulumi-python:dynamic:Resource" and "endpointConfigName" in inputs:  # SageMakerEndpoint
        rid = inputs["name"]
        out.update(arn=_arn("sagemaker", f"endpoint/{rid.lower()}"))
    elif typ == "pulumi-python:dynamic:Resource" and "deploymentTriggers" in inputs:  # EcsDeploymentCheck
        rid = f"{inputs.get('service', name)}-deployment"
        out.update(deploymentId="ecs-svc/0123456789", rolloutState="COMPLETED")
    elif typ == "pulumi-python:dynamic:Resource" and "taskDefinition" in inputs:  # EcsTaskRun
        rid = _arn("ecs", f"task/{name}/0123456789abcdef")
        out.update(taskArn=rid, exitCode=0)
    out.setdefault("arn", _arn(typ.split(":")[1].split("/")[0], f"{name}"))
    out.setdefault("id", rid)
    return rid, out


class OptionsRecordingMonitor(MockMonitor):
    """The SDK's mock monitor, also keeping the resource options each registration carried."""

    def __init__(self, mocks: CognisMocks) -> None:
        super().__init__(mocks)
        self.cognis_mocks = mocks

    def RegisterResource(self, request):
        options = {
            "protect": bool(request.protect),
            "retainOnDelete": request.retainOnDelete if request.HasField("retainOnDelete") else None,
            "deleteBeforeReplace": request.deleteBeforeReplace if request.deleteBeforeReplaceDefined else None,
            "replaceOnChanges": list(request.replaceOnChanges),
            "ignoreChanges": list(request.ignoreChanges),
            "dependencies": list(request.dependencies),
        }
        self.cognis_mocks.pending_options[(request.type, request.name)] = options
        return super().RegisterResource(request)


class CognisMocks(pulumi.runtime.Mocks):
    """Answers provider functions and records every registered resource."""

    def __init__(
        self,
        endpoint_gaps: dict[str, str] | None = None,
        running_clusters: dict[str, str] | None = None,
        registry_images: dict[str, dict[str, str]] | None = None,
        type_gaps: dict[str, set[str]] | None = None,
    ) -> None:
        #: Zone id -> EC2 instance types / RDS instance classes the mocked zone does not offer (none lack any).
        self.type_gaps = dict(type_gaps or {})
        #: Aurora clusters that exist already (identifier -> engine version): none, a first deployment.
        self.running_clusters = dict(running_clusters or {})
        #: ECR repositories that exist already (name -> {tag: digest}): none, a first deployment.
        self.registry_images = dict(registry_images or {})
        self.resources: list[Res] = []
        self.calls: list[tuple[str, dict]] = []
        self.pending_options: dict[tuple[str, str], dict] = {}
        self.endpoint_gaps = ENDPOINT_SERVICE_GAPS if endpoint_gaps is None else endpoint_gaps

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        rid, computed = _computed(args.typ, args.name, args.inputs)
        outputs = {**args.inputs, **computed}
        options = self.pending_options.pop((args.typ, args.name), {})
        self.resources.append(Res(args.typ, args.name, dict(args.inputs), outputs, rid, bool(args.custom), options))
        return rid, outputs

    def call(self, args: pulumi.runtime.MockCallArgs):
        self.calls.append((args.token, dict(args.args)))
        if args.token == "aws:index/getRegion:getRegion":
            return {
                "id": REGION,
                "name": REGION,
                "region": REGION,
                "endpoint": f"ec2.{REGION}.amazonaws.com",
                "description": "Europe (Ireland)",
            }
        if args.token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {
                "accountId": ACCOUNT,
                "arn": f"arn:aws:iam::{ACCOUNT}:user/deployer",
                "userId": "AIDAEXAMPLE",
                "id": ACCOUNT,
            }
        if args.token == "aws:index/getPartition:getPartition":
            return {"partition": "aws", "dnsSuffix": "amazonaws.com", "reverseDnsPrefix": "com.amazonaws", "id": "aws"}
        if args.token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            return {"id": REGION, "names": list(AZS), "zoneIds": list(ZONE_IDS), "groupNames": [REGION]}
        if args.token == "aws:ec2/getVpcEndpointService:getVpcEndpointService":
            service = args.args["serviceName"].removeprefix(f"com.amazonaws.{REGION}.")
            missing = set(self.endpoint_gaps.get(service, "").split("|"))
            zones = [az for az in AZS if az not in missing]
            return {
                "id": args.args["serviceName"],
                "serviceName": args.args["serviceName"],
                "serviceType": "Interface",
                "availabilityZones": zones,
                "serviceId": f"vpce-svc-{service}",
                "owner": "amazon",
            }
        if args.token == "aws:rds/getClusters:getClusters":
            wanted = {v for f in args.args.get("filters") or [] for v in f.get("values", [])}
            found = sorted(c for c in self.running_clusters if c in wanted)
            return {"id": REGION, "clusterArns": [_arn("rds", f"cluster:{c}") for c in found],
                    "clusterIdentifiers": found}  # fmt: skip
        if args.token == "aws:rds/getCluster:getCluster":
            cid = args.args["clusterIdentifier"]
            return {"id": cid, "clusterIdentifier": cid, "engine": "aurora-postgresql",
                    "engineVersion": self.running_clusters[cid]}  # fmt: skip
        if args.token == "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings":
            (wanted,) = [f["values"] for f in args.args["filters"] if f["name"] == "instance-type"]
            offers = [(z, t) for z in ZONE_IDS for t in wanted if t not in self.type_gaps.get(z, set())]
            return {"id": REGION, "locations": [z for z, _ in offers], "instanceTypes": [t for _, t in offers],
                    "locationTypes": ["availability-zone-id"] * len(offers)}  # fmt: skip
        if args.token == "aws:rds/getOrderableDbInstance:getOrderableDbInstance":
            cls = args.args["instanceClass"]
            zones = [az for az, z in zip(AZS, ZONE_IDS, strict=True) if cls not in self.type_gaps.get(z, set())]
            return {"id": cls, "engine": args.args["engine"], "instanceClass": cls, "availabilityZones": zones,
                    "engineVersion": args.args.get("engineVersion") or "17.5"}  # fmt: skip
        if args.token == "aws:ecr/getRepositories:getRepositories":
            return {"id": REGION, "names": sorted(self.registry_images)}
        if args.token == "aws:ecr/getImages:getImages":
            repo = args.args["repositoryName"]
            images = [{"imageTag": t, "imageDigest": d} for t, d in self.registry_images[repo].items()]
            return {"id": repo, "repositoryName": repo, "imageIds": images}
        if args.token == "aws:ecr/getAuthorizationToken:getAuthorizationToken":
            return {
                "id": REGION,
                "userName": "AWS",
                "password": "ecr-token-password",
                "authorizationToken": "QVdTOmVjci10b2tlbi1wYXNzd29yZA==",
                "proxyEndpoint": f"https://{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com",
                "expiresAt": "2030-01-01T00:00:00Z",
                "registryId": args.args.get("registryId", ACCOUNT),
            }
        raise NotImplementedError(f"mock has no answer for {args.token}")


def _config_values(config: dict[str, Any]) -> dict[str, str]:
    """``cognis:`` keys unless the key names its own namespace (``aws:defaultTags``)."""
    return {
        (k if ":" in k else f"cognis:{k}"): (v if isinstance(v, str) else json.dumps(v))
        for k, v in config.items()
        if v is not None
    }


def _ensure_event_loop() -> None:
    """Pulumi's mocks make futures on the thread's current event loop. An earlier test in the same process
    that ran ``asyncio.run`` leaves none (it ends with ``set_event_loop(None)``): then give it one."""
    try:
        asyncio.get_event_loop()
    except RuntimeError:
        asyncio.set_event_loop(asyncio.new_event_loop())


def run_program(
    overrides: dict[str, Any] | None = None,
    *,
    stack: str = STACK,
    drop: tuple[str, ...] = (),
    endpoint_gaps: dict[str, str] | None = None,
    base: dict[str, Any] | None = None,
    running_clusters: dict[str, str] | None = None,
    main: Path | None = None,
    registry_images: dict[str, dict[str, str]] | None = None,
    type_gaps: dict[str, set[str]] | None = None,
) -> ProgramRun:
    """Run ``infra/__main__.py`` (or another checkout's ``main``) under fresh mocks with ``base`` (default
    ``BASE_CONFIG``) + ``overrides``; ``running_clusters`` are Aurora clusters that already exist,
    ``registry_images`` ECR repositories that already exist with their tags, ``type_gaps`` the instance types
    a zone id does not offer."""
    config = {**(BASE_CONFIG if base is None else base), **(overrides or {})}
    for key in drop:
        config.pop(key, None)
    mocks = CognisMocks(endpoint_gaps, running_clusters, registry_images, type_gaps)
    _ensure_event_loop()
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack, preview=False, monitor=OptionsRecordingMonitor(mocks))
    pulumi.runtime.set_all_config(_config_values(config), [f"cognis:{k}" for k in SECRET_KEYS if k in config])

    exported: dict[str, Any] = {}
    resolved: dict[str, Any] = {}

    def capture_export(name: str, value: Any) -> None:
        exported[name] = value

    @pulumi.runtime.test
    def program():
        with mock.patch.object(pulumi, "export", capture_export):
            runpy.run_path(str(main or INFRA / "__main__.py"), run_name="__main__")
        return pulumi.Output.all(**exported).apply(resolved.update) if exported else None

    program()
    assert set(resolved) == set(exported), "stack outputs did not all resolve"
    urns = list(pulumi.runtime.settings.SETTINGS.monitor.get_registered_resources())
    return ProgramRun(mocks.resources, mocks.calls, resolved, urns)


def run_component(build) -> tuple[CognisMocks, dict[str, Any]]:
    """Run ``build()`` (which returns a dict of Outputs) under fresh mocks; resolve it."""
    mocks = CognisMocks()
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=STACK, preview=False, monitor=OptionsRecordingMonitor(mocks))
    pulumi.runtime.set_all_config({})
    resolved: dict[str, Any] = {}

    @pulumi.runtime.test
    def program():
        outputs = build()
        return pulumi.Output.all(**outputs).apply(resolved.update)

    program()
    return mocks, resolved


SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"


def is_secret(value: Any) -> bool:
    """Mocks receive secret inputs wrapped in Pulumi's secret envelope."""
    return isinstance(value, dict) and value.get(SECRET_SIG_KEY) == SECRET_SIG


def reveal(value: Any) -> Any:
    """The plain value of a (possibly secret) input, recursively."""
    if is_secret(value):
        return reveal(value["value"])
    if isinstance(value, dict):
        return {k: reveal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [reveal(v) for v in value]
    return value


def parse_json(value: Any) -> Any:
    """Inputs that hold JSON documents (policies, container definitions) as parsed data."""
    assert isinstance(value, str), f"expected a JSON string, got {type(value).__name__}"
    return json.loads(value)
