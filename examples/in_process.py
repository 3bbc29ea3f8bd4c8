"""Use cognis-memory in-process: no server, the embedded store, the offline MiniLM model.

Run it from the repository root::

    COGNIS_DATA_DIR=/tmp/cognis-demo python examples/in_process.py

It imports ``examples/demo_conversation.jsonl`` (two sessions of a user who moves from
Porto to Lisbon and changes jobs), then asks a few questions, including a temporal one
and a history one. Without an LLM configured every message is stored as a raw memory;
with ``COGNIS_LLM=bedrock`` or ``openai`` facts are extracted as well. Re-running it is
safe: messages carry client ids, so a second import stores nothing new.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from datetime import datetime
from pathlib import Path

from cognis_memory.service import MemoryService, MessageBody

DEMO = Path(__file__).with_name("demo_conversation.jsonl")
TENANT = "demo"

QUESTIONS = [
    # (question, the "now" it is asked at, include earlier versions)
    ("Where does Maya live?", "2025-03-18T12:00:00+00:00", False),
    ("What job does Maya have now?", "2025-03-18T12:00:00+00:00", False),
    ("What did Maya do last weekend?", "2025-03-18T12:00:00+00:00", False),
    ("Where did Maya work before?", "2025-03-18T12:00:00+00:00", True),
    ("Where did Maya live before?", "2025-03-18T12:00:00+00:00", True),
]


def load_demo() -> tuple[str, list[MessageBody]]:
    user_id, messages = "", []
    for line in DEMO.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        user_id = row["user_id"]
        messages.append(
            MessageBody(
                content=row["content"],
                speaker=row["speaker"],
                role=row["role"],
                timestamp=datetime.fromisoformat(row["timestamp"].replace("Z", "+00:00")),
                session_id=row["session_id"],
                client_message_id=row["client_message_id"],
            )
        )
    return user_id, messages


async def main() -> None:
    data_dir = os.environ.get("COGNIS_DATA_DIR") or tempfile.mkdtemp(prefix="cognis-demo-")
    user_id, messages = load_demo()
    # Quiet telemetry for a terminal: no EMF metric lines, only warnings from the JSON logger.
    quiet = {"metrics_enabled": False, "log_level": "WARNING"}
    async with MemoryService.from_settings(data_dir=data_dir, run_worker=False, **quiet) as svc:
        added = await svc.add_messages(TENANT, user_id, messages)
        await svc.worker.drain()  # extraction jobs, when an LLM is configured
        print(f"stored {sum(added.created)} new of {len(messages)} messages in {data_dir}")

        # Without an LLM nothing is extracted, so record the move by hand: the update writes
        # version 2 on top of the old memory, which stays in the history (git-like versions).
        current = await svc.list_memories(TENANT, user_id, limit=1000)
        for old in (m for m in current if "I live in Porto" in m.content):  # not there on a re-run
            moved = "Maya lives in Lisbon (moved in March 2025)."
            new = await svc.update_memory(TENANT, user_id, old.id, content=moved)
            print(f"updated memory {old.id[:8]}: v{new.version} replaces v{old.version}")

        for question, now, history in QUESTIONS:
            found = await svc.search(
                TENANT, user_id, question, limit=3, now=datetime.fromisoformat(now), include_history=history
            )
            kind = found.analysis.temporal
            print(f"\nQ: {question}  (temporal: {kind}, history: {found.analysis.history})")
            for rank, hit in enumerate(found.hits, start=1):
                when = hit.memory.effective_time.date().isoformat() if hit.memory.effective_time else "?"
                print(f"  {rank}. [{hit.score:.3f}] ({when}) {hit.memory.content}")
                for old in hit.history:
                    print(f"       earlier v{old.version}: {old.content}")


if __name__ == "__main__":
    asyncio.run(main())
