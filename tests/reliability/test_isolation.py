"""Tenant and user isolation, property-based, on every store and through the API (issue #6, part 1).

Hypothesis draws programs of writes (add messages, sync or async with the scripted LLM
extracting facts), updates, deletes, gets, histories, exports, job lookups, forgets and
searches (every filter combination, history and explain modes, single-side recipes, cached
through the real Redis cache or not) for 2-4 owners whose ids are chosen to collide under
naive key schemes (``("x", "y:z")`` vs ``("x:y", "z")``, case variants, glob characters,
non-ASCII). Each owner writes distinctive random tokens, so any response, history entry,
job, export, LLM prompt or error message that carries another owner's data fails the test
(:class:`tests.reliability.helpers.Truth`). Operations on another owner's ids must answer
"not found" and leave the victim's record unchanged; a forget of one owner leaves every
other owner's data complete.

Budget: ``ISOLATION_EXAMPLES`` examples per store and mode (scaled by ``COGNIS_RELIABILITY_SCALE``).
"""

from __future__ import annotations

import os
import secrets
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import event as hypothesis_event
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from cognis_memory.domain import Category, Owner
from cognis_memory.providers.llms import OpenAICompatibleLLM
from tests.reliability.executors import Conflict, HttpExecutor, NotFound, ServiceExecutor
from tests.reliability.helpers import COMMON_WORDS, Leak, Truth, check_filters, make_service

pytestmark = pytest.mark.integration

SCALE = float(os.environ.get("COGNIS_RELIABILITY_SCALE", "1"))
ISOLATION_EXAMPLES = max(1, int(12 * SCALE))
API_EXAMPLES = max(1, int(6 * SCALE))

#: (tenant, user) shapes that collide under naive concatenation, case folding or pattern matching
#: (``_`` is a LIKE wildcard; ``|`` and ``:`` are common key separators), within the id rule.
OWNER_SHAPES = [
    ("x", "y:z"),
    ("x:y", "z"),
    ("x", "z"),
    ("X", "z"),
    ("x", "Z"),
    ("x", "y_"),
    ("x|y", "z"),
    ("x", "y"),
]
DATES = [
    datetime(2023, 1, 5, 9, tzinfo=UTC),
    datetime(2023, 6, 1, 12, tzinfo=UTC),
    datetime(2024, 2, 29, 18, tzinfo=UTC),
]
CATEGORIES = [c.value for c in Category]

owner_ix = st.integers(0, 3)
message_st = st.fixed_dictionaries(
    {
        "words": st.lists(st.sampled_from(COMMON_WORDS), min_size=1, max_size=3),
        "scope": st.sampled_from(["USER", "CONTEXT"]),
        "session": st.sampled_from(["s1", "s2"]),
        "agent": st.sampled_from([None, "a1", "a2"]),
        "ts": st.sampled_from([None, 0, 1, 2]),
        "cmid": st.sampled_from([None, None, "c1", "c2"]),  # shared ids: collide across owners on purpose
    }
)


def event(value: str) -> None:
    """Hypothesis statistics when a drawn program runs; nothing for fixed programs (test_planted_leaks)."""
    if currently_in_test_context():
        hypothesis_event(value)


def rarely(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """None three times out of four: filters narrow, but most searches should still find something."""
    return st.one_of(st.none(), st.none(), st.none(), strategy)


filters_st = st.fixed_dictionaries(
    {
        "words": st.lists(st.sampled_from(COMMON_WORDS), max_size=3),
        "foreign": st.lists(st.integers(0, 3), max_size=2),
        "own_token": st.booleans(),
        "scopes": rarely(st.sets(st.sampled_from(["USER", "CONTEXT"]), min_size=1)),
        "session_id": rarely(st.sampled_from(["s1", "s2"])),
        "categories": rarely(st.sets(st.sampled_from(CATEGORIES), min_size=3, max_size=10)),
        "kinds": rarely(st.sets(st.sampled_from(["raw", "fact"]), min_size=1)),
        "agent_id": rarely(st.just("a1")),
        "time": rarely(st.tuples(st.integers(0, 2), st.integers(0, 2)).map(sorted)),
        "include_history": st.booleans(),
        "explain": st.booleans(),
        "recipe": st.sampled_from([None, None, "vector", "bm25", "vector_two_stage"]),
        "limit": st.sampled_from([3, 10, 50]),
        "cached": st.booleans(),
    }
)
search_op = st.tuples(st.just("search"), owner_ix, filters_st)
PLAIN_SEARCH = {
    "words": ["coffee", "berlin"], "foreign": [], "own_token": False, "scopes": None, "session_id": None,
    "categories": None, "kinds": None, "agent_id": None, "time": None, "include_history": False, "explain": False,
    "recipe": None, "limit": 10, "cached": True,
}  # fmt: skip
op_st = st.one_of(
    st.tuples(st.just("add"), owner_ix, st.lists(message_st, min_size=1, max_size=3), st.booleans()),
    search_op,
    search_op,
    search_op,
    st.tuples(st.just("search_all"), filters_st),
    st.tuples(
        st.just("update"),
        owner_ix,
        st.booleans(),
        st.integers(0, 50),
        st.sampled_from(COMMON_WORDS),
        st.sampled_from([None, "health", "travel"]),
    ),  # fmt: skip
    st.tuples(st.just("delete"), owner_ix, st.booleans(), st.integers(0, 50)),
    st.tuples(st.just("get"), owner_ix, st.booleans(), st.integers(0, 50), st.booleans()),
    st.tuples(st.just("job"), owner_ix, st.booleans(), st.integers(0, 50)),
    st.tuples(st.just("export"), owner_ix),
    st.tuples(st.just("drain")),
    st.tuples(st.just("forget"), owner_ix),
)
program_st = st.tuples(
    st.lists(st.sampled_from(range(len(OWNER_SHAPES))), min_size=2, max_size=4, unique=True),
    st.lists(op_st, min_size=3, max_size=10),
)
SETTINGS: dict[str, Any] = dict(
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
if os.environ.get("COGNIS_RELIABILITY_NO_SHRINK"):  # planted-leak experiments: report the first failure at once
    SETTINGS["phases"] = [Phase.explicit, Phase.reuse, Phase.generate]


def ids_of(m: dict[str, Any]) -> set[str]:
    """The ids a memory carries: the API's ``id`` (the memory's) and ``version_id``, the plain form's ``id`` (the
    version's) and ``chain_id``."""
    return {m[k] for k in ("id", "version_id", "chain_id") if m.get(k)}


class Program:
    """Runs one drawn program against an executor and checks every answer."""

    def __init__(self, ex: Any, truth: Truth, owners: list[Owner]) -> None:
        self.ex, self.truth, self.owners = ex, truth, owners
        self.ops_run: list[str] = []
        self.stats: Counter[str] = Counter()

    def owner(self, i: int) -> Owner:
        return self.owners[i % len(self.owners)]

    def others(self, owner: Owner) -> list[Owner]:
        return [o for o in self.owners if o != owner]

    def target(self, owner: Owner, foreign: bool, k: int) -> tuple[Owner, str] | None:
        pool = self.others(owner) if foreign else [owner]
        ids = [(o, i) for o in pool for i in self.truth.memory_ids_of.get(o, {})]
        return ids[k % len(ids)] if ids else None

    # -- checks ------------------------------------------------------------------------------------
    def check_memories(self, owner: Owner, memories: list[dict[str, Any]], where: str) -> None:
        for m in memories:
            self.truth.check_memory(owner, m, where)

    async def head(self, owner: Owner, mid: str) -> Any:
        """The newest version of the memory ``mid`` names (read from the store): its current one, else its tombstone."""
        chain = await self.ex.stores.memories.get_chain(owner, mid)
        return next((m for m in reversed(chain) if m.is_current), chain[-1])

    async def snapshot(self, victim: Owner, mid: str) -> tuple[Any, ...] | None:
        m = await self.ex.stores.memories.get_memory(victim, mid)
        return None if m is None else (m.version, m.is_current, m.deleted, m.content, m.category)

    # -- operations --------------------------------------------------------------------------------
    async def add(self, owner: Owner, msgs: list[dict[str, Any]], background: bool) -> None:
        tok = self.truth.token(owner)
        payload = [
            {
                "content": f"I talked about {' and '.join(m['words'])} today {tok}",
                "speaker": self.truth.speaker(owner),
                "timestamp": DATES[m["ts"]] if m["ts"] is not None else None,
                "session_id": m["session"],
                "agent_id": m["agent"],
                "scope": m["scope"],
                "client_message_id": m["cmid"],
            }
            for m in msgs
        ]
        out = await self.ex.add(owner, payload, background)
        self.truth.check_blob(owner, out, "add")
        for m in out["messages"]:
            self.truth.register(owner, m["id"], kind="message")
            assert (
                m.get("user_id", owner.user_id) == owner.user_id
                and m.get("tenant_id", owner.tenant_id) == owner.tenant_id
            )
        for m in out["memories"]:
            self.truth.register(owner, m["id"])
        self.check_memories(owner, out["memories"], "add")
        if out["job"]:
            self.truth.register(owner, out["job"]["id"], kind="job")

    def search_body(self, owner: Owner, f: dict[str, Any]) -> dict[str, Any]:
        words = list(f["words"])
        if f["own_token"] and self.truth.tokens_of.get(owner):
            words += [self.truth.tokens_of[owner][-1], self.truth.speaker(owner)]
        for i in f["foreign"]:  # ask for other owners' tokens and speakers: a missing filter would surface them
            o = self.owner(i)
            if o != owner and self.truth.tokens_of.get(o):
                words += [self.truth.tokens_of[o][-1], self.truth.speaker(o)]
        time_from = time_to = None
        if f["time"] is not None:
            time_from, time_to = DATES[f["time"][0]] - timedelta(hours=1), DATES[f["time"][1]] + timedelta(hours=1)
        return {
            "query": "what about " + (" ".join(words) or "coffee"),
            "limit": f["limit"],
            "scopes": f["scopes"],
            "session_id": f["session_id"],
            "categories": f["categories"],
            "kinds": f["kinds"],
            "agent_id": f["agent_id"],
            "time_from": time_from,
            "time_to": time_to,
            "include_history": f["include_history"],
            "explain": f["explain"],
            "recipe": f["recipe"],
        }

    async def search(self, owner: Owner, f: dict[str, Any], *, cached: bool | None = None) -> None:
        body = self.search_body(owner, f)
        out = await self.ex.search(owner, body, cached=f["cached"] if cached is None else cached)
        where = f"search[{self.ex.name}, cached={f['cached'] if cached is None else cached}, {body}]"
        self.truth.check_blob(owner, out, where, echo=body["query"])
        for name in (out.get("explain") or {}).get("analysis", {}).get("speaker_names", []):
            if self.truth.token_owner.get(name, owner) != owner:  # the name was echoed, but known as a speaker
                raise Leak(f"{where}: {self.truth.token_owner[name]}'s speaker {name} was known to {owner}")
        assert len(out["results"]) <= body["limit"], where
        self.stats["searches"] += 1
        self.stats["hits"] += len(out["results"])
        self.stats["history entries"] += sum(len(h["history"]) for h in out["results"])
        for h in out["results"]:
            self.truth.check_memory(owner, h["memory"], where)
            check_filters(h["memory"], body, where)
            for v in h["history"]:
                self.truth.check_memory(owner, v, where + " history")
                assert v["version"] < h["memory"]["version"], where

    async def update(self, owner: Owner, foreign: bool, k: int, word: str, category: str | None) -> None:
        t = self.target(owner, foreign, k)
        if t is None:
            return
        victim, mid = t
        content = f"Now I prefer {word} {self.truth.token(owner)}"
        if foreign:
            event("foreign update refused")
            before = await self.snapshot(victim, mid)
            with pytest.raises(NotFound) as e:
                await self.ex.update(owner, mid, content, category)
            self.truth.check_blob(owner, str(e.value), "update error", ids=False)
            assert await self.snapshot(victim, mid) == before, "a foreign update changed the victim's memory"
            return
        try:
            new = await self.ex.update(owner, mid, content, category)
        except NotFound:  # deleted (by a delete, or by extraction): the id still names it, edits are refused
            event("own update of a deleted memory")
            assert (await self.head(owner, mid)).deleted
            return
        except Conflict:  # other writes kept replacing the current version meanwhile
            event("own update conflict")
            return
        event("own update")
        self.truth.check_memory(owner, new, "update")
        head = await self.head(owner, mid)  # any version's id edits the memory's current version
        assert head.id in ids_of(new) and head.chain_id in ids_of(new) and new["content"] == content

    async def delete(self, owner: Owner, foreign: bool, k: int) -> None:
        t = self.target(owner, foreign, k)
        if t is None:
            return
        victim, mid = t
        if foreign:
            before = await self.snapshot(victim, mid)
            with pytest.raises(NotFound) as e:
                await self.ex.delete(owner, mid)
            self.truth.check_blob(owner, str(e.value), "delete error", ids=False)
            assert await self.snapshot(victim, mid) == before, "a foreign delete changed the victim's memory"
            return
        try:
            tomb = await self.ex.delete(owner, mid)
        except Conflict:
            return
        self.truth.check_memory(owner, tomb, "delete")
        assert tomb["deleted"] and not tomb["is_current"]

    async def get(self, owner: Owner, foreign: bool, k: int, history: bool) -> None:
        t = self.target(owner, foreign, k)
        if t is None:
            return
        _, mid = t
        if foreign:
            with pytest.raises(NotFound) as e:
                await (self.ex.history(owner, mid) if history else self.ex.get(owner, mid))
            self.truth.check_blob(owner, str(e.value), "get error", ids=False)
            return
        try:
            got = await (self.ex.history(owner, mid) if history else self.ex.get(owner, mid))
        except NotFound:  # a deleted memory: gone for GET, its history stays
            assert not history and (await self.head(owner, mid)).deleted
            event("own get of a deleted memory")
            return
        got = got if isinstance(got, list) else [got]
        self.check_memories(owner, got, "history" if history else "get")
        seen, head = set().union(*(ids_of(m) for m in got)), await self.head(owner, mid)
        assert (mid if history else head.id) in seen and all(head.chain_id in ids_of(m) for m in got)

    async def job(self, owner: Owner, foreign: bool, k: int) -> None:
        pool = self.others(owner) if foreign else [owner]
        jobs = [j for o in pool for j in self.truth.job_ids_of.get(o, [])]
        if not jobs:
            return
        jid = jobs[k % len(jobs)]
        if foreign:
            with pytest.raises(NotFound):
                await self.ex.job(owner, jid)
            return
        job = await self.ex.job(owner, jid)
        self.truth.check_blob(owner, job, "job")
        assert job["id"] == jid and job.get("user_id", owner.user_id) == owner.user_id

    async def export(self, owner: Owner) -> None:
        everything = await self.ex.export(owner, include_history=True)
        self.check_memories(owner, everything, "export")
        ids = {m["id"] for m in everything}
        missing = set(self.truth.memory_ids_of.get(owner, {})) - ids
        assert not missing, f"export of {owner} lost {len(missing)} memories: {sorted(missing)[:3]}"
        current = await self.ex.export(owner, include_history=False)
        self.check_memories(owner, current, "export current")
        assert all(m["is_current"] for m in current)
        assert {m["id"] for m in current} <= ids

    async def forget(self, owner: Owner) -> None:
        counts = await self.ex.forget(owner)
        self.truth.check_blob(owner, counts, "forget")
        self.truth.memory_ids_of[owner] = {}
        self.truth.job_ids_of[owner] = []
        self.truth.forgotten.add(owner)
        assert await self.ex.export(owner, include_history=True) == []

    async def run(self, ops: list[tuple[Any, ...]]) -> None:
        for o in self.owners:  # everybody has something to find
            await self.add(o, [{"words": ["coffee", "berlin"], "scope": "USER", "session": "s1", "agent": None,
                                "ts": 0, "cmid": None}], background=True)  # fmt: skip
        await self.ex.drain()
        for op in ops:
            self.ops_run.append(repr(op))
            kind = op[0]
            if kind == "add":
                await self.add(self.owner(op[1]), op[2], op[3])
            elif kind == "search":
                await self.search(self.owner(op[1]), op[2])
            elif kind == "search_all":  # the same request for everybody, twice: the second round hits the cache
                same = {**op[1], "own_token": False, "foreign": [], "explain": False}  # explain is never cached
                event(
                    "search_all "
                    + (
                        "shared tenant"
                        if len({o.tenant_id for o in self.owners}) < len(self.owners)
                        else "no shared tenant"
                    )
                )
                for _ in range(2):
                    for o in self.owners:
                        await self.search(o, same, cached=True)
            elif kind == "update":
                await self.update(self.owner(op[1]), *op[2:])
            elif kind == "delete":
                await self.delete(self.owner(op[1]), *op[2:])
            elif kind == "get":
                await self.get(self.owner(op[1]), *op[2:])
            elif kind == "job":
                await self.job(self.owner(op[1]), *op[2:])
            elif kind == "export":
                await self.export(self.owner(op[1]))
            elif kind == "drain":
                await self.ex.drain()
            elif kind == "forget":
                await self.forget(self.owner(op[1]))
        await self.ex.drain()
        for _ in range(2):  # always end with one identical, cacheable request per owner (cache keys are per owner)
            for o in self.owners:
                await self.search(o, PLAIN_SEARCH, cached=True)
        for o in self.owners:
            await self.export(o)
        s = self.stats
        event(f"searches with a hit: {'most' if s['hits'] >= s['searches'] else 'few'}")
        if s["history entries"]:
            event("history entries checked")


def owners_for(shapes: list[int]) -> list[Owner]:
    nonce = secrets.token_hex(3)
    return [Owner(f"{nonce}{OWNER_SHAPES[i][0]}", OWNER_SHAPES[i][1]) for i in shapes]


def services(store: Any, embedder: Any, cache: Any, llm_url: str):
    llm = OpenAICompatibleLLM(llm_url, "scripted", timeout_s=30)
    cached = make_service(store, embedder, cache=cache, llm=llm)
    plain = make_service(store, embedder, llm=llm)
    return cached, plain


@settings(max_examples=ISOLATION_EXAMPLES, **SETTINGS)
@given(program=program_st)
async def test_no_owner_ever_sees_another_owners_data(any_store, embedder, redis_cache, isolation_llm, truth, program):
    """In-process (MemoryService), every store kind, cache on and off."""
    server, llm = isolation_llm
    shapes, ops = program
    seen_violations = len(llm.violations)
    cached, plain = services(any_store.store, embedder, redis_cache, server.base_url)
    prog = Program(ServiceExecutor(cached, plain), truth, owners_for(shapes))
    try:
        await prog.run(ops)
    except (AssertionError, Leak) as e:
        raise AssertionError(f"{e}\nstore={any_store.kind} ops:\n" + "\n".join(prog.ops_run)) from e
    assert not llm.violations[seen_violations:], llm.violations[seen_violations:][:3]


@settings(max_examples=API_EXAMPLES, **SETTINGS)
@given(program=program_st)
async def test_isolation_through_the_api(any_store, embedder, redis_cache, isolation_llm, truth, program):
    """The same programs over HTTP: the tenant comes from the API key, the user from the path."""
    server, llm = isolation_llm
    shapes, ops = program
    seen_violations = len(llm.violations)
    cached, plain = services(any_store.store, embedder, redis_cache, server.base_url)
    ex = HttpExecutor(cached, plain)
    owners = owners_for(shapes)
    prog = Program(ex, truth, owners)
    try:
        await prog.run(ops)
        for o in owners:  # read-only keys of the same tenant can never write
            ids = list(truth.memory_ids_of.get(o, {}))
            await ex.read_only_write(o, ids[0] if ids else None)
            truth.check_blob(o, ex.last_error, "read-only error")
    except (AssertionError, Leak) as e:
        raise AssertionError(f"{e}\nstore={any_store.kind} ops:\n" + "\n".join(prog.ops_run)) from e
    finally:
        await ex.close()
    assert not llm.violations[seen_violations:], llm.violations[seen_violations:][:3]
