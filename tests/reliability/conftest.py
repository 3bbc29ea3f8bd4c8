"""Fixtures of the reliability suite (isolation, bad input, faults, crash safety, load, forget).

Store fixtures build each store kind on the SHARED session servers with private namespaces
(a fresh PostgreSQL database, a unique OpenSearch index prefix, hashed Redis keys), so they
never touch other tests' data. Tests that stop, kill or restart a dependency start private
servers with ``cognis_dev.fixtures.start_or_skip`` instead.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio

from cognis_memory.stores.registry import STORES
from tests.llm_server import ScriptedLLMServer, change_facts, extract_message
from tests.reliability.helpers import COMMON_WORDS, TOKEN_RE, Truth, new_handle
from tests.store_kinds import StoreHandle

STORE_KINDS = list(STORES)  # every registered store kind


@pytest.fixture(scope="module", autouse=True)
def _torch_one_thread() -> Iterator[None]:
    """One torch thread while these tests run.

    Measured here: with the default two intra-op threads on this 2-core machine and other jobs
    running, one MiniLM sentence took 1.3-1.6 s (OpenMP threads spinning against each other);
    with one thread, 30 ms. Restored after the module.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def truth() -> Truth:
    return Truth()


# -- a scripted LLM that also watches for cross-owner prompts ----------------------------------------
class IsolationLLM:
    """Scripted extract questions and change checks whose prompts must only ever mention one owner's tokens.

    extract: one fact per distinct token of the message (at most two), about the first common word it
    names: subject the speaker, attribute ``<word> of <speaker>``, value ``<word> matters (<token>)``.
    The speaker's name (a token) in the attribute makes the "known attributes" of every question owned
    text too, so the prompt check would also see another owner's attributes shown to the model.
    change check: "yes" when the two facts are about the same attribute (a new value replaces the
    old), else "no". Hostile: every third change check is answered "yes" whatever it asks; code chose
    the candidates, so the worst this may do is retire a fact of the same person (the programs check
    that no owner ever sees, or loses, anything of another).
    """

    def __init__(self, truth: Truth) -> None:
        self.truth = truth
        self.violations: list[str] = []
        self.calls = 0
        self.checks = 0
        #: change checks answered "yes" only because of the hostile rule
        self.hostile_yes = 0
        self._lock = threading.Lock()

    def _check(self, schema: str, prompt: str) -> None:
        owners = {self.truth.token_owner.get(t) for t in TOKEN_RE.findall(prompt)} - {None}
        if len(owners) > 1:
            self.violations.append(f"{schema} prompt mixes owners {owners}: {prompt[:500]}")

    def __call__(self, schema: str, body: dict[str, Any]) -> dict[str, Any]:
        prompt = body["messages"][-1]["content"]
        self._check(schema, prompt)
        with self._lock:
            self.calls += 1
        if schema == "extracted_facts":
            speaker, text = extract_message(prompt)
            word = next((w for w in COMMON_WORDS if w in text.lower()), "something")
            facts = [
                {"subject": "speaker", "attribute": f"{word} of {speaker}", "value": f"{word} matters ({tok})"}
                for tok in dict.fromkeys(TOKEN_RE.findall(text))
            ]
            return {"facts": facts[:2]}
        assert schema == "fact_change", schema
        older, newer = change_facts(prompt)
        same = _attribute(older) == _attribute(newer)
        with self._lock:
            self.checks += 1
            hostile = self.checks % 3 == 0
            self.hostile_yes += hostile and not same
        return {"no_longer_true": "yes" if same or hostile else "no"}


def _attribute(fact: str) -> str:
    """The attribute of a stored fact's text ("<Subject>'s <attribute>: <value>")."""
    return fact.split(": ", 1)[0].split("'s ", 1)[-1].lower()


@pytest.fixture(scope="session")
def isolation_llm(truth: Truth) -> Iterator[tuple[ScriptedLLMServer, IsolationLLM]]:
    responder = IsolationLLM(truth)
    with ScriptedLLMServer(responder) as server:
        yield server, responder


# -- stores on the shared session servers ------------------------------------------------------------
async def open_store(kind: str, request: pytest.FixtureRequest, tmp_dir, dim: int, **kwargs: Any) -> StoreHandle:
    """A fresh, opened store of ``kind`` (one of STORE_KINDS) in a private namespace of the shared servers."""
    handle = new_handle(kind, request, tmp_dir, dim, **kwargs)
    await handle.store.open()
    return handle


@pytest_asyncio.fixture(scope="module", params=STORE_KINDS)
async def any_store(request, tmp_path_factory, embedder) -> AsyncIterator[StoreHandle]:
    """One opened store per kind, shared by a module's tests (owners are unique per test)."""
    handle = await open_store(request.param, request, tmp_path_factory.mktemp("store"), embedder.dim)
    yield handle
    await handle.store.close()


@pytest_asyncio.fixture(scope="module")
async def redis_cache(request) -> AsyncIterator[Any]:
    """A RedisCache on the shared session Redis (keys are per hashed owner, so no clash)."""
    from cognis_memory.caching.redis_cache import RedisCache

    server = request.getfixturevalue("redis_server")
    cache = RedisCache(server.url, ttl_s=300)
    yield cache
    await cache.close()


def dump(obj: Any) -> str:
    return json.dumps(obj, default=str, sort_keys=True)
