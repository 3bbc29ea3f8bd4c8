"""Schemathesis pass against the app's own OpenAPI spec, in-process over ASGI (issue #6, part 2).

Positive and negative generation for every operation, a small fixed number of examples per
operation, with a valid API key. Checks: never a 5xx, responses conform to the documented
schema (content type and body). Afterwards the data of a bystander user, written before the
fuzzing, is exactly unchanged (export before == export after).
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import content_type_conformance, not_a_server_error, response_schema_conformance

from cognis_memory.api.app import create_app
from cognis_memory.service import MessageBody
from cognis_memory.validation import ID_PATTERN
from tests.reliability.helpers import DIM_SHORT, make_service
from tests.store_kinds import build_embedded

SCALE = float(os.environ.get("COGNIS_RELIABILITY_SCALE", "1"))
FUZZ_EXAMPLES = max(5, int(60 * SCALE))


@pytest.fixture(scope="module")
def fuzz_target(tmp_path_factory, embedder):
    """(app, api key, service) on an embedded store; a bystander user holds some data."""
    import torch

    torch.set_num_threads(1)
    handle = build_embedded(tmp_path_factory.mktemp("fuzz") / "memory.db", embedder.dim, DIM_SHORT)
    svc = make_service(handle.store, embedder)

    async def setup() -> str:
        await svc.start(run_worker=False)
        await svc.add_messages(
            "fuzz", "bystander", [MessageBody(content="I keep bees in Lisbon zq0000000bee", speaker="Bo")]
        )
        return await svc.create_api_key("fuzz")

    key = asyncio.run(setup())
    app = create_app(svc, manage_lifecycle=False)
    yield app, key, svc
    asyncio.run(svc.close())


async def _export(svc, user: str) -> list[dict]:
    from cognis_memory.serialization import memory_to_dict

    return [memory_to_dict(m) async for m in svc.export("fuzz", user)]


#: Every operation of the spec (checked against the live spec below, so a new route cannot go unfuzzed).
OPERATIONS = [
    "GET /health",
    "GET /ready",
    "POST /v1/users/{user_id}/messages",
    "POST /v1/users/{user_id}/search",
    "POST /v1/users/{user_id}/context",
    "GET /v1/users/{user_id}/memories",
    "GET /v1/users/{user_id}/memories/{memory_id}",
    "PATCH /v1/users/{user_id}/memories/{memory_id}",
    "DELETE /v1/users/{user_id}/memories/{memory_id}",
    "GET /v1/users/{user_id}/memories/{memory_id}/history",
    "GET /v1/users/{user_id}/sessions/{session_id}/messages",
    "DELETE /v1/users/{user_id}",
    "GET /v1/users/{user_id}/jobs/{job_id}",
    "GET /v1/users",
    "GET /v1/key",
    "GET /v1/jobs",
]
#: Operations with a body or query parameters; the others have only string path parameters,
#: which no value can violate (schemathesis cannot generate negative cases for them).
NEGATIVE_OPERATIONS = [
    "POST /v1/users/{user_id}/messages",
    "POST /v1/users/{user_id}/search",
    "POST /v1/users/{user_id}/context",
    "GET /v1/users/{user_id}/memories",
    "PATCH /v1/users/{user_id}/memories/{memory_id}",
    "GET /v1/users/{user_id}/sessions/{session_id}/messages",
    "GET /v1/users",
    "GET /v1/jobs",
]
CASES = [(op, GenerationMode.POSITIVE) for op in OPERATIONS] + [
    (op, GenerationMode.NEGATIVE) for op in NEGATIVE_OPERATIONS
]
CHECKS = [not_a_server_error, response_schema_conformance, content_type_conformance]


@pytest.fixture(scope="module")
def fuzz_schema(fuzz_target):
    """schemathesis 4 (``from_fixture`` is not usable with pytest 9: it reads ``Function._nodeid``)."""
    app, _, _ = fuzz_target
    return schemathesis.openapi.from_asgi("/openapi.json", app)


@pytest.fixture(scope="module")
def bystander_before(fuzz_target):
    _, _, svc = fuzz_target
    return asyncio.run(_export(svc, "bystander"))


def test_every_operation_is_fuzzed(fuzz_schema):
    assert sorted(r.ok().label for r in fuzz_schema.get_all_operations()) == sorted(OPERATIONS)


def _valid_where_the_schema_cannot_say(label: str, case) -> None:
    """Make a positive case valid in the rules the OpenAPI document does not state, so that positive cases
    reach the service whatever hypothesis draws (it draws some strings from the loaded source's constants,
    so any runtime edit changes them): an id path parameter matches the id rule, a message's content is
    not blank, and a context body has `query` or its deprecated name `message`."""
    for name, value in (case.path_parameters or {}).items():
        if name.endswith("_id") and not (isinstance(value, str) and ID_PATTERN.fullmatch(value)):
            case.path_parameters[name] = "fuzzer"
    body = case.body if isinstance(case.body, dict) else {}
    for message in body.get("messages") or []:
        if isinstance(message, dict) and isinstance(message.get("content"), str) and not message["content"].strip():
            message["content"] = "bees"
    if label.endswith("/context") and body.get("query") is None and body.get("message") is None:
        body["query"] = "bees"


@pytest.mark.parametrize(("label", "mode"), CASES, ids=[f"{op}-{m.value}" for op, m in CASES])
def test_fuzz_no_5xx_and_schema_conformance(label, mode, fuzz_schema, fuzz_target, bystander_before):
    _, key, _ = fuzz_target
    op = next(r.ok() for r in fuzz_schema.get_all_operations() if r.ok().label == label)
    seen: list[int] = []

    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(case=op.as_strategy(generation_mode=mode))
    def run(case):
        if case.path_parameters and case.path_parameters.get("user_id") == "bystander":
            case.path_parameters["user_id"] = "fuzzer"
        if mode is GenerationMode.POSITIVE:
            _valid_where_the_schema_cannot_say(label, case)
        # the spec declares both ways to send the key, so schemathesis may generate either: give both
        response = case.call_and_validate(headers={"X-API-Key": key, "Authorization": f"Bearer {key}"}, checks=CHECKS)
        seen.append(response.status_code)

    run()
    assert seen, f"{label}: no request was sent"
    print(label, mode.value, dict(sorted(Counter(seen).items())))
    assert 401 not in seen, "the API key was not accepted"
    if mode is GenerationMode.POSITIVE and "{memory_id}" not in label and "{job_id}" not in label:
        assert any(200 <= s < 300 for s in seen), f"{label}: no valid request reached the service: {Counter(seen)}"


def test_fuzzing_left_the_bystander_unchanged(fuzz_target, bystander_before):
    """Runs after the fuzz pass (same module, defined later): nothing of another user changed."""
    _, _, svc = fuzz_target
    assert asyncio.run(_export(svc, "bystander")) == bystander_before
