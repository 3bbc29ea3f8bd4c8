"""The in-process service: every operation of the HTTP API on one object built from config.

>>> import asyncio
>>> from cognis_memory.service import MemoryService, MessageIn
>>> async def main():
...     async with MemoryService.from_settings(data_dir="/tmp/demo") as svc:
...         await svc.add_messages("acme", "alice", [MessageIn(content="I moved to Lisbon", speaker="Alice")])
...         found = await svc.search("acme", "alice", "Where does Alice live?")
...         print(found.hits[0].memory.content)

Input validation lives here (not in the web layer), so the API, the CLI and Python callers
get the same checks and the same :class:`~cognis_memory.errors.InvalidInputError`s naming
the offending field. Telemetry (one log line, EMF metrics and, when traces are on, spans per request)
is emitted here.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .api_keys import LEGACY_LIST_KEY_NAME, MAX_KEY_LENGTH, hash_api_key, parse_api_key_list
from .config import Settings
from .domain import (
    Category,
    Job,
    JobStatus,
    Memory,
    MemoryKind,
    Message,
    Owner,
    Scope,
    utcnow,
)
from .errors import InvalidInputError, NotFoundError
from .ingest.categorizer import EmbeddingCategorizer
from .ingest.batching import Priority
from .ingest.embedding import MatryoshkaEncoder
from .ingest.pipeline import RESERVED_METADATA_KEYS, IngestPipeline, IngestResult
from .ingest.worker import JobWorker
from .prompt_context import AssembledContext, assemble_context
from .providers.base import LLM, Embedder, Reranker
from .retrieval.config import RetrievalConfig, get_recipe
from .retrieval.pipeline import (
    RetrievalPipeline,
    SearchHit,
    SearchQuery,
    SearchResponse,
)
from .retrieval.query_analysis import QueryAnalysis
from .serialization import memory_from_dict, memory_to_dict
from .stores.base import ApiKeyRecord, UserSummary
from .stores.roles import StoreBackend, StoreBundle, as_bundle
from .caching.result_cache import Cache, NullCache
from .telemetry import names
from .telemetry.emitter import Telemetry
from .validation import (
    MAX_METADATA_DEPTH,
    MAX_SPEAKER_CHARS,
    check_id,
    check_int,
    check_name,
    check_query,
    check_text,
    check_time,
    enum_set,
    enum_value,
    metadata_depth,
    unstorable_text,
)

MAX_CONTEXT_TOKENS = 32000


@dataclass(slots=True)
class MessageIn:
    """A message as a caller submits it."""

    content: str
    speaker: str | None = None
    role: str = "user"
    timestamp: datetime | None = None
    session_id: str | None = None
    agent_id: str | None = None
    client_message_id: str | None = None
    scope: Scope = Scope.USER
    metadata: dict[str, Any] = field(default_factory=dict)


class MemoryService:
    """Builds and owns the pipelines, the store, the cache and the worker.

    ``store`` is a :class:`~cognis_memory.stores.roles.StoreBundle` (what ``build_store`` returns) or a
    backend object with ``roles()`` (``EmbeddedStore(...)``); each pipeline gets only the roles it uses."""

    def __init__(
        self,
        settings: Settings,
        *,
        store: StoreBundle | StoreBackend,
        embedder: Embedder,
        cache: Cache | None = None,
        llm: LLM | None = None,
        reranker: Reranker | None = None,
        telemetry: Telemetry | None = None,
        retrieval_config: RetrievalConfig | None = None,
    ) -> None:
        self.settings = settings
        self.stores = stores = as_bundle(store)
        self.cache = cache or NullCache()
        self._owns_telemetry = telemetry is None  # then its trace exporter is flushed and stopped on close
        self.telemetry = telemetry or Telemetry.from_settings(settings)
        self.encoder = MatryoshkaEncoder.from_settings(settings, embedder)
        self.retrieval_config = retrieval_config or get_recipe(settings.recipe)
        self.ingest = IngestPipeline(
            self.encoder,
            messages=stores.messages,
            memories=stores.memories,
            jobs=stores.jobs,
            vectors=stores.vectors,
            cache=self.cache,
            categorizer=EmbeddingCategorizer(self.encoder),
            llm=llm,
            job_max_attempts=settings.job_max_attempts,
            memory_max_bytes=settings.memory_max_bytes,
        )
        self.retrieval = RetrievalPipeline(
            self.encoder,
            vectors=stores.vectors,
            keywords=stores.keywords,
            memories=stores.memories,
            cache=self.cache,
            config=self.retrieval_config,
            reranker=reranker,
            reranker_timeout_s=settings.reranker_timeout_ms / 1000,
        )
        self.worker = JobWorker(
            self.ingest,
            self.telemetry,
            backoff_s=settings.job_backoff_s,
            lease_s=settings.job_lease_s,
            concurrency=settings.worker_concurrency,
        )
        self._listed_keys = self._bootstrap_api_keys()
        self._started = False

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_settings(
        cls, settings: Settings | None = None, *, telemetry: Telemetry | None = None, **overrides: Any
    ) -> MemoryService:
        """Build every component named by the settings (argument > environment > default)."""
        from .providers.factory import build_embedder, build_llm, build_reranker
        from .caching.factory import build_cache
        from .stores.factory import build_store

        settings = settings.model_copy(update=overrides) if settings else Settings(**overrides)
        embedder = build_embedder(settings)
        dim = settings.embedding_dim_full or embedder.dim
        return cls(
            settings,
            store=build_store(settings, dim=dim, dim_short=settings.embedding_dim_short),
            embedder=embedder,
            cache=build_cache(settings),
            llm=build_llm(settings),
            reranker=build_reranker(settings),
            telemetry=telemetry,
        )

    async def start(self, *, run_worker: bool | None = None) -> MemoryService:
        if self._started:
            return self
        await self.stores.open()
        if self.settings.run_worker if run_worker is None else run_worker:
            self.worker.start()
        self._started = True
        return self

    async def close(self) -> None:
        if not self._started:
            return
        await self.worker.stop()
        await asyncio.to_thread(self.encoder.close)
        await self.cache.close()
        await self.stores.close()
        if self._owns_telemetry:
            self.telemetry.close()
        self._started = False

    async def __aenter__(self) -> MemoryService:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- API keys -----------------------------------------------------------------------
    def _bootstrap_api_keys(self) -> dict[str, ApiKeyRecord]:
        """The keys of ``COGNIS_API_KEYS`` by hash, held in memory only (see :mod:`cognis_memory.api_keys`).
        A malformed list raises :class:`~cognis_memory.api_keys.ApiKeyListError`, so the service never starts."""
        if self.settings.api_keys is None:
            return {}
        return parse_api_key_list(self.settings.api_keys.get_secret_value(), check_id)

    async def create_api_key(self, tenant_id: str, *, read_only: bool = False, name: str = "") -> str:
        """A new random key for the tenant; only its hash is stored, so show it once."""
        check_id("tenant_id", tenant_id)
        if name == LEGACY_LIST_KEY_NAME:
            raise InvalidInputError("name", f"{LEGACY_LIST_KEY_NAME!r} is reserved (keys copied from COGNIS_API_KEYS)")
        key = "cgm_" + secrets.token_urlsafe(32)
        await self.stores.api_keys.put_api_key(ApiKeyRecord(hash_api_key(key), tenant_id, read_only=read_only, name=name))
        return key

    async def authenticate(self, key: str) -> ApiKeyRecord | None:
        """The key's record: a key of ``COGNIS_API_KEYS`` that was never revoked, or a stored key."""
        if not key or len(key) > MAX_KEY_LENGTH:
            return None
        key_hash = hash_api_key(key)
        listed = self._listed_keys.get(key_hash)
        if listed is not None:
            return None if await self.stores.api_keys.api_key_revoked(key_hash) else listed
        record = await self.stores.api_keys.get_api_key(key_hash)
        if record is None or record.name == LEGACY_LIST_KEY_NAME:  # an earlier version's copy of a listed key
            return None
        return record

    async def revoke_api_key(self, key: str) -> bool:
        """Revoke a key for good, in every process: a stored key, or a key of ``COGNIS_API_KEYS`` (whether or
        not this process was given that list). Returns whether the key was valid here until now."""
        if not isinstance(key, str) or not key:
            raise InvalidInputError("key", "is required")
        key_hash = hash_api_key(key)
        listed = key_hash in self._listed_keys and not await self.stores.api_keys.api_key_revoked(key_hash)
        removed = await self.stores.api_keys.revoke_api_key(key_hash)
        return listed or removed

    # -- ingest -------------------------------------------------------------------------
    def _owner(self, tenant_id: str, user_id: str) -> Owner:
        check_id("tenant_id", tenant_id)
        check_id("user_id", user_id)
        return Owner(tenant_id, user_id)

    def _to_message(self, owner: Owner, i: int, m: MessageIn, now: datetime) -> Message:
        f = f"messages[{i}]"
        content = check_text(f"{f}.content", m.content, self.settings.max_message_bytes)
        check_id(f"{f}.client_message_id", m.client_message_id, required=False)
        check_id(f"{f}.session_id", m.session_id, required=False)
        check_id(f"{f}.agent_id", m.agent_id, required=False)
        if m.speaker is not None:
            check_name(f"{f}.speaker", m.speaker)
            check_text(f"{f}.speaker", m.speaker, 4 * MAX_SPEAKER_CHARS)
        if m.scope is Scope.CONTEXT and not m.session_id:
            raise InvalidInputError(f"{f}.session_id", "is required for CONTEXT scope")
        if not isinstance(m.metadata, dict):
            raise InvalidInputError(f"{f}.metadata", "must be an object")
        for k in m.metadata:  # in the caller's order, so the error names the first one
            if k in RESERVED_METADATA_KEYS:
                raise InvalidInputError(f"{f}.metadata.{k}", "is reserved for the service; use another key")
        if metadata_depth(m.metadata) > MAX_METADATA_DEPTH:
            raise InvalidInputError(f"{f}.metadata", f"is nested deeper than {MAX_METADATA_DEPTH} levels")
        if (why := unstorable_text(m.metadata)) is not None:  # PostgreSQL jsonb refuses both (a 500 before)
            raise InvalidInputError(f"{f}.metadata", why)
        metadata = dict(m.metadata)
        if len(json.dumps(metadata, default=str)) > 8192:
            raise InvalidInputError(f"{f}.metadata", "is larger than 8 KB")
        metadata["scope"] = m.scope.value
        return Message(
            tenant_id=owner.tenant_id,
            user_id=owner.user_id,
            content=content,
            timestamp=check_time(f"{f}.timestamp", m.timestamp) or now,
            speaker=m.speaker,
            role=m.role,
            session_id=m.session_id,
            agent_id=m.agent_id,
            client_message_id=m.client_message_id,
            metadata=metadata,
        )

    async def add_messages(
        self,
        tenant_id: str,
        user_id: str,
        messages: Sequence[MessageIn],
        *,
        background: bool = False,
        request_id: str | None = None,
        client_request_id: str | None = None,
    ) -> IngestResult:
        owner = self._owner(tenant_id, user_id)
        if not messages:
            raise InvalidInputError("messages", "must contain at least one message")
        if len(messages) > self.settings.max_messages_per_request:
            raise InvalidInputError("messages", f"at most {self.settings.max_messages_per_request} per request")
        now = utcnow()
        msgs = [self._to_message(owner, i, m, now) for i, m in enumerate(messages)]
        ids = {"request_id": request_id, "client_request_id": client_request_id}
        with self.telemetry.request(names.OPERATION_INGEST, tenant_id=tenant_id, user_id=user_id, **ids) as rec:
            result = await self.ingest.ingest(owner, msgs, rec, background=background)
            if result.job is not None:
                self.worker.notify()
            rec.fields.update(messages=len(msgs), messages_created=sum(result.created), background=background)
            return result

    # -- retrieval ----------------------------------------------------------------------
    async def search(
        self,
        tenant_id: str,
        user_id: str,
        query: str,
        *,
        limit: int = 10,
        scopes: Sequence[Scope | str] | None = None,
        session_id: str | None = None,
        categories: Sequence[Category | str] | None = None,
        kinds: Sequence[MemoryKind | str] | None = None,
        agent_id: str | None = None,
        time_from: datetime | None = None,
        time_to: datetime | None = None,
        include_history: bool = False,
        explain: bool = False,
        now: datetime | None = None,
        recipe: str | None = None,
        config: RetrievalConfig | None = None,
        request_id: str | None = None,
        client_request_id: str | None = None,
    ) -> SearchResponse:
        owner = self._owner(tenant_id, user_id)
        check_query("query", query)
        check_int("limit", limit, 1, 100)
        check_id("session_id", session_id, required=False)
        check_id("agent_id", agent_id, required=False)
        t_from, t_to = check_time("time_from", time_from), check_time("time_to", time_to)
        if t_from and t_to and t_from > t_to:
            raise InvalidInputError("time_from", "must not be after time_to")
        q = SearchQuery(
            owner=owner,
            text=query,
            limit=limit,
            scopes=enum_set("scopes", Scope, scopes),
            session_id=session_id,
            categories=enum_set("categories", Category, categories),
            kinds=enum_set("kinds", MemoryKind, kinds),
            agent_id=agent_id,
            time_from=t_from,
            time_to=t_to,
            include_history=include_history,
            explain=explain,
            now=check_time("now", now),
        )
        try:
            cfg = config or (get_recipe(recipe) if recipe else None)
        except ValueError as exc:
            raise InvalidInputError("recipe", str(exc).removeprefix("recipe: ")) from None
        ids = {"request_id": request_id, "client_request_id": client_request_id}
        with self.telemetry.request(names.OPERATION_SEARCH, tenant_id=tenant_id, user_id=user_id, **ids) as rec:
            key = None if explain else _search_cache_key(q, cfg or self.retrieval_config)
            if key is not None:
                cached = await self.cache.get_search(owner, key)
                if cached is not None:
                    rec.fields["cache"] = "hit"
                    return _response_from_cache(cached, self.retrieval.analyze(q, cfg or self.retrieval_config))
            response = await self.retrieval.search(q, rec, cfg)
            if key is not None and not response.degraded:
                await self.cache.set_search(owner, key, _response_to_cache(response))
            return response

    async def context(
        self,
        tenant_id: str,
        user_id: str,
        message: str,
        *,
        max_tokens: int = 800,
        with_ids: bool = False,
        limit: int = 20,
        request_id: str | None = None,
        **search_options: Any,
    ) -> tuple[AssembledContext, SearchResponse]:
        """The memories relevant to ``message`` as a text block of at most ``max_tokens`` (estimated)
        tokens, for a system prompt; history questions bring the earlier versions along
        (see :mod:`cognis_memory.prompt_context`). ``search_options`` are :meth:`search`'s filters
        and options (session_id, scopes, time_from, ...). Also returns the search it was built from."""
        check_int("max_tokens", max_tokens, 50, MAX_CONTEXT_TOKENS)
        check_query("message", message)
        response = await self.search(tenant_id, user_id, message, limit=limit, request_id=request_id, **search_options)
        assembled = assemble_context(
            [(h.memory, h.history) for h in response.hits], max_tokens=max_tokens, with_ids=with_ids
        )
        return assembled, response

    # -- memories -----------------------------------------------------------------------
    async def get_memory(self, tenant_id: str, user_id: str, memory_id: str) -> Memory:
        owner = self._owner(tenant_id, user_id)
        check_id("memory_id", memory_id)
        memory = await self.stores.memories.get_memory(owner, memory_id)
        if memory is None:
            raise NotFoundError(f"memory {memory_id} not found")
        return memory

    async def history(self, tenant_id: str, user_id: str, memory_id: str) -> list[Memory]:
        owner = self._owner(tenant_id, user_id)
        check_id("memory_id", memory_id)
        chain = await self.stores.memories.get_chain(owner, memory_id)
        if not chain:
            raise NotFoundError(f"memory {memory_id} not found")
        return chain

    async def update_memory(
        self,
        tenant_id: str,
        user_id: str,
        memory_id: str,
        *,
        content: str | None = None,
        category: Category | str | None = None,
        event_time: datetime | None = None,
    ) -> Memory:
        """Write a new version of a current memory (the old one stays in its history)."""
        owner = self._owner(tenant_id, user_id)
        current = await self.get_memory(tenant_id, user_id, memory_id)
        changes: dict[str, Any] = {}
        if content is not None:
            changes["content"] = check_text("content", content, self.settings.memory_max_bytes)
            full, short = await self.encoder.encode_async([changes["content"]], Priority.QUERY)
            changes["embedding"], changes["embedding_short"] = full[0], short[0]
        if category is not None:
            changes["category"] = enum_value("category", Category, category)
        if event_time is not None:
            changes["event_time"] = check_time("event_time", event_time)
        if not changes:
            raise InvalidInputError("body", "nothing to update: give content, category or event_time")
        if current.kind is MemoryKind.RAW and "content" in changes:
            changes["kind"] = MemoryKind.FACT  # an edited message is no longer the raw message
        new = await self.stores.memories.write_version(owner, memory_id, current.next_version(**changes))
        await self.cache.invalidate(owner)
        return new

    async def delete_memory(self, tenant_id: str, user_id: str, memory_id: str) -> Memory:
        """Soft delete: a tombstone version on top of the chain; history keeps the rest."""
        owner = self._owner(tenant_id, user_id)
        current = await self.get_memory(tenant_id, user_id, memory_id)
        tomb = await self.stores.memories.write_version(owner, memory_id, current.tombstone())
        await self.cache.invalidate(owner)
        return tomb

    async def forget_user(self, tenant_id: str, user_id: str) -> dict[str, int]:
        """Hard delete of everything of one user, in the store and the cache."""
        owner = self._owner(tenant_id, user_id)
        counts = await self.stores.memories.forget_user(owner)
        counts["cache_entries"] = await self.cache.forget_user(owner)
        self.retrieval.speakers.forget(owner)  # speaker names learnt from the user's memories
        self.encoder.query_cache.forget_user(owner.tenant_id, owner.user_id)  # the user's cached queries
        return counts

    async def list_memories(
        self, tenant_id: str, user_id: str, *, include_history: bool = False, limit: int = 100, after: str | None = None
    ) -> list[Memory]:
        owner = self._owner(tenant_id, user_id)
        check_int("limit", limit, 1, 1000)
        check_id("after", after, required=False)
        return await self.stores.memories.list_memories(owner, include_history=include_history, limit=limit, after_id=after)

    async def list_users(self, tenant_id: str, *, limit: int = 100, after: str | None = None) -> list[UserSummary]:
        """The tenant's users, ordered by user id, after the ``after`` user id (the paging cursor)."""
        check_id("tenant_id", tenant_id)
        check_int("limit", limit, 1, 1000)
        check_id("after", after, required=False)
        return await self.stores.memories.list_users(tenant_id, limit=limit, after_user_id=after)

    async def export(self, tenant_id: str, user_id: str, *, include_history: bool = True) -> AsyncIterator[Memory]:
        owner = self._owner(tenant_id, user_id)
        after: str | None = None
        while True:
            page = await self.stores.memories.list_memories(owner, include_history=include_history, limit=500, after_id=after)
            for m in page:
                yield m
            if len(page) < 500:
                return
            after = page[-1].id

    async def get_job(self, tenant_id: str, user_id: str, job_id: str) -> Job:
        owner = self._owner(tenant_id, user_id)
        check_id("job_id", job_id)
        job = await self.stores.jobs.get_job(owner, job_id)
        if job is None:
            raise NotFoundError(f"job {job_id} not found")
        return job

    async def list_jobs(
        self, tenant_id: str, *, status: JobStatus | str | None = None, limit: int = 100, after: str | None = None
    ) -> list[Job]:
        """The tenant's ingest jobs (every user's), optionally of one status (``dead``: the dead letters),
        ordered by id; pass the last id of a page as ``after`` for the next."""
        check_id("tenant_id", tenant_id)
        wanted = None if status is None else enum_value("status", JobStatus, status)
        check_int("limit", limit, 1, 1000)
        check_id("after", after, required=False)
        return await self.stores.jobs.list_jobs(tenant_id, status=wanted, limit=limit, after_id=after)

    # -- health -------------------------------------------------------------------------
    #: Components whose failure degrades answers instead of making the service unready:
    #: the dual store answers from PostgreSQL when OpenSearch is down; caches are optional.
    OPTIONAL_COMPONENTS = {"dual": frozenset({"opensearch"})}

    async def readiness(self) -> tuple[bool, dict[str, bool]]:
        """(ready, per-component reachability). Ready when every required component answers."""
        checks = await self.stores.health()
        optional = self.OPTIONAL_COMPONENTS.get(self.stores.name, frozenset())
        ready = all(ok for name, ok in checks.items() if name not in optional)
        if self.cache.name != "none":
            checks[f"cache:{self.cache.name}"] = await self.cache.health()
        return ready, checks


def _search_cache_key(q: SearchQuery, cfg: RetrievalConfig) -> str:
    """A digest of everything that determines a search's answer (the owner is in the cache key)."""
    now = q.now or utcnow().replace(minute=0, second=0, microsecond=0)  # relative queries: hourly
    parts = {
        "text": q.text,
        "limit": q.limit,
        "scopes": sorted(q.scopes or []),
        "session_id": q.session_id,
        "categories": sorted(q.categories or []),
        "kinds": sorted(q.kinds or []),
        "agent_id": q.agent_id,
        "time_from": q.time_from.isoformat() if q.time_from else None,
        "time_to": q.time_to.isoformat() if q.time_to else None,
        "history": q.include_history,
        "now": now.isoformat(),
        "config": cfg.model_dump(),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _response_to_cache(response: SearchResponse) -> dict[str, Any]:
    return {
        "hits": [
            {
                "memory": memory_to_dict(h.memory),
                "score": h.score,
                "history": [memory_to_dict(m) for m in h.history],
            }
            for h in response.hits
        ]
    }


def _response_from_cache(cached: dict[str, Any], analysis: QueryAnalysis) -> SearchResponse:
    """A cached answer with its (cheap, deterministic, recomputed) query analysis."""
    hits = [
        SearchHit(
            memory=memory_from_dict(h["memory"]),
            score=float(h["score"]),
            history=[memory_from_dict(m) for m in h["history"]],
        )
        for h in cached["hits"]
    ]
    return SearchResponse(hits=hits, analysis=analysis)
