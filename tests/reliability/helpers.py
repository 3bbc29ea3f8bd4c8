"""Shared machinery of the reliability suite: stores of every kind (built by :mod:`tests.store_kinds`), owner
tokens, ground truth, leak checks.

Every owner (tenant, user) writes content carrying its own distinctive random tokens
(``zq`` + 10 hex digits), and every id the test learns is registered with its owner, so a
response, history entry, job, export or error message that carries another owner's data is
detectable by text alone: :meth:`Truth.check_blob` scans any JSON blob for foreign tokens and
foreign ids.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from cognis_memory.config import Settings
from cognis_memory.domain import Owner, Scope
from cognis_memory.service import MemoryService
from cognis_memory.telemetry.emitter import Telemetry
from tests.store_kinds import KINDS, StoreHandle

DIM_SHORT = 128
#: An owner's random token ("zq" + 10 hex) or speaker name (the same, capitalised: "Zq" + 10 hex).
TOKEN_RE = re.compile(r"[zZ]q[0-9a-f]{10}")
HEX32_RE = re.compile(r"(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])")

#: Words every owner uses, so that BM25 and vectors would match other owners' rows if a filter were missing.
COMMON_WORDS = [
    "coffee", "berlin", "guitar", "marathon", "sister", "python", "allergy", "salary", "lisbon", "tea",
    "dog", "promotion", "japan", "vegan", "piano",
]  # fmt: skip


class NullStream:
    """A text stream that drops everything (telemetry of long property runs)."""

    def write(self, s: str) -> int:
        return len(s)

    def flush(self) -> None:
        return None


def quiet_telemetry() -> Telemetry:
    return Telemetry(log_stream=NullStream(), metrics_stream=NullStream(), metrics_enabled=False)  # type: ignore[arg-type]


def seg(value: str) -> str:
    """One URL path segment: percent-encoded, with "." and ".." encoded too (HTTP clients resolve those)."""
    from urllib.parse import quote

    return "%2E" * len(value) if value in (".", "..") else quote(value, safe="")


def new_token() -> str:
    return "zq" + secrets.token_hex(5)


# -- stores ----------------------------------------------------------------------------------------
def new_handle(kind: str, request: Any, tmp_dir: Path, dim: int, **options: Any) -> StoreHandle:
    """A store of ``kind`` (a registered store kind) in a fresh namespace of the shared session servers
    (``request`` is the pytest request, for the server fixtures), built by its harness in
    :mod:`tests.store_kinds`: a new store kind adds its harness there and the reliability suites run on it."""
    return KINDS[kind].new(request, tmp_dir, dim, DIM_SHORT, **options)


def reopen(handle: StoreHandle, dim: int, **options: Any) -> StoreHandle:
    """A new store object on the same backend namespace: what a restarted process opens."""
    return KINDS[handle.kind].reopen(handle, dim, DIM_SHORT, **options)


def make_service(
    store: Any, embedder: Any, *, cache: Any = None, llm: Any = None, reranker: Any = None, **overrides: Any
):
    settings = Settings(**{"run_worker": False, "metrics_enabled": False, "job_backoff_s": 0.05, **overrides})
    return MemoryService(
        settings, store=store, embedder=embedder, cache=cache, llm=llm, reranker=reranker, telemetry=quiet_telemetry()
    )


# -- ground truth ----------------------------------------------------------------------------------
class Leak(AssertionError):
    """Another owner's data reached a response."""


@dataclass
class Truth:
    """Which tokens and ids belong to which owner (across every example of a run)."""

    token_owner: dict[str, Owner] = field(default_factory=dict)
    id_owner: dict[str, Owner] = field(default_factory=dict)
    tokens_of: dict[Owner, list[str]] = field(default_factory=dict)
    memory_ids_of: dict[Owner, dict[str, None]] = field(default_factory=dict)
    job_ids_of: dict[Owner, list[str]] = field(default_factory=dict)
    forgotten: set[Owner] = field(default_factory=set)
    speaker_of: dict[Owner, str] = field(default_factory=dict)

    def token(self, owner: Owner) -> str:
        tok = new_token()
        self.token_owner[tok] = owner
        self.tokens_of.setdefault(owner, []).append(tok)
        return tok

    def speaker(self, owner: Owner) -> str:
        """The owner's speaker name: a capitalised token, so that the speaker directory is exercised and a
        name that reaches another owner is caught like any other token."""
        name = self.speaker_of.get(owner)
        if name is None:
            name = self.speaker_of[owner] = "Z" + new_token()[1:]
            self.token_owner[name] = owner
        return name

    def register(self, owner: Owner, *ids: str, kind: str = "memory") -> None:
        for i in ids:
            prev = self.id_owner.setdefault(i, owner)
            if prev != owner:
                raise Leak(f"id {i} was handed to {owner} but belongs to {prev}")
            if kind == "memory":
                self.memory_ids_of.setdefault(owner, {})[i] = None
            elif kind == "job":
                self.job_ids_of.setdefault(owner, []).append(i)

    def check_blob(self, owner: Owner, blob: Any, where: str, *, ids: bool = True, echo: str = "") -> None:
        """No foreign token, and (with ``ids``) no foreign registered id, anywhere in ``blob``.

        Tokens the caller itself sent (``echo``, e.g. the query, which explain mode repeats) are
        allowed at this level; every memory in the blob is still checked strictly by ``check_memory``.
        """
        text = blob if isinstance(blob, str) else json.dumps(blob, default=str)
        echoed = set(TOKEN_RE.findall(echo))
        for tok in TOKEN_RE.findall(text):
            o = self.token_owner.get(tok)
            if o is not None and o != owner and tok not in echoed:
                raise Leak(f"{where}: token {tok} of {o} reached {owner}: {text[:600]}")
        if ids:
            for h in HEX32_RE.findall(text):
                o = self.id_owner.get(h)
                if o is not None and o != owner:
                    raise Leak(f"{where}: id {h} of {o} reached {owner}: {text[:600]}")

    def check_memory(self, owner: Owner, m: dict[str, Any], where: str) -> None:
        """A memory (as a JSON dict) belongs to ``owner`` by owner fields, tokens and id."""
        if m.get("user_id") != owner.user_id or m.get("tenant_id", owner.tenant_id) != owner.tenant_id:
            raise Leak(f"{where}: memory {m.get('id')} of ({m.get('tenant_id')}, {m.get('user_id')}) reached {owner}")
        toks = TOKEN_RE.findall(m.get("content", ""))
        if not toks:
            raise Leak(f"{where}: memory {m.get('id')} carries no token of {owner}: {m.get('content')!r}")
        self.check_blob(owner, m, where)
        o = self.id_owner.get(m["id"])
        if o is None:  # first sight (an extracted fact): owned by whoever owns its tokens, which we just checked
            self.register(owner, m["id"])


def check_filters(m: dict[str, Any], flt: dict[str, Any], where: str) -> None:
    """A search hit satisfies the filter it was searched with (and is current)."""
    assert m["is_current"] and not m["deleted"], f"{where}: non-current memory {m['id']} in results"
    if flt.get("scopes") is not None:
        assert m["scope"] in flt["scopes"], f"{where}: scope {m['scope']} outside {flt['scopes']}"
    if flt.get("categories") is not None:
        assert m["category"] in flt["categories"], f"{where}: category {m['category']} outside {flt['categories']}"
    if flt.get("kinds") is not None:
        assert m["kind"] in flt["kinds"], f"{where}: kind {m['kind']} outside {flt['kinds']}"
    if flt.get("session_id") is not None and m["scope"] == Scope.CONTEXT.value:
        assert m["session_id"] == flt["session_id"], f"{where}: CONTEXT memory of session {m['session_id']}"
    if flt.get("agent_id") is not None:
        assert m["agent_id"] == flt["agent_id"], f"{where}: agent {m['agent_id']} != {flt['agent_id']}"
    if flt.get("time_from") is not None or flt.get("time_to") is not None:
        eff = m.get("event_time") or m.get("message_time")
        assert eff is not None, f"{where}: memory without time passed a time filter"
        t = datetime.fromisoformat(eff) if isinstance(eff, str) else eff
        if flt.get("time_from") is not None:
            assert t >= flt["time_from"], f"{where}: {t} before {flt['time_from']}"
        if flt.get("time_to") is not None:
            assert t <= flt["time_to"], f"{where}: {t} after {flt['time_to']}"
