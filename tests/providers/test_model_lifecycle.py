"""The Bedrock model lifecycle check: GetFoundationModel at the protocol level (botocore Stubber), the service's
start-up log line and /ready detail, and the default model the runtime and the stack share."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import boto3
import httpx
import pytest
from botocore.stub import Stubber

from cognis_memory.providers.bedrock_models import default_model_id, foundation_model_id
from cognis_memory.providers.model_lifecycle import BedrockModelLifecycleCheck

NOW = datetime(2026, 12, 3, tzinfo=UTC)
PROFILE = "us.amazon.nova-2-lite-v1:0"
BASE = "amazon.nova-2-lite-v1:0"


def _model(status: str, **times: datetime) -> dict:
    return {
        "modelDetails": {
            "modelArn": f"arn:aws:bedrock:us-east-1::foundation-model/{BASE}",
            "modelId": BASE,
            "modelName": "Nova 2 Lite",
            "providerName": "Amazon",
            "modelLifecycle": {"status": status, **times},
        }
    }


def _check(response: dict | None = None, error: str | None = None, model_id: str = PROFILE):
    client = boto3.client("bedrock", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    stub = Stubber(client)
    expected = {"modelIdentifier": foundation_model_id(model_id)}
    if error:
        stub.add_client_error("get_foundation_model", error, f"{error} message", expected_params=expected)
    else:
        stub.add_response("get_foundation_model", response, expected)
    stub.activate()
    return BedrockModelLifecycleCheck(model_id, client=client, clock=lambda: NOW), stub


def test_the_default_is_an_active_model_through_its_inference_profile():
    assert default_model_id("us-east-1") == PROFILE
    assert default_model_id("eu-west-1") == "eu.amazon.nova-2-lite-v1:0"
    assert default_model_id("ap-southeast-2") == "global.amazon.nova-2-lite-v1:0"
    assert foundation_model_id(PROFILE) == BASE  # the profile is checked as its foundation model
    assert foundation_model_id("arn:aws:bedrock:us-east-1:1:inference-profile/us.amazon.nova-2-lite-v1:0") == BASE
    check, stub = _check(_model("ACTIVE"))
    result = check.check()
    stub.assert_no_pending_responses()
    assert (result.status, result.foundation_model_id, result.warning) == ("ACTIVE", BASE, False)


def test_a_legacy_model_is_reported_with_its_end_of_life():
    eol = datetime(2027, 3, 1, tzinfo=UTC)
    check, _ = _check(_model("LEGACY", legacyTime=datetime(2026, 9, 1, tzinfo=UTC), endOfLifeTime=eol))
    result = check.check()
    assert result.status == "LEGACY" and result.warning and result.usable
    assert result.end_of_life_time == "2027-03-01T00:00:00Z" and "2027-03-01" in result.detail


def test_a_model_past_its_end_of_life_is_reported_unusable():
    """Claude 3.5 Haiku's card gives 2026-06-19: today every call to it fails."""
    model = "anthropic.claude-3-5-haiku-20241022-v1:0"
    check, _ = _check(_model("LEGACY", endOfLifeTime=datetime(2026, 6, 19, tzinfo=UTC)), model_id=model)
    result = check.check()
    assert (result.status, result.usable) == ("END_OF_LIFE", False)
    check, _ = _check(error="ResourceNotFoundException", model_id=model)
    gone = check.check()
    assert gone.status == "UNKNOWN" and "past its end of life" in gone.detail


def test_without_permission_the_check_says_so_and_never_raises():
    check, _ = _check(error="AccessDeniedException")
    result = check.check()
    assert result.status == "UNKNOWN" and "bedrock:GetFoundationModel" in result.detail


async def test_the_service_says_it_at_start_and_in_ready(make_service, caplog):
    from cognis_memory.api.app import create_app

    check, _ = _check(_model("LEGACY", endOfLifeTime=datetime(2027, 3, 1, tzinfo=UTC)))
    svc = await make_service(start=False)
    svc._model_check = check  # constructor injection is what from_settings does; the embedded fixture builds it
    with caplog.at_level(logging.WARNING, logger="cognis_memory.providers.model_lifecycle"):
        await svc.start()  # starts: a Legacy model is a warning, not a failure
    assert any("LEGACY" in r.getMessage() and PROFILE in r.getMessage() for r in caplog.records)
    transport = httpx.ASGITransport(app=create_app(svc, manage_lifecycle=False))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        body = (await client.get("/ready")).json()
    assert body["ready"] is True
    assert body["llm"]["status"] == "LEGACY" and body["llm"]["model_id"] == PROFILE


def test_from_settings_builds_the_check_only_for_bedrock():
    from cognis_memory.config import Settings
    from cognis_memory.wiring import build_model_check

    assert build_model_check(Settings(llm="none")) is None
    built = build_model_check(Settings(llm="bedrock", aws_region="us-east-1"))
    assert built is not None and built.model_id == PROFILE


@pytest.mark.parametrize("status", ["ACTIVE", "LEGACY"])
def test_every_status_bedrock_reports_is_handled(status):
    from botocore.session import get_session

    model = get_session().get_service_model("bedrock")
    assert status in model.shape_for("FoundationModelLifecycleStatus").enum
