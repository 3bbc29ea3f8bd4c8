"""SageMakerReranker at the protocol level: botocore Stubber, raw HTTP via before-send, and moto."""

from __future__ import annotations

import io
import json
import time
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSPreparedRequest
from botocore.exceptions import ReadTimeoutError
from botocore.response import StreamingBody
from botocore.stub import Stubber

from cognis_memory.errors import DependencyUnavailableError
from cognis_memory.providers.base import Reranker
from cognis_memory.providers.rerankers import SageMakerReranker, parse_reranker_scores
from tests.providers.provider_test_helpers import JsonBody, on_send, raw_http_response

ENDPOINT = "cognis-bge-reranker"
QUERY = "what does alice eat"
DOCS = ["Alice is vegan.", "Bob plays chess.", "Alice had pizza yesterday."]

pytestmark = pytest.mark.usefixtures("aws_env")


@pytest.fixture
def client(aws_env: None) -> Any:
    return boto3.client("sagemaker-runtime", region_name="us-east-1")


def _body(payload: Any) -> StreamingBody:
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return StreamingBody(io.BytesIO(data), len(data))


def _expected_params(body: JsonBody) -> dict[str, Any]:
    return {
        "EndpointName": ENDPOINT,
        "ContentType": "application/json",
        "Accept": "application/json",
        "Body": body,
    }


TEI_REQUEST = {"query": QUERY, "texts": DOCS, "truncate": True, "raw_scores": False}
HF_REQUEST = {
    "inputs": [{"text": QUERY, "text_pair": doc} for doc in DOCS],
    "parameters": {"truncation": True},
}


async def test_tei_request_and_answer_sorted_by_score(client: Any) -> None:
    reranker = SageMakerReranker(ENDPOINT, client=client)
    assert isinstance(reranker, Reranker)
    assert reranker.name == f"sagemaker:{ENDPOINT}"
    body = JsonBody(TEI_REQUEST)
    # TEI answers sorted by score, not in input order
    answer = [{"index": 0, "score": 0.91}, {"index": 2, "score": 0.40}, {"index": 1, "score": 0.02}]
    with Stubber(client) as stub:
        stub.add_response(
            "invoke_endpoint",
            {"Body": _body(answer), "ContentType": "application/json"},
            _expected_params(body),
        )
        scores = await reranker.rerank(QUERY, DOCS)
        stub.assert_no_pending_responses()
    assert scores == [0.91, 0.02, 0.40]
    assert body.seen == [TEI_REQUEST]


async def test_hf_pairs_request_and_pipeline_answer(client: Any) -> None:
    reranker = SageMakerReranker(ENDPOINT, client=client, payload_format="hf_pairs")
    body = JsonBody(HF_REQUEST)
    answer = [{"label": "LABEL_0", "score": s} for s in (0.7, 0.1, 0.3)]
    with Stubber(client) as stub:
        stub.add_response("invoke_endpoint", {"Body": _body(answer)}, _expected_params(body))
        assert await reranker.rerank(QUERY, DOCS) == [0.7, 0.1, 0.3]
        stub.assert_no_pending_responses()


async def test_answers_are_parsed_by_shape_whatever_the_request_format(client: Any) -> None:
    # a TEI-shaped answer to an hf_pairs request, and the all-labels nested shape to a TEI request
    hf = SageMakerReranker(ENDPOINT, client=client, payload_format="hf_pairs")
    tei = SageMakerReranker(ENDPOINT, client=client)
    with Stubber(client) as stub:
        stub.add_response("invoke_endpoint", {"Body": _body([{"index": 1, "score": 5}, {"index": 0, "score": -1}])})
        stub.add_response(
            "invoke_endpoint",
            {"Body": _body([[{"label": "LABEL_0", "score": 0.25}], [{"label": "LABEL_0", "score": 0.5}]])},
        )
        assert await hf.rerank(QUERY, DOCS[:2]) == [-1.0, 5.0]
        assert await tei.rerank(QUERY, DOCS[:2]) == [0.25, 0.5]


async def test_no_documents_makes_no_call(client: Any) -> None:
    reranker = SageMakerReranker(ENDPOINT, client=client)
    with Stubber(client) as stub:  # any call would raise: nothing is queued
        assert await reranker.rerank(QUERY, []) == []
        stub.assert_no_pending_responses()


@pytest.mark.parametrize(
    ("code", "status"), [("ModelError", 424), ("ServiceUnavailable", 503), ("ValidationError", 400)]
)
async def test_client_errors_are_dependency_unavailable(client: Any, code: str, status: int) -> None:
    reranker = SageMakerReranker(ENDPOINT, client=client)
    with Stubber(client) as stub:
        stub.add_client_error(
            "invoke_endpoint", service_error_code=code, service_message="boom", http_status_code=status
        )
        with pytest.raises(DependencyUnavailableError) as info:
            await reranker.rerank(QUERY, DOCS)
    assert info.value.dependency == "reranker"
    assert code in str(info.value) and str(status) in str(info.value) and ENDPOINT in str(info.value)


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"<html>502 Bad Gateway</html>", "non-JSON"),
        (b"\xff\xfe\x00", "non-JSON"),
        ({"error": "Input validation error"}, "expected a JSON list"),
        ([{"index": 0, "score": 0.1}, {"index": 1, "score": 0.2}], "expected 3 scores, got 2"),
        ([0.1, 0.2, 0.3, 0.4], "expected 3 scores, got 4"),
        ([{"index": 0, "score": 0.1}, {"index": 0, "score": 0.2}, {"index": 2, "score": 0.3}], "appears twice"),
        ([{"index": 0, "score": 0.1}, {"index": 1, "score": 0.2}, {"index": 3, "score": 0.3}], "out of range"),
        ([{"label": "LABEL_0"}, {"label": "LABEL_0"}, {"label": "LABEL_0"}], "unrecognised"),
        (["a", "b", "c"], "unrecognised"),
    ],
)
async def test_unusable_answers_are_dependency_unavailable(client: Any, payload: Any, reason: str) -> None:
    reranker = SageMakerReranker(ENDPOINT, client=client)
    with Stubber(client) as stub:
        stub.add_response("invoke_endpoint", {"Body": _body(payload)})
        with pytest.raises(DependencyUnavailableError, match=reason) as info:
            await reranker.rerank(QUERY, DOCS)
    assert info.value.dependency == "reranker"


async def test_slow_endpoint_times_out(client: Any) -> None:
    def slow(request: AWSPreparedRequest) -> Any:
        time.sleep(0.6)
        return raw_http_response(request, b"[0.1, 0.2, 0.3]")

    seen = on_send(client, "InvokeEndpoint", slow)
    reranker = SageMakerReranker(ENDPOINT, client=client, timeout_ms=150)
    started = time.perf_counter()
    with pytest.raises(DependencyUnavailableError, match="within 150 ms") as info:
        await reranker.rerank(QUERY, DOCS)
    elapsed = time.perf_counter() - started
    assert info.value.dependency == "reranker"
    assert elapsed < 0.45  # gave up at the deadline, did not wait for the answer
    assert len(seen) == 1  # the request did go out


async def test_botocore_read_timeout_is_dependency_unavailable(client: Any) -> None:
    def timing_out(request: AWSPreparedRequest) -> Any:
        raise ReadTimeoutError(endpoint_url=request.url)

    on_send(client, "InvokeEndpoint", timing_out)
    reranker = SageMakerReranker(ENDPOINT, client=client)
    with pytest.raises(DependencyUnavailableError, match="unreachable"):
        await reranker.rerank(QUERY, DOCS)


async def test_own_client_has_the_time_box_and_sends_the_right_http_request(aws_env: None) -> None:
    reranker = SageMakerReranker(ENDPOINT, region="eu-west-1", timeout_ms=750, max_attempts=1)
    client = reranker._client
    assert client.meta.region_name == "eu-west-1"
    assert client.meta.config.connect_timeout == pytest.approx(0.75)
    assert client.meta.config.read_timeout == pytest.approx(0.75)
    assert client.meta.config.retries == {"mode": "standard", "total_max_attempts": 1}

    seen = on_send(
        client, "InvokeEndpoint", lambda r: raw_http_response(r, b'[{"index":1,"score":0.5},{"index":0,"score":0.25}]')
    )
    assert await reranker.rerank("q", ["a", "b"]) == [0.25, 0.5]
    (request,) = seen
    assert request.method == "POST"
    assert request.url == f"https://runtime.sagemaker.eu-west-1.amazonaws.com/endpoints/{ENDPOINT}/invocations"
    assert request.headers["Content-Type"] == b"application/json"
    assert request.headers["Accept"] == b"application/json"
    assert json.loads(request.body) == {"query": "q", "texts": ["a", "b"], "truncate": True, "raw_scores": False}


async def test_http_5xx_from_the_wire_is_dependency_unavailable(aws_env: None) -> None:
    reranker = SageMakerReranker(ENDPOINT, region="us-east-1", max_attempts=1)
    error = json.dumps({"__type": "ServiceUnavailable", "message": "scaling"}).encode()
    seen = on_send(
        reranker._client,
        "InvokeEndpoint",
        lambda r: raw_http_response(r, error, status=503, headers={"Content-Type": "application/x-amz-json-1.1"}),
    )
    with pytest.raises(DependencyUnavailableError, match="503"):
        await reranker.rerank(QUERY, DOCS)
    assert len(seen) == 1  # max_attempts=1: no retry inside the time box


async def test_many_documents_are_split_into_requests_and_reassembled(client: Any) -> None:
    def score_by_length(request: AWSPreparedRequest) -> Any:
        texts = json.loads(request.body)["texts"]
        answer = sorted(({"index": i, "score": float(len(t))} for i, t in enumerate(texts)), key=lambda x: -x["score"])
        return raw_http_response(request, json.dumps(answer).encode())

    seen = on_send(client, "InvokeEndpoint", score_by_length)
    docs = ["x" * n for n in (5, 1, 9, 3, 7, 2, 8)]
    reranker = SageMakerReranker(ENDPOINT, client=client, max_documents=3)
    assert await reranker.rerank(QUERY, docs) == [5.0, 1.0, 9.0, 3.0, 7.0, 2.0, 8.0]
    sizes = sorted(len(json.loads(r.body)["texts"]) for r in seen)
    assert sizes == [1, 3, 3]


async def test_one_failing_chunk_fails_the_call(client: Any) -> None:
    def fail_second(request: AWSPreparedRequest) -> Any:
        texts = json.loads(request.body)["texts"]
        if "bad" in texts:
            return raw_http_response(request, b"not json")
        return raw_http_response(request, json.dumps([0.5] * len(texts)).encode())

    on_send(client, "InvokeEndpoint", fail_second)
    reranker = SageMakerReranker(ENDPOINT, client=client, max_documents=2)
    with pytest.raises(DependencyUnavailableError, match="non-JSON"):
        await reranker.rerank(QUERY, ["a", "b", "bad", "c"])


async def test_moto_results_api(aws_env: None) -> None:
    moto = pytest.importorskip("moto")
    requests = pytest.importorskip("requests")
    # moto keeps one queue of results per account and region, and while mock_aws is active it answers
    # every InvokeEndpoint in the process. A region no other test uses keeps a late call from an
    # earlier test's worker thread from taking this test's result (seen once in a full CI run: the
    # reranker got moto's default b"body").
    region = "ap-southeast-2"
    with moto.mock_aws():
        answer = json.dumps([{"index": 1, "score": 0.8}, {"index": 0, "score": 0.3}])
        resp = requests.post(
            "http://motoapi.amazonaws.com/moto-api/static/sagemaker/endpoint-results",
            json={"region": region, "results": [{"Body": answer, "ContentType": "application/json"}]},
        )
        assert resp.status_code == 201
        reranker = SageMakerReranker(ENDPOINT, region=region)
        assert await reranker.rerank("q", ["a", "b"]) == [0.3, 0.8]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"endpoint_name": ""}, "sagemaker_endpoint"),
        ({"timeout_ms": 0}, "timeout"),
        ({"max_documents": 0}, "max_documents"),
        ({"payload_format": "json"}, "payload_format"),
        ({"max_attempts": 0}, "max_attempts"),
    ],
)
def test_invalid_construction(client: Any, kwargs: dict[str, Any], match: str) -> None:
    args: dict[str, Any] = {"endpoint_name": ENDPOINT, "client": client, **kwargs}
    with pytest.raises(ValueError, match=match):
        SageMakerReranker(**args)


def test_parse_scores_shapes() -> None:
    assert parse_reranker_scores([], 0) == []
    assert parse_reranker_scores([1, 2.5], 2) == [1.0, 2.5]
    assert parse_reranker_scores([{"index": 1, "score": 1}, {"index": 0, "score": 2}], 2) == [2.0, 1.0]
    assert parse_reranker_scores([{"score": 3, "label": "LABEL_0"}], 1) == [3.0]
    with pytest.raises(ValueError, match=r"unrecognised"):
        parse_reranker_scores([float("nan")], 1)
    with pytest.raises(ValueError, match="unrecognised"):
        parse_reranker_scores([True], 1)
    with pytest.raises(ValueError, match="some scores"):
        parse_reranker_scores([{"index": 0, "score": 1}, {"score": 2}], 2)
    with pytest.raises(ValueError, match="out of range"):
        parse_reranker_scores([{"index": True, "score": 1}], 1)
