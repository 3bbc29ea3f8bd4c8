"""The in-process API (MemoryService) on the embedded store with the real MiniLM model.

Validation lives in the service, so Python callers get the same errors as the HTTP API and
the CLI: an InvalidInputError naming the field, and nothing stored.
"""

from __future__ import annotations

import asyncio
import io
import sqlite3
from datetime import UTC, datetime
from typing import Any

import pytest
import pytest_asyncio
from pydantic import ValidationError

from cognis_memory.config import Settings
from cognis_memory.domain import Owner, Scope
from cognis_memory.errors import ConflictError, InvalidInputError, NotFoundError
from cognis_memory.service import MemoryFilter, MemoryService, MessageBody, hash_api_key
from cognis_memory.stores.embedded import EmbeddedStore
from cognis_memory.telemetry.emitter import Telemetry

T = "acme"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def svc(tmp_path_factory, embedder):
    settings = Settings(data_dir=tmp_path_factory.mktemp("service"), run_worker=False)
    store = EmbeddedStore(
        settings.embedded.resolved_sqlite_path, dim=embedder.dim, dim_short=settings.encoder.dim_short
    )
    telemetry = Telemetry(log_stream=io.StringIO(), metrics_stream=io.StringIO())
    service = MemoryService(settings, store=store, embedder=embedder, telemetry=telemetry)
    await service.start()
    yield service
    await service.close()


def counts(svc: MemoryService) -> tuple[int, ...]:
    with sqlite3.connect(svc.settings.embedded.resolved_sqlite_path) as conn:
        return tuple(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("messages", "memories", "jobs"))


def _t(s: str) -> datetime:
    return datetime.fromisoformat(s)


ADD_CASES: list[tuple[str, dict[str, Any], list[MessageBody], str]] = [
    ("empty-content", {}, [MessageBody(content="")], "messages[0].content"),
    ("whitespace", {}, [MessageBody(content="ok"), MessageBody(content="\n \t")], "messages[1].content"),
    ("oversized", {}, [MessageBody(content="a" * (512 * 1024 + 1))], "messages[0].content"),
    # wrong types: a MessageBody refuses them when it is built (pydantic), so these are built unchecked, as the
    # CLI's import builds its messages: the service's own checks refuse them, naming the field
    ("not-a-string", {}, [MessageBody.model_construct(content=42)], "messages[0].content"),
    ("speaker-number", {}, [MessageBody.model_construct(content="x", speaker=7)], "messages[0].speaker"),
    ("scope-unknown", {}, [MessageBody.model_construct(content="x", scope="GLOBAL")], "messages[0].scope"),
    ("speaker-too-long", {}, [MessageBody(content="x", speaker="s" * 201)], "messages[0].speaker"),
    ("metadata-list", {}, [MessageBody.model_construct(content="x", metadata=[1])], "messages[0].metadata"),
    ("naive-year-1", {}, [MessageBody(content="x", timestamp=datetime(1, 1, 1))], "messages[0].timestamp"),
    ("year-9999", {}, [MessageBody(content="x", timestamp=_t("9999-12-31T00:00:00+00:00"))], "messages[0].timestamp"),
    ("context-no-session", {}, [MessageBody(content="x", scope=Scope.CONTEXT)], "messages[0].session_id"),
    ("client-id-newline", {}, [MessageBody(content="x", client_message_id="a\nb")], "messages[0].client_message_id"),
    ("no-messages", {}, [], "messages"),
    ("tenant-empty", {"tenant_id": ""}, [MessageBody(content="x")], "tenant_id"),
    ("user-too-long", {"user_id": "u" * 129}, [MessageBody(content="x")], "user_id"),
    ("user-zero-width", {"user_id": "u\u200bx"}, [MessageBody(content="x")], "user_id"),
]


@pytest.mark.parametrize(("owner", "messages", "field"), [c[1:] for c in ADD_CASES], ids=[c[0] for c in ADD_CASES])
async def test_add_messages_rejects_bad_input_naming_the_field(svc, owner, messages, field):
    before = counts(svc)
    with pytest.raises(InvalidInputError) as exc:
        await svc.add_messages(owner.get("tenant_id", T), owner.get("user_id", "val-user"), messages)
    assert exc.value.field == field
    assert str(exc.value).startswith(f"{field}: ")
    assert counts(svc) == before


@pytest.mark.parametrize(
    "fields",
    [{"content": 42}, {"content": "x", "speaker": 7}, {"content": "x", "metadata": [1]},
     {"content": "x", "role": "god"}, {"content": "x", "colour": "red"}, {"content": "x", "timestamp": 1700000000}],
)  # fmt: skip
def test_a_message_body_refuses_wrong_types_when_it_is_built(fields):
    # the HTTP API's request model, so a Python caller gets the API's type rules (a 422 there)
    with pytest.raises(ValidationError):
        MessageBody(**fields)


async def test_a_message_keeps_its_scope_and_raw_memory_id_as_fields_not_metadata(svc):
    body = MessageBody(content="We are planning a trip to Japan", session_id="s1", scope="CONTEXT", metadata={"k": "v"})
    res = await svc.add_messages(T, "fields", [body])
    ((msg,), (raw,)) = res.messages, res.raw_memories
    assert (msg.scope, msg.metadata, msg.raw_memory_id) == (Scope.CONTEXT, {"k": "v"}, raw.id)
    assert (raw.scope, raw.session_id, raw.metadata) == (Scope.CONTEXT, "s1", {"k": "v", "role": "user"})
    (stored,) = await svc.stores.messages.get_messages(Owner(T, "fields"), [msg.id])
    assert (stored.scope, stored.raw_memory_id, stored.metadata) == (Scope.CONTEXT, raw.id, {"k": "v"})
    with sqlite3.connect(svc.settings.embedded.resolved_sqlite_path) as conn:
        row = conn.execute("SELECT scope, raw_memory_id, metadata FROM messages WHERE id = ?", (msg.id,)).fetchone()
    assert row == ("CONTEXT", raw.id, '{"k": "v"}')


SEARCH_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("empty-query", {"query": " "}, "query"),
    ("long-query", {"query": "q" * 4097}, "query"),
    ("nul-query", {"query": "a\x00b"}, "query"),
    ("limit-0", {"limit": 0}, "limit"),
    ("limit-101", {"limit": 101}, "limit"),
    ("bad-scope", {"filter": MemoryFilter(scopes=["WORLD"])}, "scopes"),
    ("bad-category", {"filter": MemoryFilter(categories=["gossip"])}, "categories"),
    ("bad-kind", {"filter": MemoryFilter(kinds=["summary"])}, "kinds"),
    ("bad-agent", {"filter": MemoryFilter(agent_id="a b")}, "agent_id"),
    ("reversed-range", {"filter": MemoryFilter(time_from=_t("2025-02-01T00:00:00+00:00"),
                                                time_to=_t("2025-01-01T00:00:00+00:00"))}, "time_from"),
    ("time-to-year-1", {"filter": MemoryFilter(time_to=datetime(1, 1, 1, tzinfo=UTC))}, "time_to"),
    ("bad-session", {"filter": MemoryFilter(session_id="s\x00")}, "session_id"),
    ("bad-recipe", {"recipe": "magic"}, "recipe"),
]  # fmt: skip


@pytest.mark.parametrize(("kwargs", "field"), [c[1:] for c in SEARCH_CASES], ids=[c[0] for c in SEARCH_CASES])
async def test_search_rejects_bad_input_naming_the_field(svc, kwargs, field):
    kwargs = {"query": "anything"} | kwargs
    with pytest.raises(InvalidInputError) as exc:
        await svc.search(T, "val-user", kwargs.pop("query"), **kwargs)
    assert exc.value.field == field


async def test_add_is_idempotent_on_the_client_message_id(svc):
    msg = MessageBody(content="I started learning Welsh", client_message_id="cm-1")
    first = await svc.add_messages(T, "idem", [msg])
    second = await svc.add_messages(T, "idem", [msg])
    assert (first.created, second.created) == ([True], [False])
    assert second.messages[0].id == first.messages[0].id
    assert second.raw_memories == [] and second.job is None
    assert len(await svc.list_memories(T, "idem", include_history=True)) == 1


async def test_versions_through_the_service(svc):
    """A memory keeps one id (its chain id) across its versions; any version's id names it for every call."""
    user = "versions"
    added = await svc.add_messages(
        T, user, [MessageBody(content="I drive a red Fiat", timestamp=_t("2025-01-05T09:00:00+00:00"))]
    )
    v1 = added.raw_memories[0]
    assert v1.chain_id == v1.id
    v2 = await svc.update_memory(T, user, v1.id, content="Maya drives a blue Volvo")
    assert (v2.version, v2.replaces_id, v2.is_current, v2.chain_id) == (2, v1.id, True, v1.id)
    assert v2.message_time == v1.message_time  # when it was said is kept
    # the older version's id edits the current version: no conflict, the chain grows on its head
    v3 = await svc.update_memory(T, user, v1.id, content="Maya drives a green Volvo")
    assert (v3.version, v3.replaces_id, v3.chain_id) == (3, v2.id, v1.id)
    for any_id in (v1.id, v2.id, v3.id):
        assert (await svc.get_memory(T, user, any_id)).id == v3.id
    with pytest.raises(InvalidInputError) as exc:
        await svc.update_memory(T, user, v2.id)
    assert exc.value.field == "body"
    with pytest.raises(NotFoundError):
        await svc.update_memory("other-tenant", user, v2.id, content="hijack")
    with pytest.raises(NotFoundError):
        await svc.delete_memory(T, "another-user", v2.id)
    with pytest.raises(NotFoundError):
        await svc.get_memory(T, "another-user", v1.id)
    with pytest.raises(NotFoundError):
        await svc.history(T, "another-user", v1.id)

    v4 = await svc.delete_memory(T, user, v2.id)
    assert (v4.version, v4.deleted, v4.is_current, v4.replaces_id, v4.chain_id) == (4, True, False, v3.id, v1.id)
    for any_id in (v1.id, v3.id, v4.id):  # deleting again: the same tombstone, nothing written
        assert (await svc.delete_memory(T, user, any_id)).id == v4.id
    chain = await svc.history(T, user, v1.id)
    assert [(m.id, m.version, m.is_current) for m in chain] == [
        (v1.id, 1, False), (v2.id, 2, False), (v3.id, 3, False), (v4.id, 4, False)
    ]  # fmt: skip
    assert {m.chain_id for m in chain} == {v1.id}
    for any_id in (v1.id, v4.id):  # a deleted memory is not found, nor edited; its history stays
        with pytest.raises(NotFoundError, match="deleted"):
            await svc.get_memory(T, user, any_id)
        with pytest.raises(NotFoundError, match="deleted"):
            await svc.update_memory(T, user, any_id, content="back again")
    assert (await svc.search(T, user, "What car does Maya drive?", include_history=True)).hits == []
    assert await svc.list_memories(T, user) == []
    exported = [m async for m in svc.export(T, user)]
    assert {m.id for m in exported} == {v1.id, v2.id, v3.id, v4.id}
    assert [m.id async for m in svc.export(T, user, include_history=False)] == []
    with pytest.raises(NotFoundError, match="not found"):
        await svc.delete_memory(T, user, "no-such-memory")


async def test_concurrent_edits_and_deletes_of_one_memory_all_land(svc, monkeypatch):
    """Edits racing on one memory each go on top of the newest version (none is refused for an id that is
    simply older); deletes racing each other all answer the one tombstone."""
    user = "racing"
    v1 = (await svc.add_messages(T, user, [MessageBody(content="My bike is red")])).raw_memories[0]
    conflicts = 0
    write_version = svc.stores.memories.write_version

    async def counting(*args, **kwargs):
        nonlocal conflicts
        try:
            return await write_version(*args, **kwargs)
        except ConflictError:
            conflicts += 1
            raise

    monkeypatch.setattr(svc.stores.memories, "write_version", counting)
    colours = ("blue", "green", "black")
    edits = await asyncio.gather(*(svc.update_memory(T, user, v1.id, content=f"My bike is {c}") for c in colours))
    assert sorted(e.version for e in edits) == [2, 3, 4] and {e.chain_id for e in edits} == {v1.id}
    deletes = await asyncio.gather(*(svc.delete_memory(T, user, v1.id) for _ in range(3)))
    assert deletes[0].deleted and deletes[0].version == 5 and {d.id for d in deletes} == {deletes[0].id}
    assert conflicts >= 1  # the calls did race: some write found the head replaced and went again
    assert [m.version for m in await svc.history(T, user, v1.id)] == [1, 2, 3, 4, 5]


async def test_forget_user_and_other_owners(svc):
    await svc.add_messages(T, "forget-a", [MessageBody(content="one"), MessageBody(content="two")])
    await svc.add_messages(T, "forget-b", [MessageBody(content="three")])
    await svc.add_messages("globex", "forget-a", [MessageBody(content="four")])
    deleted = await svc.forget_user(T, "forget-a")
    assert (deleted["messages"], deleted["memories"], deleted["cache_entries"]) == (2, 2, 0)
    assert await svc.list_memories(T, "forget-a", include_history=True) == []
    assert len(await svc.list_memories(T, "forget-b")) == 1
    assert len(await svc.list_memories("globex", "forget-a")) == 1


async def test_api_keys_are_stored_hashed(svc):
    key = await svc.create_api_key("acme", read_only=True, name="reporting")
    record = await svc.authenticate(key)
    assert (record.tenant_id, record.read_only, record.key_hash) == ("acme", True, hash_api_key(key))
    assert await svc.authenticate(key + "x") is None
    assert await svc.authenticate("") is None and await svc.authenticate("k" * 600) is None
    assert await svc.revoke_api_key(key) is True
    assert await svc.authenticate(key) is None


async def test_the_list_keys_old_name_is_reserved(svc):
    """Rows named 'bootstrap' are earlier versions' copies of COGNIS_API_KEYS, which are ignored."""
    with pytest.raises(InvalidInputError) as err:
        await svc.create_api_key("acme", name="bootstrap")
    assert err.value.field == "name"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"status": "DEAD"}, "status"),
        ({"status": "deadish"}, "status"),
        ({"limit": 0}, "limit"),
        ({"limit": 1001}, "limit"),
        ({"limit": True}, "limit"),
        ({"after": "a\nb"}, "after"),
        ({"tenant_id": ""}, "tenant_id"),
    ],
)
async def test_list_jobs_rejects_bad_input_naming_the_field(svc, kwargs, field):
    tenant = kwargs.pop("tenant_id", T)
    with pytest.raises(InvalidInputError) as exc:
        await svc.list_jobs(tenant, **kwargs)
    assert exc.value.field == field


async def test_listed_keys_come_from_settings(tmp_path, embedder):
    settings = Settings(data_dir=tmp_path, run_worker=False, api_keys=" k1=acme ,\n k2=globex:read, k3=initech:write ")
    store = EmbeddedStore(
        settings.embedded.resolved_sqlite_path, dim=embedder.dim, dim_short=settings.encoder.dim_short
    )
    async with MemoryService(settings, store=store, embedder=embedder) as service:
        assert (await service.authenticate("k1")).tenant_id == "acme"
        assert (await service.authenticate("k2")).read_only is True
        k3 = await service.authenticate("k3")
        assert (k3.tenant_id, k3.read_only) == ("initech", False)
        assert await service.authenticate(" k1") is None and await service.authenticate("k1 ") is None


SECRET = "s3cret-key-material-0123456789"
#: (COGNIS_API_KEYS, the entry the error must name, what it must say). Each one was accepted before:
#: the modes as a read-WRITE key, ``abc==t`` as tenant ``=t``, the spaces inside keys and tenants.
MALFORMED_KEY_LISTS = [
    (f"{SECRET}=acme:READ", 1, "unknown mode 'READ'"),
    (f"{SECRET}=acme:readonly", 1, "unknown mode 'readonly'"),
    (f"{SECRET}=acme:ro", 1, "unknown mode 'ro'"),
    (f"ok=acme,{SECRET}=acme: read", 2, "whitespace"),
    (f"{SECRET}=acme:read:x", 1, "more than one ':'"),
    (f"{SECRET}==acme", 1, "exactly one '='"),
    (f"{SECRET} =acme", 1, "whitespace"),
    (f"{SECRET}=ac me", 1, "whitespace"),
    (f"{SECRET}=acme:", 1, "unknown mode ''"),
    (f"{SECRET}", 1, "exactly one '='"),
    (f"{SECRET}=", 1, "tenant after '=' is empty"),
    ("=acme", 1, "key before '=' is empty"),
    (f"ok=acme,,{SECRET}=acme", 2, "is empty"),
    (f"ok=acme,{SECRET}=acme,", 3, "is empty"),
    (f"{SECRET}=acme,ok=x,{SECRET}=globex", 3, "same key as entry 1"),
    (f"{SECRET}=" + "t" * 129, 1, "tenant must be 1-128 characters"),
    (f"{SECRET}=acme\u202e", 1, "tenant must be 1-128 characters"),  # the id rule: no bidi override
    (f"{SECRET}=-acme", 1, "tenant must be 1-128 characters"),
    (f"{SECRET}é=acme", 1, "visible ASCII"),
    ("k" * 513 + "=acme", 1, "longer than 512"),
]


@pytest.mark.parametrize(("api_keys", "entry", "why"), MALFORMED_KEY_LISTS)
async def test_a_malformed_key_list_stops_the_service_naming_the_entry(tmp_path, embedder, api_keys, entry, why):
    settings = Settings(data_dir=tmp_path, run_worker=False, api_keys=api_keys)
    store = EmbeddedStore(
        settings.embedded.resolved_sqlite_path, dim=embedder.dim, dim_short=settings.encoder.dim_short
    )
    with pytest.raises(ValueError) as raised:
        async with MemoryService(settings, store=store, embedder=embedder):
            pass
    message = str(raised.value)
    assert f"entry {entry} of " in message and why in message and "COGNIS_API_KEYS" in message, message
    assert SECRET not in message and "k" * 20 not in message
    assert not settings.embedded.resolved_sqlite_path.exists()  # stopped before the store was opened


async def test_readiness(svc):
    assert await svc.readiness() == (True, {"sqlite": True})


async def test_user_ids_with_a_slash_are_refused(make_service) -> None:
    from cognis_memory.errors import InvalidInputError
    from cognis_memory.service import MessageBody

    svc = await make_service()
    with pytest.raises(InvalidInputError) as err:
        await svc.add_messages("acme", "a/b", [MessageBody(content="hello")])
    assert err.value.field == "user_id"
    assert await svc.list_memories("acme", "a") == []
