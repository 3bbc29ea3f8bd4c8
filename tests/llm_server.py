"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1, for pipeline tests.

The pipelines talk to it through the real :class:`OpenAICompatibleLLM` over HTTP, so the
whole request/response path is exercised. A test gives a ``responder(schema_name, request)``
that returns the JSON the "model" answers (a dict), or raises :class:`Reply` to send a raw
status/body (errors, malformed output).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Reply(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(status)
        self.status, self.body = status, body


Responder = Callable[[str, dict[str, Any]], dict[str, Any]]


class ScriptedLLMServer:
    def __init__(self, responder: Responder) -> None:
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                name = body.get("response_format", {}).get("json_schema", {}).get("name", "")
                try:
                    content = json.dumps(server.responder(name, body))
                    status, payload = (
                        200,
                        json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}),
                    )
                except Reply as r:
                    status, payload = r.status, r.body
                data = payload.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> ScriptedLLMServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def prompts(self, schema_name: str) -> list[str]:
        out = []
        for r in self.requests:
            if r.get("response_format", {}).get("json_schema", {}).get("name") == schema_name:
                out.append(r["messages"][-1]["content"])
        return out
