"""Fixtures of the reliability suite (isolation, bad input, faults, crash safety, load, forget).

Store fixtures build each store kind on the SHARED session servers with private namespaces
(a fresh PostgreSQL database, a unique OpenSearch index prefix, hashed Redis keys), so they
never touch other tests' data. Tests that stop, kill or restart a dependency start private
servers with ``cognis_dev.fixtures.start_or_skip`` instead.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio

from cognis_memory.stores.registry import STORES
from tests.llm_server import ScriptedLLMServer
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
    """Scripted extraction/decisions whose prompts must only ever mention one owner's tokens.

    extract: one fact per distinct token in the transcript, ``Fact: <word> matters (<token>)``.
    decide: NONE when the same text is already listed, UPDATE of a listed fact with the same
    token, else ADD; every third call also names an invented alias (``m999``), which the
    pipeline must reject.
    """

    def __init__(self, truth: Truth) -> None:
        self.truth = truth
        self.violations: list[str] = []
        self.calls = 0
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
            n = self.calls
        if schema == "extracted_facts":
            facts = []
            for tok in dict.fromkeys(TOKEN_RE.findall(prompt)):
                words = [w for w in COMMON_WORDS if w in prompt] or ["something"]
                facts.append({"content": f"Fact: {words[0]} matters ({tok})", "category": "preferences",
                              "scope": "USER", "event_date": None})  # fmt: skip
            return {"facts": facts[:2]}
        decisions = []
        for i, (fact, context) in enumerate(_parse_decide(prompt)):
            d: dict[str, Any] = {"fact": i, "action": "ADD", "target": None, "content": None, "category": None}
            toks = set(TOKEN_RE.findall(fact))
            if fact in context.values():
                d["action"] = "NONE"
            else:
                same = [
                    a for a, text in context.items() if text.startswith("Fact:") and toks & set(TOKEN_RE.findall(text))
                ]
                if same:
                    d.update(action="UPDATE", target=same[0], content=fact + " (again)")
            decisions.append(d)
        if n % 3 == 0 and decisions:
            decisions[0] = {**decisions[0], "action": "UPDATE", "target": "m999", "content": "hijack"}
        return {"decisions": decisions}


def _parse_decide(prompt: str) -> list[tuple[str, dict[str, str]]]:
    out: list[tuple[str, dict[str, str]]] = []
    for line in prompt.splitlines():
        if m := re.match(r"fact (\d+): (.*)", line):
            out.append((m.group(2), {}))
        elif (m := re.match(r"\s+- (m\d+): (.*)", line)) and out:
            out[-1][1][m.group(1)] = m.group(2)
    return out


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
