"""The dynamic resources act as the stack's AWS provider identity (aws_session.py), at the protocol level:
STS answers through botocore's Stubber, and the service call is signed for real and caught before it
is sent (botocore's ``before-send`` event), so the test reads the credentials and Region it carries."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from botocore.awsrequest import AWSResponse
from botocore.stub import Stubber
from pulumi.dynamic import Config, ConfigureRequest

from cognis_infra.aws_session import AccountNotAllowed, AwsIdentity, session_for
from cognis_infra.ecs_deployment import EcsDeploymentCheckProvider
from cognis_infra.ecs_run import EcsTaskRunProvider
from cognis_infra.sagemaker_endpoint import SageMakerEndpointProvider, apply_endpoint

ROLE = "arn:aws:iam::111122223333:role/cognis-deployer"
#: The stack configuration as Pulumi hands it to a dynamic provider's ``configure`` (structured values as JSON).
STACK_CONFIG = {
    "aws:region": "eu-central-1",
    "aws:accessKey": "AKIABASEEXAMPLE00001",
    "aws:secretKey": "base-secret",
    "aws:assumeRoles": json.dumps(
        [{"roleArn": ROLE, "sessionName": "ci-deploy", "externalId": "ext-42", "duration": "1h"}]
    ),  # fmt: skip
    "aws:allowedAccountIds": json.dumps(["111122223333"]),
    "cognis:stackName": "test",
}
ASSUMED = {
    "AccessKeyId": "ASIAASSUMEDEXAMPLE01",
    "SecretAccessKey": "assumed-secret",
    "SessionToken": "assumed-token",
    "Expiration": datetime.now(UTC) + timedelta(hours=1),
}


def _configured(provider_class):
    provider = provider_class()
    provider.configure(ConfigureRequest(Config(dict(STACK_CONFIG), "cognis")))
    return provider


class StubbedSts:
    """Makes the STS client of each step from the session given, answering from a queue with a Stubber, and
    records which credentials and Region each step used."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.used: list[tuple[str, str, str]] = []  # (operation, access key, region)

    def __call__(self, session, region):
        client = session.client("sts", region_name=region)
        stub = Stubber(client)
        operation, response, params = self.answers.pop(0)
        stub.add_response(operation, response, params)
        stub.activate()
        self.used.append((operation, getattr(session.get_credentials(), "access_key", None), region))
        return client


def _sts(account="111122223333"):
    return StubbedSts(
        ("assume_role",
         {"Credentials": ASSUMED, "AssumedRoleUser": {"AssumedRoleId": "AROA:ci-deploy",
                                                      "Arn": f"arn:aws:sts::{account}:assumed-role/x/ci-deploy"}},
         {"RoleArn": ROLE, "RoleSessionName": "ci-deploy", "ExternalId": "ext-42", "DurationSeconds": 3600}),
        ("get_caller_identity", {"Account": account, "Arn": f"arn:aws:sts::{account}:assumed-role/x/ci-deploy",
                                 "UserId": "AROA:ci-deploy"}, {}),
    )  # fmt: skip


def _signed_calls(client):
    """Catch every request the client sends after signing it; answer DescribeEndpoint."""
    sent = []

    def answer(request, **_):
        sent.append(request)
        body = {"EndpointName": "e", "EndpointArn": "arn:aws:sagemaker:eu-central-1:111122223333:endpoint/e",
                "EndpointConfigName": "c", "EndpointStatus": "InService",
                "CreationTime": 0, "LastModifiedTime": 0}  # fmt: skip
        return AWSResponse(request.url, 200, {}, _Raw(json.dumps(body).encode()))

    client.meta.events.register("before-send.sagemaker", answer)
    return sent


class _Raw:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_):
        yield self.data


def test_an_assumed_role_provider_is_the_identity_that_calls_the_service():
    """Base keys from the configuration call AssumeRole (role, session name, external id, duration as
    configured); the account of the assumed credentials is checked; the service call is signed with the
    assumed credentials for the resource's Region."""
    for provider_class in (SageMakerEndpointProvider, EcsTaskRunProvider, EcsDeploymentCheckProvider):
        assert _configured(provider_class).identity.assume_roles[0].role_arn == ROLE
    identity = _configured(SageMakerEndpointProvider).identity
    sts = _sts()
    session = session_for(identity, "eu-central-1", sts=sts)
    assert sts.used == [
        ("assume_role", "AKIABASEEXAMPLE00001", "eu-central-1"),
        ("get_caller_identity", "ASIAASSUMEDEXAMPLE01", "eu-central-1"),
    ]
    client = session.client("sagemaker")
    sent = _signed_calls(client)
    apply_endpoint({"name": "e", "endpointConfigName": "c", "region": "eu-central-1"}, client=client, poll_s=0)
    # the signature itself changes with the second a call is made: compare what it was signed with
    (credential,) = {re.search(r"Credential=(\S+?),", r.headers["Authorization"].decode())[1] for r in sent}
    assert re.fullmatch(r"ASIAASSUMEDEXAMPLE01/\d{8}/eu-central-1/sagemaker/aws4_request", credential), credential
    assert {r.headers["X-Amz-Security-Token"].decode() for r in sent} == {"assumed-token"}
    assert all(r.url.startswith("https://api.sagemaker.eu-central-1.amazonaws.com") for r in sent)


def test_an_account_outside_allowed_account_ids_is_refused_before_any_change(monkeypatch):
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # the default chain: no instance-role probe here
    identity = _configured(EcsTaskRunProvider).identity
    with pytest.raises(AccountNotAllowed, match=r"444455556666.*aws:allowedAccountIds \(111122223333\)"):
        session_for(identity, "eu-central-1", sts=_sts(account="444455556666"))
    forbidden = AwsIdentity.from_config({"aws:forbiddenAccountIds": "444455556666"})
    sts = StubbedSts(("get_caller_identity", {"Account": "444455556666"}, {}))
    with pytest.raises(AccountNotAllowed, match="forbiddenAccountIds"):
        session_for(forbidden, "eu-central-1", sts=sts)


def test_without_identity_settings_no_sts_call_is_made_and_the_default_chain_is_used(monkeypatch):
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    sts = StubbedSts()
    session = session_for(AwsIdentity.from_config({"aws:region": "eu-west-1"}), "eu-west-1", sts=sts)
    assert sts.used == [] and session.region_name == "eu-west-1"


def test_identity_parsing():
    one = AwsIdentity.from_config({"aws:assumeRole": json.dumps({"roleArn": ROLE}), "aws:profile": "ops"})
    assert one.profile == "ops" and one.assume_roles[0].request() == {
        "RoleArn": ROLE,
        "RoleSessionName": "cognis-pulumi-dynamic",
    }
    assert AwsIdentity.from_config({"aws:allowedAccountIds": "1, 2"}).allowed_account_ids == ("1", "2")
    with pytest.raises(ValueError, match="accessKey and aws:secretKey"):
        AwsIdentity.from_config({"aws:accessKey": "AKIA"})
    with pytest.raises(ValueError, match="duration"):
        AwsIdentity.from_config({"aws:assumeRoles": [{"roleArn": ROLE, "duration": "an hour"}]})
    assert "base-secret" not in repr(_configured(EcsTaskRunProvider).identity)
    with pytest.raises(ValueError, match="aws:assumeRoleWithWebIdentity is set"):
        AwsIdentity.from_config({"aws:assumeRoleWithWebIdentity": json.dumps({"roleArn": ROLE})})


def test_no_credential_reaches_the_state(program):
    """The identity is read from the configuration in the provider process: the dynamic resources' inputs
    (stored in the state) carry the Region, never a profile, key or role."""
    dynamic = [r for r in program.resources if r.type == "pulumi-python:dynamic:Resource"]
    assert {r.name for r in dynamic} >= {"api-migrate", "api-deployment", "reranker-endpoint"}
    for r in dynamic:
        assert r["region"] == "eu-west-1"
        assert not {"profile", "accessKey", "secretKey", "token", "assumeRoles"} & set(r.inputs), r.name


STS_XML = {
    "AssumeRole": (
        "<AssumeRoleResponse xmlns='https://sts.amazonaws.com/doc/2011-06-15/'><AssumeRoleResult><Credentials>"
        "<AccessKeyId>ASIAASSUMEDEXAMPLE01</AccessKeyId><SecretAccessKey>assumed-secret</SecretAccessKey>"
        "<SessionToken>assumed-token</SessionToken><Expiration>2099-01-01T00:00:00Z</Expiration></Credentials>"
        "<AssumedRoleUser><Arn>arn:aws:sts::111122223333:assumed-role/x/ci-deploy</Arn>"
        "<AssumedRoleId>AROA:ci-deploy</AssumedRoleId></AssumedRoleUser></AssumeRoleResult></AssumeRoleResponse>"
    ),
    "GetCallerIdentity": (
        "<GetCallerIdentityResponse xmlns='https://sts.amazonaws.com/doc/2011-06-15/'><GetCallerIdentityResult>"
        "<Arn>arn:aws:sts::111122223333:assumed-role/x/ci-deploy</Arn><UserId>AROA:ci-deploy</UserId>"
        "<Account>111122223333</Account></GetCallerIdentityResult></GetCallerIdentityResponse>"
    ),
}


def test_the_configured_provider_acts_as_that_identity_end_to_end(monkeypatch):
    """The provider as Pulumi runs it: ``configure`` with the stack configuration, then ``create``. Every AWS
    call goes to a local endpoint (``AWS_ENDPOINT_URL``), which records the signature: STS is called with
    the base keys, the endpoint with the assumed role's credentials in the resource's Region."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import parse_qs

    seen: list[tuple[str, str]] = []

    class Aws(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"])).decode()
            target = self.headers.get("X-Amz-Target")
            action = target.split(".")[-1] if target else parse_qs(body)["Action"][0]
            seen.append((action, self.headers["Authorization"]))
            if target:
                payload = json.dumps({"EndpointName": "e", "EndpointConfigName": "c", "EndpointStatus": "InService",
                                      "EndpointArn": "arn:aws:sagemaker:eu-central-1:111122223333:endpoint/e",
                                      "CreationTime": 0, "LastModifiedTime": 0})  # fmt: skip
                kind = "application/x-amz-json-1.1"
            else:
                payload, kind = STS_XML[action], "text/xml"
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload.encode())

        def log_message(self, *_):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Aws)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    try:
        provider = _configured(SageMakerEndpointProvider)
        created = provider.create({"name": "e", "endpointConfigName": "c", "region": "eu-central-1", "tags": {}})
    finally:
        server.shutdown()
    assert created.outs["endpointConfigName"] == "c"
    scope = {a: re.search(r"Credential=(\w+)/\d{8}/([\w-]+)/(\w+)/", auth).groups() for a, auth in seen}  # type: ignore[union-attr]
    assert [a for a, _ in seen] == ["AssumeRole", "GetCallerIdentity", "DescribeEndpoint", "DescribeEndpoint"]
    assert scope["AssumeRole"] == ("AKIABASEEXAMPLE00001", "eu-central-1", "sts")
    assert scope["GetCallerIdentity"] == ("ASIAASSUMEDEXAMPLE01", "eu-central-1", "sts")
    assert scope["DescribeEndpoint"] == ("ASIAASSUMEDEXAMPLE01", "eu-central-1", "sagemaker")
