"""The Lambda entry point with API Gateway v2 (HTTP API) events, configured from the environment."""

from __future__ import annotations

import asyncio
import base64
import importlib
import json
import re
import sys
from typing import Any

import pytest


def http_event(method: str, path: str, body: Any = None, headers: dict[str, str] | None = None, *, b64=False):
    raw = json.dumps(body) if body is not None else None
    if raw is not None and b64:
        raw = base64.b64encode(raw.encode()).decode()
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"content-type": "application/json", "host": "abc.execute-api.eu-west-1.amazonaws.com",
                    **(headers or {})},
        "requestContext": {
            "accountId": "123456789012", "apiId": "abc", "domainName": "abc.execute-api.eu-west-1.amazonaws.com",
            "domainPrefix": "abc", "requestId": "apigw-1", "routeKey": "$default", "stage": "$default",
            "time": "10/Mar/2025:10:00:00 +0000", "timeEpoch": 1741600800000,
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "203.0.113.9",
                     "userAgent": "test"},
        },
        "body": raw,
        "isBase64Encoded": b64,
    }  # fmt: skip


class Context:
    function_name = "cognis-memory"
    aws_request_id = "lambda-req-1"


@pytest.fixture
def lam(tmp_path, monkeypatch):
    monkeypatch.setenv("COGNIS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("COGNIS_API_KEYS", "lambda-key=acme,lambda-read=acme:read")
    monkeypatch.setenv("COGNIS_METRICS_ENABLED", "false")
    for var in ("COGNIS_STORE", "COGNIS_LLM", "COGNIS_RERANKER", "COGNIS_RECIPE"):
        monkeypatch.delenv(var, raising=False)
    if "cognis_memory.lambda_handler" in sys.modules:
        module = importlib.reload(sys.modules["cognis_memory.lambda_handler"])
    else:
        module = importlib.import_module("cognis_memory.lambda_handler")
    yield module
    asyncio.get_event_loop().run_until_complete(module._service.close())


def call(module, event) -> tuple[int, dict[str, str], Any]:
    response = module.handler(event, Context())
    body = response["body"]
    if response.get("isBase64Encoded"):
        body = base64.b64decode(body).decode()
    return response["statusCode"], response["headers"], json.loads(body) if body else None


def test_health_is_open(lam):
    status, headers, body = call(lam, http_event("GET", "/health"))
    assert (status, body) == (200, {"status": "ok"})
    assert headers["content-type"] == "application/json"


def test_add_and_search_with_a_key(lam, tmp_path):
    auth = {"authorization": "Bearer lambda-key"}
    status, _, body = call(
        lam,
        http_event("POST", "/v1/users/u1/messages", {"messages": [{"content": "I love green tea", "speaker": "Kim"}]},
                   auth),
    )  # fmt: skip
    assert status == 201, body
    memory_id = body["memories"][0]["id"]

    status, headers, body = call(
        lam, http_event("POST", "/v1/users/u1/search", {"query": "What does Kim drink?"}, {"x-api-key": "lambda-read",
                                                                                         "x-request-id": "lam-1"}),
    )  # fmt: skip
    assert status == 200, body
    assert [h["memory"]["id"] for h in body["results"]] == [memory_id]
    assert body["results"][0]["memory"]["content"] == "I love green tea"  # as said; the speaker is a field
    assert body["results"][0]["memory"]["speaker"] == "Kim"
    assert headers["x-client-request-id"] == "lam-1" and re.fullmatch(r"[0-9a-f]{32}", headers["x-request-id"])

    status, _, body = call(lam, http_event("POST", "/v1/users/u1/search", {"query": "tea"}))
    assert status == 401 and body["error"]["code"] == "unauthorized"
    status, _, body = call(lam, http_event("DELETE", "/v1/users/u1", headers={"x-api-key": "lambda-read"}))
    assert status == 403

    # a base64-encoded body (binary media types) works too
    status, _, body = call(lam, http_event("POST", "/v1/users/u1/search", {"query": "green tea"}, auth, b64=True))
    assert status == 200 and [h["memory"]["id"] for h in body["results"]] == [memory_id]
    assert (tmp_path / "data" / "memory.db").exists()


def test_the_service_starts_once_and_stays_open_across_invocations(lam):
    auth = {"authorization": "Bearer lambda-key"}
    call(lam, http_event("POST", "/v1/users/u2/messages", {"messages": [{"content": "hello"}]}, auth))
    store = lam._service.stores.backend
    for _ in range(3):
        status, _, _ = call(lam, http_event("POST", "/v1/users/u2/search", {"query": "hello"}, auth))
        assert status == 200
    assert lam._service._started is True  # not closed after each invocation
    assert lam._service.stores.backend is store
    # the per-user vector index loaded by the first search is still in memory
    from cognis_memory.domain import Owner

    assert store._vectors.peek(Owner("acme", "u2")) is not None
