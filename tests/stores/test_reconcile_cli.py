"""`cognis-memory reconcile` against the real dual store: reports planted drift, repairs it."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from cognis_memory.cli import main


@pytest.fixture
def dual_env(monkeypatch, postgres_server, opensearch_server, tmp_path):
    prefix = f"rc{uuid.uuid4().hex[:8]}"
    db = f"rc_{uuid.uuid4().hex[:8]}"
    postgres_server.create_database(db)
    monkeypatch.setenv("COGNIS_STORE", "dual")
    monkeypatch.setenv("COGNIS_POSTGRES_DSN", postgres_server.dsn_for(db))
    monkeypatch.setenv("COGNIS_OPENSEARCH_URL", opensearch_server.url)
    monkeypatch.setenv("COGNIS_OPENSEARCH_INDEX_PREFIX", prefix)
    monkeypatch.setenv("COGNIS_METRICS_ENABLED", "false")
    return opensearch_server.url, prefix


def _run(capsys, *argv: str) -> tuple[int, dict]:
    code = main(list(argv))
    out = capsys.readouterr().out
    return code, json.loads(out[out.index("{") :])


def test_reconcile_reports_then_repairs_drift(dual_env, capsys) -> None:
    url, prefix = dual_env
    for text in ("I keep bees on the roof", "My bees made honey in July"):
        assert main(["add", "--user", "u1", text]) == 0
    capsys.readouterr()
    code, report = _run(capsys, "reconcile")
    assert (code, report["drift"]) == (0, 0), report

    # plant drift behind the store's back: remove one keyword document from OpenSearch
    alias = f"{prefix}-keyword"
    httpx.post(f"{url}/{alias}/_refresh")
    hits = httpx.post(f"{url}/{alias}/_search", json={"query": {"match_all": {}}}).json()["hits"]["hits"]
    assert len(hits) == 2
    r = httpx.delete(f"{url}/{hits[0]['_index']}/_doc/{hits[0]['_id']}", params={"refresh": "true"})
    assert r.status_code == 200

    code, report = _run(capsys, "reconcile")
    assert code == 1 and report["drift"] == 1
    code, report = _run(capsys, "reconcile", "--repair")
    assert code == 0 and report["drift"] == 1
    code, report = _run(capsys, "reconcile")
    assert code == 0 and report["drift"] == 0


def test_reconcile_refuses_other_stores(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("COGNIS_METRICS_ENABLED", "false")
    assert main(["reconcile", "--data-dir", str(tmp_path)]) == 2
    assert "reconcile" in capsys.readouterr().err
