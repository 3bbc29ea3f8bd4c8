"""Helpers for provider tests that answer AWS calls at the HTTP or Stubber level."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import urllib3
from botocore.awsrequest import AWSPreparedRequest, AWSResponse


def raw_http_response(
    request: AWSPreparedRequest, body: bytes, *, status: int = 200, headers: dict[str, str] | None = None
) -> AWSResponse:
    """An HTTP response as botocore would get it from the wire (for ``before-send`` handlers)."""
    all_headers = {"Content-Type": "application/json", "Content-Length": str(len(body))}
    all_headers.update(headers or {})
    raw = urllib3.HTTPResponse(body=io.BytesIO(body), headers=all_headers, status=status, preload_content=False)
    return AWSResponse(request.url, status, all_headers, raw)


SendHandler = Callable[[AWSPreparedRequest], AWSResponse]


def on_send(client: Any, operation: str, handler: SendHandler) -> list[AWSPreparedRequest]:
    """Answer ``operation`` of ``client`` at the HTTP level; returns the list of requests seen.

    botocore serialises, signs and later parses exactly as in production; only the socket is
    replaced by ``handler``.
    """
    seen: list[AWSPreparedRequest] = []
    service = client.meta.service_model.service_id.hyphenize()

    def _handler(request: AWSPreparedRequest, **_: Any) -> AWSResponse:
        seen.append(request)
        return handler(request)

    client.meta.events.register(f"before-send.{service}.{operation}", _handler)
    return seen


class JsonBody:
    """Stubber parameter matcher: equal to a bytes/str body whose parsed JSON equals ``expected``."""

    def __init__(self, expected: Any) -> None:
        self.expected = expected
        self.seen: list[Any] = []

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (bytes, str)):
            return False
        parsed = json.loads(other)
        self.seen.append(parsed)
        return parsed == self.expected

    def __repr__(self) -> str:
        return f"JsonBody({self.expected!r})"
