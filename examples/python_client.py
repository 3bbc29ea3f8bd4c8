"""Talk to a running cognis-memory server over HTTP with httpx: add messages, then search.

Start a server first, for example::

    COGNIS_DATA_DIR=/tmp/cognis-demo COGNIS_API_KEYS='demo-key=demo' cognis-memory serve --port 8080

then run::

    COGNIS_URL=http://127.0.0.1:8080 COGNIS_API_KEY=demo-key python examples/python_client.py

An agent does the same after each turn (post the messages) and before answering (search).
"""

from __future__ import annotations

import os
import sys

import httpx

BASE_URL = os.environ.get("COGNIS_URL", "http://127.0.0.1:8080")
API_KEY = os.environ.get("COGNIS_API_KEY", "demo-key")
USER = os.environ.get("COGNIS_USER", "demo-user")


def main() -> int:
    headers = {"Authorization": f"Bearer {API_KEY}"}
    with httpx.Client(base_url=BASE_URL, headers=headers, timeout=30) as client:
        added = client.post(
            f"/v1/users/{USER}/messages",
            json={
                "messages": [
                    {
                        "content": "I just adopted a grey cat called Pixel.",
                        "speaker": "Maya",
                        "timestamp": "2025-03-20T10:00:00Z",
                        "session_id": "client-demo",
                        "client_message_id": "client-demo-1",
                    },
                    {
                        "content": "Pixel only eats salmon-flavoured food.",
                        "speaker": "Maya",
                        "timestamp": "2025-03-20T10:01:00Z",
                        "session_id": "client-demo",
                        "client_message_id": "client-demo-2",
                    },
                ]
            },
        )
        if added.status_code >= 400:
            print(f"add failed: {added.status_code} {added.text}", file=sys.stderr)
            return 1
        body = added.json()
        created = sum(m["created"] for m in body["messages"])
        print(f"added {created} new message(s); request id {added.headers.get('X-Request-Id')}")

        found = client.post(f"/v1/users/{USER}/search", json={"query": "What is the name of Maya's cat?", "limit": 3})
        if found.status_code >= 400:
            print(f"search failed: {found.status_code} {found.text}", file=sys.stderr)
            return 1
        for rank, hit in enumerate(found.json()["results"], start=1):
            print(f"{rank}. [{hit['score']:.3f}] {hit['memory']['content']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
