"""The in-process service: every operation of the HTTP API on one object built from config.

>>> import asyncio
>>> from cognis_memory.service import MemoryService, MessageBody
>>> async def main():
...     async with MemoryService.from_settings(data_dir="/tmp/demo") as svc:
...         await svc.add_messages("acme", "alice", [MessageBody(content="I moved to Lisbon", speaker="Alice")])
...         found = await svc.search("acme", "alice", "Where does Alice live?")
...         print(found.hits[0].memory.content)

Every operation checks its input with :mod:`cognis_memory.validation` before it touches
anything (not in the web layer), so the API, the CLI and Python callers get the same checks and
the same :class:`~cognis_memory.errors.InvalidInputError`s naming the offending field. Searches go
through :class:`~cognis_memory.retrieval.cached.CachedRetrieval` (the pipeline behind the
search-result cache). Telemetry (one log line, EMF metrics and, when traces are on, spans per request)
is emitted here.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any

from . import wiring
from .api_keys import hash_api_key as hash_api_key  # importable here before the key registry's split
from .caching.result_cache import Cache
from .config import Settings
from .domain import Category, Job, JobStatus, Memory, Message, utcnow
from .errors import InvalidInputError, NotFoundError
from .ingest.pipeline import IngestResult, extraction_metrics
from .key_registry import KeyRegistry
from .memory_edits import WRITE_ATTEMPTS as WRITE_ATTEMPTS  # importable here before the split
from .memory_edits import MemoryEditor
from .message_body import MessageBody
from .paging import Listing, decode_cursor, encode_cursor
from .prompt_block import PromptBlock, build_prompt_block
from .providers.base import LLM, Embedder, Reranker
from .providers.model_lifecycle import BedrockModelLifecycleCheck, ModelLifecycle, log_lifecycle
from .retrieval.pipeline import SearchQuery, SearchResponse
from .retrieval.recipes import RetrievalConfig
from .search_filter import MemoryFilter
from .stores.roles import StoreBackend, StoreBundle
from .stores.values import ApiKeyRecord, PagePosition, UserSummary
from .telemetry import names
from .telemetry.emitter import Telemetry
from .validation import (
    FilterRequest,
    check_filter,
    check_id,
    check_int,
    check_messages,
    check_owner,
    check_query,
    check_time,
    context_query,
    enum_value,
)
from .wiring import ServiceComponents

MAX_PROMPT_BLOCK_TOKENS = 32000
#: the job listing's filter for every job whose facts are still to come
PENDING = "pending"
PENDING_STATUSES = (JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.FAILED)


__all__ = ["MAX_PROMPT_BLOCK_TOKENS", "FilterRequest", "MemoryFilter", "MemoryService", "MessageBody"]


class MemoryService:
    """Every operation of the API over the components it is handed (:class:`~.wiring.ServiceComponents`: the
    store, the cache, the pipelines, the worker), which :mod:`.wiring` builds from the settings.

    ``MemoryService.from_settings(...)`` builds everything the settings name. A caller that has its own store
    and embedder (tests, benchmarks, an application that opens its store itself) hands them over instead of
    ``components``: ``MemoryService(settings, store=..., embedder=...)``, with an optional ``cache``, ``llm``,
    ``reranker``, ``telemetry``, ``retrieval_config`` and ``model_check``, and :func:`~.wiring.build_components`
    builds the rest. ``store`` is a :class:`~cognis_memory.stores.roles.StoreBundle` (what
    :func:`~.wiring.build_store` returns) or a backend object with ``roles()`` (``EmbeddedStore(...)``)."""

    def __init__(
        self,
        settings: Settings,
        components: ServiceComponents | None = None,
        *,
        store: StoreBundle | StoreBackend | None = None,
        embedder: Embedder | None = None,
        cache: Cache | None = None,
        llm: LLM | None = None,
        reranker: Reranker | None = None,
        telemetry: Telemetry | None = None,
        retrieval_config: RetrievalConfig | None = None,
        model_check: BedrockModelLifecycleCheck | None = None,
    ) -> None:
        parts = (store, embedder, cache, llm, reranker, telemetry, retrieval_config, model_check)
        if components is None:
            if store is None or embedder is None:
                raise TypeError("MemoryService needs its components, or a store and an embedder to build them on")
            components = wiring.build_components(
                settings,
                store=store,
                embedder=embedder,
                cache=cache,
                llm=llm,
                reranker=reranker,
                telemetry=telemetry,
                retrieval_config=retrieval_config,
                model_check=model_check,
            )
        elif any(part is not None for part in parts):
            raise TypeError("MemoryService takes its components, or the parts to build them from, not both")
        self.settings = settings
        #: asked once at start (never fails the start); its answer is ``llm_model`` and part of ``/ready``
        self._model_check = components.model_check
        self.llm_model: ModelLifecycle | None = None
        self.stores = components.stores
        self.cache = components.cache
        self._owns_telemetry = components.owns_telemetry  # then its trace exporter is flushed and stopped on close
        self.telemetry = components.telemetry
        self.encoder = components.encoder
        #: named recipes with the settings' recipe_overrides applied, by name (built on first use)
        self._recipes: dict[str, RetrievalConfig] = {}
        self.retrieval_config = components.retrieval_config
        self.ingest = components.ingest
        self.retrieval = components.retrieval
        self.cached_retrieval = components.cached_retrieval
        self.worker = components.worker
        self.outbox_report = components.outbox_report
        api_keys = settings.api.api_keys
        #: the API keys (a malformed ``COGNIS_API_KEYS`` raises ApiKeyListError here, so the service never starts)
        self.keys = KeyRegistry(self.stores.api_keys, None if api_keys is None else api_keys.get_secret_value())
        self.edits = MemoryEditor(
            self.stores.memories, self.cache, self.encoder, memory_max_bytes=settings.ingest.memory_max_bytes
        )
        self._started = False

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_settings(
        cls, settings: Settings | None = None, *, telemetry: Telemetry | None = None, **overrides: Any
    ) -> MemoryService:
        """Build every component named by the settings (argument > environment > default), through :mod:`.wiring`."""
        settings = settings.replace(**overrides) if settings else Settings(**overrides)
        return cls(settings, wiring.components_from_settings(settings, telemetry=telemetry))

    async def start(self, *, run_worker: bool | None = None) -> MemoryService:
        if self._started:
            return self
        await self.stores.open()
        if self._model_check is not None:
            self.llm_model = await asyncio.to_thread(self._model_check.check)
            log_lifecycle(self.llm_model)
        if self.settings.jobs.run_worker if run_worker is None else run_worker:
            # the process that runs the background work also reports the outbox backlog (not a CLI command)
            self.worker.start()
            if self.outbox_report is not None:
                self.outbox_report.start()
        self._started = True
        return self

    async def close(self) -> None:
        if not self._started:
            return
        await self.worker.stop()
        if self.outbox_report is not None:
            await self.outbox_report.stop()  # before the store closes the pool it reads through
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

    # -- API keys (:mod:`.key_registry`) -----------------------------------------------
    async def create_api_key(self, tenant_id: str, *, read_only: bool = False, name: str = "") -> str:
        """A new random key for the tenant; only its hash is stored, so show it once."""
        return await self.keys.create(tenant_id, read_only=read_only, name=name)

    async def authenticate(self, key: str) -> ApiKeyRecord | None:
        """The key's record: a key of ``COGNIS_API_KEYS`` that was never revoked, or a stored key."""
        return await self.keys.authenticate(key)

    async def revoke_api_key(self, key: str) -> bool:
        """Revoke a key for good, in every process: a stored key, or a key of ``COGNIS_API_KEYS`` (whether or
        not this process was given that list). Returns whether the key was valid here until now."""
        return await self.keys.revoke(key)

    # -- ingest -------------------------------------------------------------------------
    async def add_messages(
        self,
        tenant_id: str,
        user_id: str,
        messages: Sequence[MessageBody],
        *,
        background: bool = False,
        request_id: str | None = None,
        client_request_id: str | None = None,
    ) -> IngestResult:
        owner = check_owner(tenant_id, user_id)
        msgs = check_messages(
            owner,
            messages,
            utcnow(),
            max_count=self.settings.ingest.max_messages_per_request,
            max_bytes=self.settings.ingest.max_message_bytes,
        )
        ids = {"request_id": request_id, "client_request_id": client_request_id}
        with self.telemetry.request(names.OPERATION_INGEST, tenant_id=tenant_id, user_id=user_id, **ids) as rec:
            result = await self.ingest.ingest(owner, msgs, rec, background=background)
            if result.job is not None:
                self.worker.notify()
            rec.fields.update(
                messages=len(msgs), messages_created=sum(result.created), background=background, facts=result.facts
            )
            answers = result.extraction.get("answers")
            if isinstance(answers, dict) and (answers["repairs"] or answers["dropped"]):
                rec.fields.update(llm_repairs=answers["repairs"], llm_dropped=answers["dropped"])
            for metric, count in extraction_metrics(result.extraction).items():
                self.telemetry.emit_count(metric, count)
            return result

    # -- retrieval ----------------------------------------------------------------------
    def recipe(self, name: str) -> RetrievalConfig:
        """The named recipe with the settings' ``recipe_overrides`` set (an unknown name is an
        :class:`InvalidInputError` naming ``recipe``)."""
        cfg = self._recipes.get(name)
        if cfg is None:
            cfg = self._recipes[name] = wiring.named_recipe(self.settings, name)
        return cfg

    async def search(
        self,
        tenant_id: str,
        user_id: str,
        query: str,
        *,
        limit: int = 10,
        filter: MemoryFilter | FilterRequest | None = None,
        include_history: bool = False,
        explain: bool = False,
        now: datetime | None = None,
        recipe: str | None = None,
        config: RetrievalConfig | None = None,
        request_id: str | None = None,
        client_request_id: str | None = None,
    ) -> SearchResponse:
        """The memories of the user most relevant to ``query``; ``filter`` narrows what the search may see
        (checked here: :func:`~cognis_memory.validation.check_filter`; ``FilterRequest`` is its deprecated form)."""
        owner = check_owner(tenant_id, user_id)
        check_query("query", query)
        check_int("limit", limit, 1, 100)
        flt = check_filter(owner, filter)
        q = SearchQuery(
            filter=flt,
            text=query,
            limit=limit,
            include_history=include_history,
            explain=explain,
            now=check_time("now", now),
        )
        cfg = config or (self.recipe(recipe) if recipe else None)
        ids = {"request_id": request_id, "client_request_id": client_request_id}
        with self.telemetry.request(names.OPERATION_SEARCH, tenant_id=tenant_id, user_id=user_id, **ids) as rec:
            return await self.cached_retrieval.search(q, rec, cfg)

    async def prompt_block(
        self,
        tenant_id: str,
        user_id: str,
        query: str | None = None,
        *,
        message: str | None = None,
        max_tokens: int = 800,
        with_ids: bool = False,
        limit: int = 20,
        request_id: str | None = None,
        **search_options: Any,
    ) -> tuple[PromptBlock, SearchResponse]:
        """The memories relevant to ``query`` as a text block of at most ``max_tokens`` (estimated)
        tokens, for a system prompt; history questions bring the earlier versions along
        (see :mod:`cognis_memory.prompt_block`). ``message`` is the deprecated name of ``query`` (either
        may be given, or both when equal). ``search_options`` are :meth:`search`'s filter and options
        (filter, include_history, now, recipe, ...). Also returns the search it was built from."""
        check_int("max_tokens", max_tokens, 50, MAX_PROMPT_BLOCK_TOKENS)
        text = context_query(query, message)
        response = await self.search(tenant_id, user_id, text, limit=limit, request_id=request_id, **search_options)
        block = build_prompt_block(
            [(h.memory, h.history) for h in response.hits], max_tokens=max_tokens, with_ids=with_ids
        )
        return block, response

    # -- memories (their version chains: :mod:`.memory_edits`) --------------------------
    async def get_memory(self, tenant_id: str, user_id: str, memory_id: str) -> Memory:
        """The current version of the memory ``memory_id`` names (its id or any of its versions' ids);
        NotFoundError for an unknown id and for a deleted memory."""
        return await self.edits.live_head(check_owner(tenant_id, user_id), memory_id)

    async def history(self, tenant_id: str, user_id: str, memory_id: str) -> list[Memory]:
        """Every version of the memory (a deleted one's too, its tombstone last), oldest first."""
        return await self.edits.chain(check_owner(tenant_id, user_id), memory_id)

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
        """Write a new version on top of the memory's current one (the old one stays in its history); any
        version's id names the memory. NotFoundError for an unknown or deleted memory; ConflictError only
        when other writes keep replacing the current version while this one is written."""
        owner = check_owner(tenant_id, user_id)
        return await self.edits.update(owner, memory_id, content=content, category=category, event_time=event_time)

    async def delete_memory(self, tenant_id: str, user_id: str, memory_id: str) -> Memory:
        """Soft delete: a tombstone version on top of the chain; history keeps the rest. Idempotent: deleting a
        memory already deleted writes nothing and returns its tombstone again. NotFoundError only for an id no
        memory of this owner has."""
        return await self.edits.delete(check_owner(tenant_id, user_id), memory_id)

    async def forget_user(self, tenant_id: str, user_id: str) -> dict[str, int]:
        """Hard delete of everything of one user, in the store and the cache."""
        owner = check_owner(tenant_id, user_id)
        counts = await self.stores.memories.forget_user(owner)
        counts["cache_entries"] = await self.cache.forget_user(owner)
        self.retrieval.speakers.forget(owner)  # speaker names learnt from the user's memories
        self.encoder.query_cache.forget_user(owner.tenant_id, owner.user_id)  # the user's cached queries
        return counts

    async def list_memories(
        self,
        tenant_id: str,
        user_id: str,
        *,
        include_history: bool = False,
        limit: int = 100,
        cursor: str | None = None,
        after: str | None = None,
    ) -> list[Memory]:
        """One page of the user's memories in the order they were said (:attr:`Memory.said_at`, then id),
        oldest first. ``cursor`` is :func:`memory_cursor` of the previous page's last memory. ``after``
        (deprecated, the paging of earlier releases) is that memory's id instead; an id of no memory of the
        user is refused."""
        owner = check_owner(tenant_id, user_id)
        check_int("limit", limit, 1, 1000)
        check_id("after", after, required=False)
        position = decode_cursor("cursor", Listing.MEMORIES, cursor)
        if after is not None:
            if position is not None:
                raise InvalidInputError("after", "give cursor or after (deprecated), not both")
            last = await self.stores.memories.get_memory(owner, after)
            if last is None:
                raise InvalidInputError("after", "no memory of this user has this id")
            position = PagePosition(last.said_at, last.id)
        return await self.stores.memories.list_memories(
            owner, include_history=include_history, limit=limit, after=position
        )

    @staticmethod
    def memory_cursor(last: Memory) -> str:
        """The cursor of the page that follows ``last`` in :meth:`list_memories`."""
        return encode_cursor(Listing.MEMORIES, PagePosition(last.said_at, last.id))

    async def list_session_messages(
        self, tenant_id: str, user_id: str, session_id: str, *, limit: int = 100, cursor: str | None = None
    ) -> list[Message]:
        """One page of a session's messages as the user sent them, in timestamp order (then id), oldest
        first; ``cursor`` is :meth:`message_cursor` of the previous page's last message."""
        owner = check_owner(tenant_id, user_id)
        check_id("session_id", session_id)
        check_int("limit", limit, 1, 1000)
        position = decode_cursor("cursor", Listing.MESSAGES, cursor)
        return await self.stores.messages.list_session_messages(owner, session_id, limit=limit, after=position)

    @staticmethod
    def message_cursor(last: Message) -> str:
        """The cursor of the page that follows ``last`` in :meth:`list_session_messages`."""
        return encode_cursor(Listing.MESSAGES, PagePosition(last.timestamp, last.id))

    async def list_users(self, tenant_id: str, *, limit: int = 100, after: str | None = None) -> list[UserSummary]:
        """The tenant's users, ordered by user id, after the ``after`` user id (the paging cursor)."""
        check_id("tenant_id", tenant_id)
        check_int("limit", limit, 1, 1000)
        check_id("after", after, required=False)
        return await self.stores.memories.list_users(tenant_id, limit=limit, after_user_id=after)

    async def export(self, tenant_id: str, user_id: str, *, include_history: bool = True) -> AsyncIterator[Memory]:
        """Every memory of the user in :meth:`list_memories` order (when said, oldest first)."""
        owner = check_owner(tenant_id, user_id)
        position: PagePosition | None = None
        while True:
            page = await self.stores.memories.list_memories(
                owner, include_history=include_history, limit=500, after=position
            )
            for m in page:
                yield m
            if len(page) < 500:
                return
            position = PagePosition(page[-1].said_at, page[-1].id)

    async def get_job(self, tenant_id: str, user_id: str, job_id: str) -> Job:
        owner = check_owner(tenant_id, user_id)
        check_id("job_id", job_id)
        job = await self.stores.jobs.get_job(owner, job_id)
        if job is None:
            raise NotFoundError(f"job {job_id} not found")
        return job

    async def list_jobs(
        self, tenant_id: str, *, status: JobStatus | str | None = None, limit: int = 100, after: str | None = None
    ) -> list[Job]:
        """The tenant's ingest jobs (every user's), optionally of one status (``dead``: the dead letters;
        ``pending``: every job whose facts are still to come, i.e. queued, running or failed and due again),
        ordered by id; pass the last id of a page as ``after`` for the next."""
        check_id("tenant_id", tenant_id)
        check_int("limit", limit, 1, 1000)
        check_id("after", after, required=False)
        if status == PENDING:
            pages = [
                await self.stores.jobs.list_jobs(tenant_id, status=s, limit=limit, after_id=after)
                for s in PENDING_STATUSES
            ]
            return sorted((j for page in pages for j in page), key=lambda j: j.id)[:limit]
        wanted = None if status is None else enum_value("status", JobStatus, status)
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

    def readiness_details(self) -> dict[str, Any]:
        """What ``/ready`` says besides the checks: the extraction model's lifecycle (Legacy or past end of
        life is said here and logged at start; it never makes the service unready)."""
        return {"llm": self.llm_model.to_dict()} if self.llm_model is not None else {}
