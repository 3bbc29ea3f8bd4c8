"""The CLI prints what the HTTP API answers: a search's JSON has the same keys at every level (plus, for one
release, each memory's fields repeated at the top of its result, deprecated), and ``messages`` prints a
session's messages as they were sent, in timestamp order."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from cognis_memory.cli import main
from cognis_memory.serialization import memory_to_dict


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def data_dir(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "data"
    monkeypatch.setenv("COGNIS_DATA_DIR", str(d))
    for var in ("COGNIS_STORE", "COGNIS_LLM", "COGNIS_RERANKER", "COGNIS_API_KEYS", "COGNIS_RECIPE"):
        monkeypatch.delenv(var, raising=False)
    return d


def _http_search(data_dir: Path, embedder: Any, body: dict[str, Any]) -> dict[str, Any]:
    """The same search through the HTTP API, over the store the CLI wrote."""
    from cognis_memory.api.app import create_app
    from cognis_memory.config import Settings
    from cognis_memory.service import MemoryService
    from cognis_memory.stores.embedded import EmbeddedStore

    async def go() -> dict[str, Any]:
        settings = Settings(data_dir=data_dir, run_worker=False, api_keys="k-cli=default", telemetry="off")
        store = EmbeddedStore(
            settings.embedded.resolved_sqlite_path, dim=embedder.dim, dim_short=settings.encoder.dim_short
        )
        async with MemoryService(settings, store=store, embedder=embedder) as svc:
            transport = httpx.ASGITransport(app=create_app(svc, manage_lifecycle=False))
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                r = await c.post("/v1/users/alice/search", json=body, headers={"Authorization": "Bearer k-cli"})
                assert r.status_code == 200, r.text
                return r.json()

    return asyncio.run(go())


def _keys(value: Any, path: str = "") -> set[str]:
    """Every key path of a JSON value (list items under ``[]``), e.g. ``results[].memory.content``."""
    if isinstance(value, dict):
        return {p for k, v in value.items() for p in {f"{path}.{k}".lstrip("."), *_keys(v, f"{path}.{k}".lstrip("."))}}
    if isinstance(value, list):
        return {p for item in value for p in _keys(item, f"{path}[]")}
    return set()


@pytest.mark.parametrize("explain", [False, True])
def test_cli_search_has_the_http_shape_and_the_deprecated_fields_on_top(data_dir, capsys, embedder, explain):
    for text, ts in (("I moved to Lisbon in May", "2025-06-01T10:00:00Z"), ("I live in Porto", "2024-01-01T10:00:00Z")):
        assert run(capsys, "add", text, "--user", "alice", "--speaker", "Alice", "--timestamp", ts)[0] == 0
    query = "Where does Alice live?"
    code, out, err = run(capsys, "search", query, "--user", "alice", *(["--explain"] if explain else []))
    assert code == 0, err
    cli = json.loads(out)
    http = _http_search(data_dir, embedder, {"query": query, "explain": explain})

    assert len(http["results"]) == 2
    # Each CLI result is the HTTP result plus, deprecated, the memory's fields (as export writes them) on top.
    deprecated = set(memory_to_dict(_a_memory())) - set(http["results"][0])
    assert "content" in deprecated and "memory" not in deprecated
    assert all(set(c) == set(h) | deprecated for c, h in zip(cli["results"], http["results"], strict=True))
    without_deprecated = cli | {"results": [{k: r[k] for k in r if k not in deprecated} for r in cli["results"]]}
    assert _keys(without_deprecated) == _keys(http)  # the same keys at every level, nested ones included
    assert "results[].memory.content" in _keys(cli) and "results[].content" in _keys(cli)
    for c, h in zip(cli["results"], http["results"], strict=True):
        assert c["memory"] == h["memory"] and c["score"] == pytest.approx(h["score"])
        assert c["content"] == c["memory"]["content"] and c["id"] == c["memory"]["id"]  # deprecated, same values
        assert (c["scores"] is None) is (not explain) and (h["scores"] is None) is (not explain)


def _a_memory():
    from cognis_memory.domain import Category, Memory

    return Memory("t", "u", "x", Category.HOBBIES)


def test_messages_prints_a_sessions_messages_as_sent_in_timestamp_order(data_dir, capsys):
    said = [("third", "2025-01-03T00:00:00Z"), ("first", "2025-01-01T00:00:00Z"), ("second", "2025-01-02T00:00:00Z")]
    for text, ts in said:
        run(capsys, "add", text, "--user", "ana", "--speaker", "Ana", "--timestamp", ts, "--session", "s1")
    run(capsys, "add", "elsewhere", "--user", "ana", "--session", "s2")
    run(capsys, "add", "not hers", "--user", "bo", "--session", "s1")

    code, out, err = run(capsys, "messages", "--user", "ana", "--session", "s1")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["content"], r["speaker"], r["role"], r["session_id"]) for r in rows] == [
        ("first", "Ana", "user", "s1"), ("second", "Ana", "user", "s1"), ("third", "Ana", "user", "s1")
    ]  # fmt: skip
    assert "listed 3 messages" in err
    code, out, _ = run(capsys, "messages", "--user", "ana", "--session", "s1", "--limit", "2")
    assert [json.loads(line)["content"] for line in out.splitlines()] == ["first", "second"]
    code, _, err = run(capsys, "messages", "--user", "ana", "--session", "bad session")
    assert code != 0 and "session_id" in err
