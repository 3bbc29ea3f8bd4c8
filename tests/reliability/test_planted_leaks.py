"""Planted leaks: the isolation checks must catch every owner filter that goes missing (issue #11).

Each case removes one owner filter from the runtime's source (the user condition of a store's
vector query, of its keyword query, the owner key of the speaker directory, the user part of
the Redis cache's key prefix), builds the store, cache or directory from that mutated source,
and runs a fixed isolation program (:class:`tests.reliability.test_isolation.Program`: two
users of one tenant and a user of another, each asking for the others' tokens and speaker
names). The program must raise :class:`~tests.reliability.helpers.Leak` (or the scripted LLM must see
a prompt mixing owners), and the same program on the unmutated code must pass, so a check that can no longer
see a leak fails CI.

The mutants are built in process: the module's source is read, each planted change must match
its site exactly as often as stated (so a refactor that moves the code makes this test fail
loudly instead of testing nothing), and the result is executed as a fresh module object in the
same package (relative imports resolve to the real modules; nothing in ``sys.modules`` is
replaced). Where a filter has a second, independent layer behind it (the embedded store's FTS
owner token and SQL conditions; the dual store's hydration from PostgreSQL), both layers are
removed together; removing one alone must not be a leak (docs/reliability.md, "Planted
leaks"), which the one-layer cases check.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import secrets
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from cognis_memory.domain import Owner
from tests.reliability.executors import ServiceExecutor
from tests.reliability.helpers import DIM_SHORT, Leak, Truth
from tests.reliability.test_isolation import PLAIN_SEARCH, Program, services
from tests.store_kinds import os_client, unique_prefix

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class Edit:
    """Replace ``old`` by ``new`` inside ``within`` (a top-level def/class name, or the whole module); ``count`` sites."""

    old: str
    new: str
    count: int
    within: str | None = None


def mutant(module_name: str, *edits: Edit) -> types.ModuleType:
    """A fresh module object built from ``module_name``'s source with ``edits`` applied."""
    original = importlib.import_module(module_name)
    source = inspect.getsource(original)
    regions: dict[tuple[int, int], list[Edit]] = {}
    for e in edits:  # regions located on the original source, then edited from the last one back
        if e.within is None:
            span = (0, len(source))
        else:
            obj: Any = original
            for part in e.within.split("."):
                obj = getattr(obj, part)
            block = inspect.getsource(obj)
            start = source.index(block)
            span = (start, start + len(block))
        regions.setdefault(span, []).append(e)
    spans = sorted(regions, reverse=True)
    assert all(a[0] >= b[1] for a, b in zip(spans, spans[1:], strict=False)), "overlapping edit regions"
    for start, end in spans:
        region = source[start:end]
        for e in regions[(start, end)]:
            found = region.count(e.old)
            where = e.within or "the module"
            assert found == e.count, f"{module_name}: {e.old!r} found {found} times in {where}, expected {e.count}"
            region = region.replace(e.old, e.new)
        source = source[:start] + region + source[end:]
    module = types.ModuleType(module_name)
    module.__file__ = original.__file__
    module.__package__ = original.__package__
    exec(compile(source, f"<mutant of {original.__file__}>", "exec"), module.__dict__)
    return module


def real(module_name: str) -> types.ModuleType:
    return importlib.import_module(module_name)


# -- what each case mutates ---------------------------------------------------------------------------
EMBEDDED = "cognis_memory.stores.embedded"
EMBEDDED_SEARCH = "cognis_memory.stores.embedded.search"
EMBEDDED_BASE = "cognis_memory.stores.embedded.base"
PG_VECTORS = "cognis_memory.stores.postgres.vectors"
PG_MEMORIES = "cognis_memory.stores.postgres.memories"
OS_INDEX = "cognis_memory.stores.opensearch.keyword_index"
OS_SEARCH = "cognis_memory.stores.opensearch.search"
FILTERS = "cognis_memory.stores.filters"
SPEAKERS = "cognis_memory.retrieval.speakers"
REDIS = "cognis_memory.caching.redis_cache"

#: SQL: keep the parameter bound but make the condition always true
NO_USER_SQLITE = Edit("m.user_id = ?", "(m.user_id = ? OR 1)", 2, "EmbeddedSearch._keyword_search")
NO_OWNER_TOKEN = Edit('owner : "{owner_token(owner)}" AND ', "", 1, "EmbeddedSearch._keyword_search")
NO_USER_INDEX_ROWS = Edit("AND user_id = ? AND is_current", "AND (user_id = ? OR 1) AND is_current", 1,
                          "EmbeddedSearch._load_index_rows")  # fmt: skip
NO_USER_FETCH = Edit("AND user_id = ? AND id IN", "AND (user_id = ? OR 1) AND id IN", 1, "EmbeddedBase._fetch")
NO_USER_PG_VECTOR = Edit("m.user_id = %s", "(m.user_id = %s OR TRUE)", 2, "PostgresVectorSearch.vector_search")
NO_USER_PG_HYDRATION = Edit("AND user_id = %s AND is_current AND id", "AND (user_id = %s OR TRUE) AND is_current AND id",
                            1)  # fmt: skip
NO_USER_OS_FILTER = Edit('{"term": {"user_id": flt.owner.user_id}},', "", 1, "opensearch_filter")
NO_USER_SPEAKERS = Edit("self._entries.get(owner)", "self._entries.get(owner.tenant_id)", 2, "SpeakerDirectory")
NO_USER_SPEAKERS_SET = Edit("self._entries[owner]", "self._entries[owner.tenant_id]", 1, "SpeakerDirectory")
NO_USER_SPEAKERS_MOVE = Edit("move_to_end(owner)", "move_to_end(owner.tenant_id)", 1, "SpeakerDirectory")
NO_USER_SPEAKERS_POP = Edit("pop(owner, None)", "pop(owner.tenant_id, None)", 1, "SpeakerDirectory")
NO_USER_CACHE_PREFIX = Edit("{_h(owner.tenant_id)}.{_h(owner.user_id)}", "{_h(owner.tenant_id)}", 1, "owner_prefix")


# -- builders: a store / cache / speaker directory from (possibly mutated) modules --------------------
@dataclass
class Parts:
    store: Any
    cache: Any = None
    speakers: Any = None  # a SpeakerDirectory class to use instead of the pipeline's own


class Env:
    def __init__(self, request: pytest.FixtureRequest, tmp_path, dim: int) -> None:
        self.request, self.tmp_path, self.dim = request, tmp_path, dim

    def embedded(self, *roles: types.ModuleType) -> Any:
        """An embedded store whose role classes from ``roles`` (modules of :mod:`cognis_memory.stores.embedded`,
        possibly mutated) come before its own: their methods are the ones that run."""
        store_cls = real(EMBEDDED).EmbeddedStore
        mutated = [  # the classes each module defines (a role module also holds the base class it imported)
            cls for mod in roles for cls in vars(mod).values()
            if isinstance(cls, type) and cls.__name__.startswith("Embedded") and cls.__module__ == mod.__name__
        ]  # fmt: skip
        cls = type("PlantedEmbeddedStore", (*mutated, store_cls), {}) if mutated else store_cls
        return cls(self.tmp_path / f"{unique_prefix('e')}.db", dim=self.dim, dim_short=DIM_SHORT)

    def postgres(self, *roles: types.ModuleType) -> Any:
        """A PostgreSQL store whose role objects come from ``roles`` (modules of :mod:`cognis_memory.stores.postgres`,
        possibly mutated) in place of its own: each role module's class is built on the same database."""
        pg = self.request.getfixturevalue("postgres_server")
        store = real("cognis_memory.stores.postgres").PostgresStore(
            pg.create_database(unique_prefix("db")), dim=self.dim, dim_short=DIM_SHORT, pool_max=4
        )
        for mod in roles:
            if hasattr(mod, "PostgresVectorSearch"):
                store.vectors = mod.PostgresVectorSearch(store)
            if hasattr(mod, "PostgresMemories"):
                store.memories = mod.PostgresMemories(store)
        return store

    def os_url(self) -> str:
        return self.request.getfixturevalue("opensearch_server").url

    def dual(self, os_mod: types.ModuleType, *pg_roles: types.ModuleType) -> Any:
        kw = os_mod.OpenSearchKeywordIndex(
            os_client(self.os_url()), index_prefix=unique_prefix("d"), replicas=0, refresh=True,
            search_timeout_s=2.0, write_timeout_s=5.0,
        )  # fmt: skip
        return real("cognis_memory.stores.dual").DualStore(self.postgres(*pg_roles), kw)

    def opensearch(self, search: types.ModuleType | None = None) -> Any:
        """The OpenSearch-only store's roles, the vector and keyword searches from ``search`` (a module like
        :mod:`cognis_memory.stores.opensearch.search`, possibly mutated) when given."""
        store = real("cognis_memory.stores.opensearch").OpenSearchStore(
            os_client(self.os_url()), index_prefix=unique_prefix("o"), dim=self.dim, dim_short=DIM_SHORT,
            replicas=0, refresh=True, search_timeout_s=5.0, write_timeout_s=5.0,
        )  # fmt: skip
        roles = store.roles()
        if search is None:
            return roles
        return dataclasses.replace(
            roles,
            vectors=search.OpenSearchVectorSearch(roles.memories),
            keywords=search.OpenSearchKeywordSearch(roles.memories),
        )

    def cache(self, mod: types.ModuleType) -> Any:
        return mod.RedisCache(self.request.getfixturevalue("redis_server").url, ttl_s=300)


def with_mutated_filters(module_name: str) -> types.ModuleType:
    """A fresh ``module_name`` whose OpenSearch filter translation (imported from :mod:`~cognis_memory.stores.filters`,
    where every backend's translation lives) lacks the user condition: the module is rebuilt with the
    names it imported from the filters module rebound to a mutant of it."""
    filters = mutant(FILTERS, NO_USER_OS_FILTER)
    module = mutant(module_name)
    rebound = 0
    for name, value in vars(filters).items():
        if name in vars(module) and vars(module)[name] is getattr(real(FILTERS), name, object()):
            setattr(module, name, value)
            rebound += 1
    assert rebound, f"{module_name} imports nothing from {FILTERS}: the planted filter would not reach it"
    return module


Case = Callable[[Env], Parts]
CASES: dict[str, Case] = {
    "embedded keyword query (FTS owner token and SQL user condition)": lambda env: Parts(
        env.embedded(mutant(EMBEDDED_SEARCH, NO_USER_SQLITE, NO_OWNER_TOKEN))
    ),
    "embedded vector query (index rows and their fetch)": lambda env: Parts(
        env.embedded(mutant(EMBEDDED_SEARCH, NO_USER_INDEX_ROWS), mutant(EMBEDDED_BASE, NO_USER_FETCH))
    ),
    "PostgreSQL vector query": lambda env: Parts(env.dual(real(OS_INDEX), mutant(PG_VECTORS, NO_USER_PG_VECTOR))),
    "OpenSearch filter clauses (OpenSearch-only store)": lambda env: Parts(
        env.opensearch(with_mutated_filters(OS_SEARCH))
    ),
    "dual keyword query (OpenSearch filter and PostgreSQL hydration)": lambda env: Parts(
        env.dual(with_mutated_filters(OS_INDEX), mutant(PG_MEMORIES, NO_USER_PG_HYDRATION))
    ),
    "speaker directory owner key": lambda env: Parts(
        env.embedded(),
        speakers=mutant(
            SPEAKERS, NO_USER_SPEAKERS, NO_USER_SPEAKERS_SET, NO_USER_SPEAKERS_MOVE, NO_USER_SPEAKERS_POP
        ).SpeakerDirectory,
    ),
    "Redis cache key prefix": lambda env: Parts(
        env.embedded(), cache=env.cache(mutant(REDIS, NO_USER_CACHE_PREFIX))
    ),  # fmt: skip
}
#: one layer of a two-layer filter removed: the other layer alone must still keep every owner apart
ONE_LAYER: dict[str, Case] = {
    "embedded keyword query without the FTS owner token": lambda env: Parts(env.embedded(mutant(EMBEDDED_SEARCH,
                                                                                              NO_OWNER_TOKEN))),
    "embedded keyword query without the SQL user condition": lambda env: Parts(env.embedded(mutant(EMBEDDED_SEARCH,
                                                                                                NO_USER_SQLITE))),
    "embedded vector index rows of the whole tenant": lambda env: Parts(
        env.embedded(mutant(EMBEDDED_SEARCH, NO_USER_INDEX_ROWS))
    ),
    "dual store without the OpenSearch user filter": lambda env: Parts(
        env.dual(with_mutated_filters(OS_INDEX))
    ),
}  # fmt: skip
CONTROLS: dict[str, Case] = {
    "embedded": lambda env: Parts(env.embedded(), cache=env.cache(real(REDIS))),
    "dual": lambda env: Parts(env.dual(real(OS_INDEX)), cache=env.cache(real(REDIS))),
    "opensearch": lambda env: Parts(env.opensearch(), cache=env.cache(real(REDIS))),
}


# -- the fixed program --------------------------------------------------------------------------------
def search(foreign: list[int], **overrides: Any) -> dict[str, Any]:
    return {**PLAIN_SEARCH, "words": ["coffee"], "foreign": foreign, "cached": False, "explain": True, **overrides}


def message(words: list[str]) -> dict[str, Any]:
    return {"words": words, "scope": "USER", "session": "s1", "agent": None, "ts": 1, "cmid": None}


#: owners 0 and 1 share a tenant ("x"); owner 2 is another tenant ("x:y"); see test_isolation.OWNER_SHAPES
SHAPES = [("x", "y:z"), ("x", "z"), ("x:y", "z")]
OPS: list[tuple[Any, ...]] = [
    ("add", 0, [message(["coffee", "tea"]), message(["berlin"])], False),
    ("add", 1, [message(["coffee", "rome"]), message(["tea"])], False),
    ("add", 2, [message(["coffee", "paris"])], False),
    ("drain",),
    *[
        ("search", who, search([other], recipe=recipe))
        for who in range(3)
        for other in range(3)
        if other != who
        for recipe in (None, "vector", "bm25", "vector_two_stage")
    ],  # fmt: skip
    ("search_all", search([], explain=False, cached=True)),
]


async def run_program(parts: Parts, embedder: Any, llm_url: str, truth: Truth) -> None:
    store = parts.store
    await store.open()
    try:
        cached, plain = services(store, embedder, parts.cache, llm_url)
        if parts.speakers is not None:  # the planted directory replaces the pipeline's own, in both services
            shared = parts.speakers(plain.retrieval.keywords)
            cached.retrieval.speakers = plain.retrieval.speakers = shared
        nonce = secrets.token_hex(3)
        owners = [Owner(f"{nonce}{t}", u) for t, u in SHAPES]
        prog = Program(ServiceExecutor(cached, plain), truth, owners)
        await prog.run(OPS)
        assert prog.stats["hits"] >= prog.stats["searches"], "the program's searches found too little to test anything"
    finally:
        if parts.cache is not None:
            await parts.cache.close()
        await store.close()


@pytest.fixture
def env(request, tmp_path, embedder) -> Env:
    return Env(request, tmp_path, embedder.dim)


#: the real code of every store, and one layer of a two-layer filter removed: both keep owners apart
MUST_PASS = {**{f"real code, {kind} store": c for kind, c in CONTROLS.items()}, **ONE_LAYER}


@pytest.mark.parametrize("case", list(MUST_PASS))
async def test_the_program_passes_where_every_owner_is_still_kept_apart(case, env, embedder, isolation_llm, truth):
    server, llm = isolation_llm
    before = len(llm.violations)
    await run_program(MUST_PASS[case](env), embedder, server.base_url, truth)
    assert not llm.violations[before:], llm.violations[before:][:3]


@pytest.mark.parametrize("case", list(CASES))
async def test_a_missing_owner_filter_is_caught(case, env, embedder, isolation_llm, truth):
    server, llm = isolation_llm
    before = len(llm.violations)
    parts = CASES[case](env)  # outside the try: a mutation site that is gone fails here, loudly
    try:
        await run_program(parts, embedder, server.base_url, truth)
    except Leak:
        return
    assert llm.violations[before:], f"planted leak not caught: {case}"
