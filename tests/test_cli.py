"""The ``cognis-memory`` command line, in-process through ``main([...])`` and as real subprocesses."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from cognis_memory.cli import build_parser, main
from cognis_memory.retrieval.recipes import RECIPES

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "examples" / "demo_conversation.jsonl"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def db_rows(data_dir: Path, sql: str, params: tuple = ()) -> list[tuple]:
    path = data_dir / "memory.db"
    if not path.exists():
        return []
    with sqlite3.connect(path) as conn:
        return conn.execute(sql, params).fetchall()


def message_count(data_dir: Path, user: str | None = None) -> int:
    if not (data_dir / "memory.db").exists():
        return 0
    if user is None:
        return db_rows(data_dir, "SELECT count(*) FROM messages")[0][0]
    return db_rows(data_dir, "SELECT count(*) FROM messages WHERE user_id = ?", (user,))[0][0]


@pytest.fixture
def data_dir(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "data"
    monkeypatch.setenv("COGNIS_DATA_DIR", str(d))
    for var in ("COGNIS_STORE", "COGNIS_LLM", "COGNIS_RERANKER", "COGNIS_API_KEYS", "COGNIS_RECIPE"):
        monkeypatch.delenv(var, raising=False)
    return d


def test_add_then_search_prints_json(data_dir, capsys):
    code, out, err = run(
        capsys, "add", "I moved to Lisbon last month", "--user", "alice", "--speaker", "Alice",
        "--timestamp", "2025-05-10T10:00:00Z", "--client-id", "turn-1", "--session", "s1",
    )  # fmt: skip
    assert code == 0, err
    added = json.loads(out)  # stdout is only the JSON (logs and metrics go to stderr)
    (memory,) = added["memories"]
    assert memory["content"] == "I moved to Lisbon last month"  # as said: speaker and dates are fields
    assert memory["speaker"] == "Alice"
    assert [(e["text"], e["date"]) for e in memory["time_expressions"]] == [("last month", "April 2025")]
    assert (memory["user_id"], memory["tenant_id"], memory["session_id"]) == ("alice", "default", "s1")
    logged = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert [r["event"] for r in logged if "event" in r] == ["memory_ingest"]

    code, out, _ = run(capsys, "add", "I moved to Lisbon last month", "--user", "alice", "--client-id", "turn-1")
    assert code == 0 and json.loads(out)["memories"] == []  # idempotent on the client id
    assert message_count(data_dir, "alice") == 1

    code, out, err = run(capsys, "search", "Where does Alice live?", "--user", "alice", "--limit", "3")
    assert code == 0, err
    found = json.loads(out)
    assert [r["memory"]["id"] for r in found["results"]] == [memory["id"]]  # the HTTP API's shape
    assert [r["id"] for r in found["results"]] == [memory["id"]]  # and, deprecated, the fields at the top
    assert found["results"][0]["score"] > 0 and found["results"][0]["history"] == []
    assert found["query_analysis"]["temporal"] == "none"
    assert found["explain"] is None and found["results"][0]["scores"] is None

    code, out, _ = run(capsys, "search", "Where did Alice move last month?", "--user", "alice", "--explain",
                       "--now", "2025-05-20T00:00:00Z")  # fmt: skip
    found = json.loads(out)
    assert found["query_analysis"]["temporal"] == "explicit"
    assert "temporal_boost_ms" in found["explain"]["stage_durations"]
    assert {"vector", "rrf"} <= set(found["results"][0]["scores"])

    # another tenant sees nothing
    code, out, _ = run(capsys, "search", "Lisbon", "--user", "alice", "--tenant", "other")
    assert code == 0 and json.loads(out)["results"] == []


def test_data_dir_flag_beats_the_environment(data_dir, tmp_path, capsys):
    flagged = tmp_path / "flagged"
    code, _, err = run(capsys, "add", "hello there", "--user", "u", "--data-dir", str(flagged))
    assert code == 0, err
    assert message_count(flagged, "u") == 1
    assert not (data_dir / "memory.db").exists()


def test_bad_input_on_the_command_line_names_the_field(data_dir, capsys):
    code, _, err = run(capsys, "add", "   ", "--user", "u")
    assert code == 2 and "messages[0].content: must not be empty" in err
    code, _, err = run(capsys, "add", "hi", "--user", "u", "--timestamp", "last tuesday")
    assert code == 2 and "timestamp: not an ISO 8601 time" in err
    code, _, err = run(capsys, "search", "hi", "--user", "u", "--limit", "0")
    assert code == 2 and "limit: must be an integer between 1 and 100" in err
    code, _, err = run(capsys, "search", "hi", "--user", "u", "--use-recipe", "magic")
    assert code == 2 and "recipe: unknown recipe 'magic'" in err
    code, _, err = run(capsys, "add", "hi", "--user", "u" * 200)
    assert code == 2 and "user_id" in err
    assert message_count(data_dir) == 0


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_import_json_and_jsonl_files(data_dir, tmp_path, capsys):
    # JSONL: the demo conversation (user id in every line)
    code, out, err = run(capsys, "import", str(DEMO), "--quiet")
    assert code == 0, err
    assert json.loads(out) == {"messages": 30, "created": 30, "extraction_jobs_run": 0}
    assert message_count(data_dir, "demo-user") == 30
    sessions = db_rows(data_dir, "SELECT session_id, count(*) FROM messages GROUP BY session_id ORDER BY 1")
    assert sessions == [("session-1", 16), ("session-2", 14)]
    # re-importing stores nothing new (client message ids)
    code, out, _ = run(capsys, "import", str(DEMO), "--quiet")
    assert json.loads(out)["created"] == 0 and message_count(data_dir, "demo-user") == 30

    # JSON object with a user id and a "text" alias
    obj = _write(tmp_path / "bob.json", json.dumps({
        "user_id": "bob",
        "messages": [
            {"content": "I am training for a marathon", "speaker": "Bob", "timestamp": "2025-01-02T08:00:00Z"},
            {"text": "My knee hurts after long runs", "speaker": "Bob", "role": "user"},
        ],
    }))  # fmt: skip
    code, out, err = run(capsys, "import", str(obj), "--quiet")
    assert code == 0, err
    assert json.loads(out)["created"] == 2 and message_count(data_dir, "bob") == 2

    # JSON list of messages, user from --user
    lst = _write(tmp_path / "carol.json", json.dumps([{"content": "I speak Finnish"}, {"content": "I knit"}]))
    code, out, err = run(capsys, "import", str(lst), "--user", "carol", "--tenant", "acme", "--quiet")
    assert code == 0, err
    assert db_rows(data_dir, "SELECT tenant_id, count(*) FROM messages WHERE user_id = 'carol'") == [("acme", 2)]

    code, out, _ = run(capsys, "search", "What language does Carol speak?", "--user", "carol", "--tenant", "acme")
    assert json.loads(out)["results"][0]["memory"]["content"] == "I speak Finnish"


BAD_FILES = [
    ("bad-timestamp.jsonl", '{"content": "ok"}\n{"content": "x", "timestamp": "not-a-date"}\n',
     "messages[1].timestamp"),
    ("unknown-field.jsonl", '{"content": "ok"}\n{"content": "x", "colour": "red"}\n', "messages[1].colour"),
    ("empty-content.jsonl", '{"content": "ok"}\n{"content": "   "}\n', "messages[1].content"),
    ("bad-scope.jsonl", '{"content": "ok"}\n{"content": "x", "scope": "GLOBAL"}\n', "messages[1].scope"),
    ("bad-role.jsonl", '{"content": "ok"}\n{"content": "x", "role": "god"}\n', "messages[1].role"),
    ("speaker-number.jsonl", '{"content": "ok"}\n{"content": "x", "speaker": 5}\n', "messages[1].speaker"),
    ("context-no-session.jsonl", '{"content": "ok"}\n{"content": "x", "scope": "CONTEXT"}\n',
     "messages[1].session_id"),
    ("year-9999.jsonl", '{"content": "ok"}\n{"content": "x", "timestamp": "9999-01-01T00:00:00Z"}\n',
     "messages[1].timestamp"),
    ("broken-line.jsonl", '{"content": "ok"}\n{"content": "x"\n', "line 2"),
    ("not-an-object.json", '[{"content": "ok"}, "just a string"]', "messages[1]"),
    ("missing-user.json", '[{"content": "ok"}]', "messages[0].user_id"),
    ("bad-user-id.jsonl", '{"content": "ok", "user_id": "a\\u0007b"}\n', "user_id"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "text", "field"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_import_of_a_malformed_file_fails_naming_the_field_and_stores_nothing(
    data_dir, tmp_path, capsys, name, text, field
):
    path = _write(tmp_path / name, text)
    args = ["import", str(path), "--quiet"] + ([] if name == "missing-user.json" else ["--user", "u"])
    code, out, err = run(capsys, *args)
    assert code != 0
    assert out == ""
    assert field in err, err
    assert message_count(data_dir) == 0


def test_import_is_all_or_nothing_across_batches(data_dir, tmp_path, capsys):
    lines = [json.dumps({"content": f"note {i}"}) for i in range(200)]
    lines[150] = json.dumps({"content": ""})  # in the second batch of 128
    path = _write(tmp_path / "long.jsonl", "\n".join(lines) + "\n")
    code, _, err = run(capsys, "import", str(path), "--user", "u", "--quiet")
    assert code == 2
    assert "messages[150].content: must not be empty" in err  # the index in the file
    assert message_count(data_dir) == 0


def test_import_keeps_long_messages_and_never_drops_one_silently(data_dir, tmp_path, capsys):
    """A 42 KB turn (longer than the old 32 KB per-message limit, which failed the whole import) is imported
    as several memories; a message over the per-message limit fails the import naming its line."""
    long_turn = "\n\n".join(f"Step {i}: " + "check the configuration of the cluster node. " * 9 for i in range(100))
    assert 40_000 < len(long_turn.encode()) < 48_000
    lines = [json.dumps({"content": "short question", "role": "user"}),
             json.dumps({"content": long_turn, "role": "assistant"})]  # fmt: skip
    path = _write(tmp_path / "long.jsonl", "\n".join(lines) + "\n")
    code, out, err = run(capsys, "import", str(path), "--user", "u", "--quiet")
    assert code == 0, err
    assert json.loads(out)["created"] == 2 and message_count(data_dir, "u") == 2
    assert db_rows(data_dir, "SELECT count(*) FROM memories WHERE user_id = 'u'")[0][0] == 3  # 1 + 2 parts

    too_long = _write(tmp_path / "too-long.jsonl", lines[0] + "\n" + json.dumps({"content": "x" * (513 * 1024)}))
    code, out, err = run(capsys, "import", str(too_long), "--user", "v", "--quiet")
    assert code == 2 and out == "" and "messages[1].content: is 525312 bytes; the limit is 524288 bytes" in err
    assert message_count(data_dir, "v") == 0


def test_import_of_a_missing_file_fails(data_dir, tmp_path, capsys):
    code, _, err = run(capsys, "import", str(tmp_path / "nope.jsonl"), "--user", "u")
    assert code == 1 and "nope.jsonl" in err


def _update_first_memory(data_dir: Path, embedder, user: str, content: str) -> None:
    from cognis_memory.config import Settings
    from cognis_memory.service import MemoryService
    from cognis_memory.stores.embedded import EmbeddedStore
    from cognis_memory.telemetry.emitter import Telemetry

    async def go() -> None:
        import io

        settings = Settings(data_dir=data_dir, run_worker=False)
        store = EmbeddedStore(
            settings.embedded.resolved_sqlite_path, dim=embedder.dim, dim_short=settings.encoder.dim_short
        )
        telemetry = Telemetry(log_stream=io.StringIO(), metrics_stream=io.StringIO())
        async with MemoryService(settings, store=store, embedder=embedder, telemetry=telemetry) as svc:
            (first,) = [m for m in await svc.list_memories("default", user) if "Porto" in m.content]
            await svc.update_memory("default", user, first.id, content=content)

    asyncio.run(go())


def test_export_writes_jsonl_with_history(data_dir, tmp_path, capsys, embedder):
    run(capsys, "add", "I live in Porto", "--user", "maya")
    run(capsys, "add", "I have a beagle", "--user", "maya")
    run(capsys, "add", "I live in Oslo", "--user", "someone-else")
    _update_first_memory(data_dir, embedder, "maya", "Maya lives in Lisbon")

    code, out, err = run(capsys, "export", "--user", "maya")
    assert code == 0
    assert "exported 3 memories" in err
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 3 and all(r["user_id"] == "maya" for r in rows)
    by_version = {(r["content"], r["version"]): r for r in rows}
    old = by_version[("I live in Porto", 1)]
    new = by_version[("Maya lives in Lisbon", 2)]
    assert (old["is_current"], new["is_current"], new["replaces_id"]) == (False, True, old["id"])
    assert "embedding" not in old  # vectors are not exported

    target = tmp_path / "maya.jsonl"
    code, out, err = run(capsys, "export", "--user", "maya", "--current-only", "-o", str(target))
    assert code == 0 and out == "" and "exported 2 memories" in err
    current = [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()]
    assert {r["content"] for r in current} == {"Maya lives in Lisbon", "I have a beagle"}


def test_forget_user_needs_yes(data_dir, capsys):
    run(capsys, "add", "secret one", "--user", "gone")
    run(capsys, "add", "secret two", "--user", "kept")
    code, out, err = run(capsys, "forget-user", "--user", "gone")
    assert code == 2 and out == "" and "--yes" in err
    assert message_count(data_dir, "gone") == 1

    code, out, err = run(capsys, "forget-user", "--user", "gone", "--yes")
    assert code == 0, err
    assert json.loads(out)["memories"] == 1 and json.loads(out)["messages"] == 1
    assert message_count(data_dir, "gone") == 0 and message_count(data_dir, "kept") == 1
    code, out, _ = run(capsys, "export", "--user", "gone")
    assert out == ""


def test_api_key_create_prints_the_key_once_and_stores_only_its_hash(data_dir, capsys):
    code, out, err = run(capsys, "api-key", "create", "--tenant", "acme", "--name", "ci", "--read-only")
    assert code == 0, err
    created = json.loads(out)
    key = created["api_key"]
    assert (created["tenant_id"], created["read_only"]) == ("acme", True)
    assert key.startswith("cgm_") and len(key) > 40
    assert out.count(key) == 1 and key not in err

    rows = db_rows(data_dir, "SELECT key_hash, tenant_id, read_only, name FROM api_keys")
    assert rows == [(hashlib.sha256(key.encode()).hexdigest(), "acme", 1, "ci")]
    for f in data_dir.iterdir():  # the plain key is nowhere on disk (database, WAL)
        assert key.encode() not in f.read_bytes(), f

    code, out, _ = run(capsys, "api-key", "create", "--tenant", "acme")
    second = json.loads(out)["api_key"]
    assert second != key
    code, out, _ = run(capsys, "api-key", "revoke", "--key", key)
    assert json.loads(out) == {"revoked": True}
    assert [r[0] for r in db_rows(data_dir, "SELECT key_hash FROM api_keys")] == [
        hashlib.sha256(second.encode()).hexdigest()
    ]
    code, out, _ = run(capsys, "api-key", "revoke", "--key", key)
    assert json.loads(out)["revoked"] is False  # revoked already


def sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def test_api_key_revoke_reaches_the_keys_of_cognis_api_keys(data_dir, monkeypatch, capsys):
    """A listed key is revoked durably (a row in api_key_revocations, which every start respects);
    before, revoke deleted the start-up copy and the next start wrote it again."""
    monkeypatch.setenv("COGNIS_API_KEYS", "listed-key=acme,other-key=acme")
    code, out, err = run(capsys, "api-key", "revoke", "--key", "listed-key")
    assert code == 0 and json.loads(out) == {"revoked": True}, err
    assert db_rows(data_dir, "SELECT key_hash FROM api_key_revocations") == [(sha("listed-key"),)]
    assert db_rows(data_dir, "SELECT count(*) FROM api_keys") == [(0,)]  # the list is never copied into the store

    monkeypatch.delenv("COGNIS_API_KEYS")  # revoking where the list is not set: recorded all the same
    code, out, _ = run(capsys, "api-key", "revoke", "--key", "other-key")
    assert json.loads(out)["revoked"] is False and "recorded as revoked" in json.loads(out)["note"]
    assert sha("other-key") in {r[0] for r in db_rows(data_dir, "SELECT key_hash FROM api_key_revocations")}

    code, out, err = run(capsys, "api-key", "revoke")
    assert code == 2 and "--key" in err and out == ""
    monkeypatch.setenv("COGNIS_API_KEYS", "s3cret-cli-key-0123456789=acme:ro")
    code, out, err = run(capsys, "api-key", "create", "--tenant", "acme")
    assert code == 2 and "entry 1 of 1" in err and "unknown mode 'ro'" in err and out == ""
    assert "s3cret-cli-key-0123456789" not in err


def test_jobs_lists_a_tenants_jobs_as_jsonl(data_dir, capsys):
    from cognis_memory.domain import Job, JobStatus
    from cognis_memory.stores.embedded import EmbeddedStore

    plan = [("acme", "u1", JobStatus.DEAD), ("acme", "u2", JobStatus.DONE), ("acme", "u2", JobStatus.DEAD),
            ("globex", "u1", JobStatus.DEAD)]  # fmt: skip
    jobs = [Job(t, u, ["m"], status=st, attempts=2, last_error=f"{t} boom") for t, u, st in plan]

    async def seed() -> None:  # jobs as the worker leaves them (its dead-lettering: tests/ingest)
        store = EmbeddedStore(data_dir / "memory.db", dim=384, dim_short=128)
        await store.open()
        for job in jobs:
            await store.enqueue_job(job)
        await store.close()

    asyncio.run(seed())
    code, out, err = run(capsys, "jobs", "--tenant", "acme", "--status", "dead")
    assert code == 0, err
    listed = [json.loads(line) for line in out.splitlines()]
    dead = sorted((j for j in jobs if j.tenant_id == "acme" and j.status is JobStatus.DEAD), key=lambda j: j.id)
    assert [(j["id"], j["user_id"], j["status"], j["attempts"], j["last_error"]) for j in listed] == [
        (j.id, j.user_id, "dead", 2, "acme boom") for j in dead
    ]
    assert "listed 2 jobs" in err
    code, out, _ = run(capsys, "jobs", "--tenant", "acme")
    assert len(out.splitlines()) == 3 and "globex" not in out
    code, out, _ = run(capsys, "jobs", "--tenant", "acme", "--limit", "1")
    assert [json.loads(line)["id"] for line in out.splitlines()] == [min(j.id for j in jobs[:3])]
    code, _, err = run(capsys, "jobs", "--limit", "0")
    assert code == 2 and "--limit" in err
    with pytest.raises(SystemExit):
        main(["jobs", "--status", "zombie"])


def test_recipes_lists_every_recipe(capsys):
    code, out, _ = run(capsys, "recipes")
    assert code == 0
    listed = [line.split()[0] for line in out.splitlines()]
    assert listed == list(RECIPES)
    code, out, _ = run(capsys, "recipes", "-v")
    configs = [json.loads(line) for line in out.splitlines() if line.startswith("    ")]
    assert len(configs) == len(RECIPES) and configs[list(RECIPES).index("bm25")]["use_vector"] is False


def _subcommands() -> list[str]:
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    return list(sub.choices)


@pytest.mark.parametrize("command", _subcommands())
def test_every_subcommand_has_help(command, capsys):
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: cognis-memory {command}")


def test_subcommands_are_the_documented_ones():
    assert set(_subcommands()) >= {
        "serve", "add", "search", "import", "export", "forget-user", "api-key", "jobs", "recipes", "messages"
    }  # fmt: skip


def test_real_subprocesses(tmp_path):
    env = {**os.environ, "COGNIS_DATA_DIR": str(tmp_path / "data")}
    cli = Path(sys.executable).with_name("cognis-memory")
    r = subprocess.run([str(cli), "--help"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: cognis-memory")
    for command in ("serve", "add", "search", "import", "export", "forget-user", "api-key", "recipes"):
        assert command in r.stdout
    r = subprocess.run(
        [sys.executable, "-m", "cognis_memory", "recipes"], capture_output=True, text=True, env=env, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert [line.split()[0] for line in r.stdout.splitlines()] == list(RECIPES)
    r = subprocess.run([str(cli), "search"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 2 and "required" in r.stderr  # argparse: the query and --user are missing


# -- a misspelt --data-dir, a closed output pipe, the tenant a command wrote to ------------------
READ_COMMANDS = [
    ["search", "hi", "--user", "u"],
    ["export", "--user", "u"],
    ["forget-user", "--user", "u", "--yes"],
    ["jobs"],
]


@pytest.mark.parametrize("argv", READ_COMMANDS, ids=[a[0] for a in READ_COMMANDS])
def test_a_command_that_reads_refuses_a_data_dir_that_does_not_exist(data_dir, tmp_path, capsys, argv):
    run(capsys, "add", "I live in Porto", "--user", "u")  # the real store, in COGNIS_DATA_DIR
    typo = tmp_path / "dta"
    code, out, err = run(capsys, *argv, "--data-dir", str(typo))
    assert (code, out) == (2, "")
    assert err == f"error: --data-dir: {typo} does not exist; this command only reads, so check the path " \
        "(import or add creates a store)\n"  # fmt: skip
    assert not typo.exists()  # nothing was created

    typo.mkdir()  # a directory, but no store in it
    code, _, err = run(capsys, *argv, "--data-dir", str(typo))
    assert code == 2 and f"--data-dir: {typo} holds no store (no memory.db)" in err
    assert list(typo.iterdir()) == []

    code, _, err = run(capsys, *argv)  # the same command on the real store works
    assert code == 0, err


def test_the_environment_and_the_default_data_dir_are_named_when_refused(data_dir, tmp_path, monkeypatch, capsys):
    code, _, err = run(capsys, "export", "--user", "u")  # COGNIS_DATA_DIR names a directory not made yet
    assert code == 2 and err.startswith(f"error: COGNIS_DATA_DIR: {data_dir} does not exist")
    monkeypatch.delenv("COGNIS_DATA_DIR")
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "search", "hi", "--user", "u")
    assert code == 2 and err.startswith(f"error: --data-dir: .cognis ({tmp_path / '.cognis'}) does not exist")
    assert not (tmp_path / ".cognis").exists()


def test_a_command_that_writes_creates_the_store_and_says_where_and_for_which_tenant(data_dir, capsys):
    code, out, err = run(capsys, "add", "I live in Porto", "--user", "maya", "--telemetry", "off")
    assert code == 0, err
    assert err.splitlines() == [
        f"cognis-memory: creating a new store at {data_dir / 'memory.db'} (COGNIS_DATA_DIR)",
        "cognis-memory: stored for tenant 'default', user 'maya'; over HTTP an API key of tenant 'default' reads it "
        "(COGNIS_API_KEYS=KEY=default)",
    ]
    code, out, err = run(capsys, "import", str(DEMO), "--quiet", "--tenant", "acme", "--telemetry", "off")
    assert code == 0, err
    assert err.splitlines() == [  # the store exists now: no word about creating it
        "cognis-memory: stored for tenant 'acme', user 'demo-user'; over HTTP an API key of tenant 'acme' reads it "
        "(COGNIS_API_KEYS=KEY=acme)"
    ]


def _cli_env(data_dir: Path) -> dict[str, str]:
    env = {**os.environ, "COGNIS_DATA_DIR": str(data_dir), "COGNIS_TELEMETRY": "off", "HF_HUB_OFFLINE": "1"}
    for var in ("COGNIS_STORE", "COGNIS_LLM", "COGNIS_RERANKER", "COGNIS_API_KEYS", "COGNIS_RECIPE"):
        env.pop(var, None)
    return env


def test_export_into_a_pipe_closed_early_stops_quietly(data_dir, tmp_path, capsys):
    """``cognis-memory export | head -n 1`` in a real pipe: the reader leaves after the first line (the
    export is larger than the pipe's buffer, so the writer is still writing), and the CLI stops without a
    traceback, with 141 as a Unix tool ended by SIGPIPE. Then a reader that never reads (the first write fails)."""
    filler = "We talked about the harbour, the ferries and the weather on the coast. " * 40
    lines = [json.dumps({"content": f"Note {i}. {filler}"}) for i in range(40)]
    code, _, err = run(capsys, "import", str(_write(tmp_path / "long.jsonl", "\n".join(lines))), "--user", "u",
                       "--quiet")  # fmt: skip
    assert code == 0, err
    cli = str(Path(sys.executable).with_name("cognis-memory"))
    proc = subprocess.Popen([cli, "export", "--user", "u"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_cli_env(data_dir))  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    first = json.loads(proc.stdout.readline())
    assert first["user_id"] == "u"
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert err == ""  # no traceback, no "Exception ignored", no "exported N memories"

    for argv in (["export", "--user", "u"], ["search", "harbour", "--user", "u"], ["recipes"]):
        r = subprocess.run(f"{cli} {' '.join(argv)} | true; exit ${{PIPESTATUS[0]}}", shell=True, executable="bash",
                           capture_output=True, text=True, env=_cli_env(data_dir), timeout=120)  # fmt: skip
        assert (r.returncode, r.stderr) == (141, ""), argv


def test_mcp_without_the_sdk_says_which_extra_to_install_in_one_line(tmp_path):
    """A real process in which ``import mcp`` fails as if the extra were not installed (a ``None`` entry in
    ``sys.modules`` is how Python marks a module as not importable)."""
    code = "import sys; sys.modules['mcp'] = None; from cognis_memory.cli import main; raise SystemExit(main())"
    r = subprocess.run([sys.executable, "-c", code, "mcp", "--user", "u"], capture_output=True, text=True,
                       env=_cli_env(tmp_path / "new"), timeout=60)  # fmt: skip
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == "error: the MCP server needs the MCP Python SDK: pip install 'cognis-memory[mcp]'\n"
    assert not (tmp_path / "new").exists()


def test_the_readme_sequence_import_then_serve_with_the_demo_key_then_search(data_dir, tmp_path):
    """What a new user does: import a conversation with the CLI (no --tenant), start the server with the
    demo's key (as scripts/demo.sh sets it), search over HTTP: the imported memories are found, and both
    commands say which tenant they use."""
    import httpx
    from cognis_dev.processes import ServeProcess

    demo_keys = re.search(r"COGNIS_API_KEYS:-([^}]+)\}", (REPO / "scripts" / "demo.sh").read_text()).group(1)
    key = demo_keys.partition("=")[0]
    conversation = _write(tmp_path / "maya.jsonl", "\n".join(json.dumps(m) for m in [
        {"content": "I adopted a grey cat called Pixel", "speaker": "Maya", "timestamp": "2025-03-01T10:00:00Z"},
        {"content": "Pixel only eats salmon-flavoured food", "speaker": "Maya", "timestamp": "2025-03-02T10:00:00Z"},
    ]))  # fmt: skip
    cli = str(Path(sys.executable).with_name("cognis-memory"))
    r = subprocess.run([cli, "import", str(conversation), "--user", "maya", "--quiet"], capture_output=True,
                       text=True, env=_cli_env(data_dir), timeout=120)  # fmt: skip
    assert r.returncode == 0 and json.loads(r.stdout)["created"] == 2, r.stderr
    assert "stored for tenant 'default', user 'maya'" in r.stderr

    server = ServeProcess({**_cli_env(data_dir), "COGNIS_API_KEYS": demo_keys}, log_path=tmp_path / "serve.log")
    server.start()
    try:
        found = httpx.post(f"{server.url}/v1/users/maya/search", json={"query": "What does my cat eat?"},
                           headers={"Authorization": f"Bearer {key}"}, timeout=60)  # fmt: skip
        assert found.status_code == 200, found.text
        assert "salmon-flavoured" in found.json()["results"][0]["memory"]["content"]
    finally:
        server.stop()
    assert "COGNIS_API_KEYS entry 1 serves tenant 'default' (read-write)" in server.log_path.read_text()


def test_serve_names_the_tenant_of_each_listed_key_and_never_the_key():
    from cognis_memory.cli.commands import _api_key_lines
    from cognis_memory.config import Settings

    lines = _api_key_lines(Settings(api_keys="secret-one=acme, secret-two=globex:read"))
    assert lines == [
        "COGNIS_API_KEYS entry 1 serves tenant 'acme' (read-write)",
        "COGNIS_API_KEYS entry 2 serves tenant 'globex' (read-only)",
    ]
    assert _api_key_lines(Settings(api_keys="")) == [
        "COGNIS_API_KEYS is not set: only keys made by 'cognis-memory api-key create' are accepted"
    ]
