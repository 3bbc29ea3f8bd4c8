"""The ingest pipeline, wiring the four stages, in the order they run.

``ingest`` (synchronous mode) runs, for a batch of messages of one user:

1. **raw_store** — persist the raw messages (idempotent on ``client_message_id``);
2. **resolution** — speaker and absolute dates (``event_time``) for the new ones;
3. **embedding** — full + prefix vectors of each raw message, which is then stored as a
   ``raw`` memory and is searchable at once, with a category from the non-LLM categorizer; its
   content is the message's text as said (speaker and resolved dates are fields, which its search
   text, :mod:`cognis_memory.search_text`, puts back for embedding and keyword search);
4. **extraction** — when an LLM is configured: ADD/UPDATE/DELETE/NONE against the similar stored facts, the new
   facts embedded (the embedding stage again) and applied, each UPDATE/DELETE as one atomic
   version write.

The design (ARCHITECTURE.md, section 4) numbers extraction 3 and embedding 4; embedding runs
first here so that a message is searchable before, and without, its extraction.

Extraction runs session by session: the messages of a request (or a job) are cut where the
session changes, and each run is extracted and applied before the next one is read, so a later
session's facts are decided against the facts of the earlier ones (an UPDATE needs the old fact
stored; an import of a whole history in one request is then what the same sessions sent one by
one would be). A job records the messages already extracted (``result["extracted_message_ids"]``),
so a retry after a failure in a later session does not extract the earlier ones twice (a
request's intent job is saved with it at once; a worker's job with the attempt's outcome).

In asynchronous mode the request runs raw_store, resolution and embedding, then enqueues a
durable job for extraction; :meth:`IngestPipeline.run_job` executes it (see
:mod:`cognis_memory.ingest.worker`). Without an LLM no job is needed: the response says
so with ``job=None``.

A message that is stored is answered as stored, whatever happens to its extraction: when the LLM
is unreachable, times out or gives no usable answer during a synchronous request, the extraction
becomes a durable job like an asynchronous one, and the result says ``facts="pending"`` with the
job and the reason under ``degraded`` (the HTTP API answers 202). The client's retry is never
needed, and never stores the message twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from ..caching.result_cache import Cache
from ..domain import Category, Job, JobStatus, Memory, MemoryKind, Message, Owner, new_id, utcnow
from ..encoding.batching import Priority
from ..encoding.encoder import MatryoshkaEncoder
from ..errors import ConflictError, DependencyUnavailableError, NotFoundError
from ..providers.base import LLM, LLMOutputError
from ..search_text import search_text
from ..stores.roles import JobQueue, MemoryVersions, MessageLog, VectorSearch
from ..telemetry import names
from ..telemetry.recorder import StageRecorder
from .answers import Action
from .categorizer import EmbeddingCategorizer
from .extraction import CandidateFact, ExtractionResult, FactExtractor, Operation
from .resolution import ResolvedMessage, resolve_parts
from .supersession import mark_superseded

#: ``Job.result`` key of the messages whose extraction a job has already applied (a later session failed).
EXTRACTED_MESSAGE_IDS = "extracted_message_ids"


def session_runs(resolved: list[ResolvedMessage]) -> list[list[ResolvedMessage]]:
    """The messages cut into runs of consecutive messages of one session, in their order (the parts
    of a long message stay together: they share its session)."""
    runs: list[list[ResolvedMessage]] = []
    for r in resolved:
        if runs and runs[-1][-1].message.session_id == r.message.session_id:
            runs[-1].append(r)
        else:
            runs.append([r])
    return runs


def add_counts(total: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    """Two extraction summaries as one: numbers added, nested counts merged key by key."""
    out = dict(total)
    for key, value in more.items():
        if isinstance(value, dict):
            out[key] = add_counts(out.get(key) or {}, value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = round(out.get(key, 0) + value, 3) if isinstance(value, float) else out.get(key, 0) + value
        else:
            out[key] = value
    return out


#: ``IngestResult.facts``: what became of the batch's fact extraction.
FACTS_EXTRACTED, FACTS_PENDING, FACTS_OFF, FACTS_NOTHING_NEW = "extracted", "pending", "off", "nothing_new"


@dataclass(slots=True)
class IngestResult:
    messages: list[Message]
    created: list[bool]
    raw_memories: list[Memory] = field(default_factory=list)
    job: Job | None = None
    extraction: dict[str, Any] = field(default_factory=dict)
    #: ``extracted`` (done in this request), ``pending`` (a job will; see ``job``), ``off`` (no LLM
    #: configured) or ``nothing_new`` (every message was stored before)
    facts: str = FACTS_OFF
    #: dependencies that failed during the request, e.g. ``llm: ...`` (the facts are then pending)
    degraded: list[str] = field(default_factory=list)


def extraction_metrics(extraction: dict[str, Any]) -> dict[str, int]:
    """The counts an extraction's answer report adds to the LLM metrics (only those above zero)."""
    answers = extraction.get("answers") if isinstance(extraction, dict) else None
    if not isinstance(answers, dict):
        return deferred_metrics(extraction)
    counts = {
        names.LLM_ANSWERS_REPAIRED: int(answers.get("repaired", 0)) + int(answers.get("retried", 0)),
        names.LLM_ANSWERS_UNUSABLE: int(answers.get("unusable", 0)),
    }
    return {k: v for k, v in counts.items() if v > 0}


def deferred_metrics(extraction: dict[str, Any]) -> dict[str, int]:
    """The counts of a synchronous extraction handed to a job (see :meth:`IngestPipeline.ingest`)."""
    deferred = extraction.get("deferred") if isinstance(extraction, dict) else None
    if deferred is None:
        return {}
    counts = {names.EXTRACTIONS_DEFERRED: 1}
    if deferred == "llm_unusable_answer":
        counts[names.LLM_ANSWERS_UNUSABLE] = 1
    return counts


class IngestPipeline:
    def __init__(
        self,
        encoder: MatryoshkaEncoder,
        *,
        messages: MessageLog,
        memories: MemoryVersions,
        jobs: JobQueue,
        vectors: VectorSearch,
        cache: Cache,
        categorizer: EmbeddingCategorizer,
        llm: LLM | None = None,
        job_max_attempts: int = 5,
        memory_max_bytes: int = 32 * 1024,
        sync_grace_s: float = 300.0,
        update_min_similarity: float = 0.0,
    ) -> None:
        self.messages, self.memories, self.jobs = messages, memories, jobs
        self.encoder, self.cache, self.categorizer, self.llm = encoder, cache, categorizer, llm
        self.extractor = (
            FactExtractor(llm, vectors, encoder, categorizer, update_min_similarity=update_min_similarity)
            if llm is not None
            else None
        )
        self.job_max_attempts = job_max_attempts
        #: how long a synchronous request's intent job waits before a worker may take it over
        self.sync_grace_s = sync_grace_s
        self.memory_max_bytes = memory_max_bytes

    def resolve(self, messages: list[Message]) -> list[ResolvedMessage]:
        """Resolution for each message, or for each part of a long one (see :mod:`.resolution`)."""
        return [r for m in messages for r in resolve_parts(m, self.memory_max_bytes)]

    # -- stage helpers ------------------------------------------------------------------
    async def build_raw_memories(self, resolved: list[ResolvedMessage], rec: StageRecorder) -> list[Memory]:
        """Raw memories of the messages: the content as said, the speaker and the resolved dates as fields,
        embedded and categorized by their search text (:func:`~cognis_memory.search_text.search_text`: the
        speaker-prefixed, date-annotated text)."""
        if not resolved:
            return []
        memories = []
        for r in resolved:
            msg = r.message
            assert r.memory_id is not None, "ingest sets the message's raw memory id before it is saved"
            metadata = {**msg.metadata, "role": msg.role}
            if r.parts > 1:
                metadata.update(part=r.part + 1, parts=r.parts)
            memories.append(
                Memory(
                    tenant_id=msg.tenant_id,
                    user_id=msg.user_id,
                    agent_id=msg.agent_id,
                    session_id=msg.session_id,
                    scope=msg.scope,
                    category=Category.PERSONAL_DETAILS,  # the categorizer's below
                    kind=MemoryKind.RAW,
                    content=r.text,
                    speaker=r.speaker or None,
                    event_time=r.event_time,
                    message_time=r.message_time,
                    source_message_ids=[msg.id],
                    metadata=metadata,
                    time_expressions=r.time_expressions,
                    id=r.memory_id,
                )
            )
        texts = [search_text(m) for m in memories]
        with rec.stage("embedding"):
            full, short = await self.encoder.encode_async(texts, Priority.INGEST)
        categories = await self.categorizer.categorize_many(texts, full)
        for m, e, s, cat in zip(memories, full, short, categories, strict=True):
            m.embedding, m.embedding_short, m.category = e, s, cat
        return memories

    # -- entry points -------------------------------------------------------------------
    async def ingest(
        self, owner: Owner, messages: list[Message], rec: StageRecorder, *, background: bool = False
    ) -> IngestResult:
        # raw_store is several writes (messages, extraction job, raw memories), so a crash can fall
        # between them, and the client's retry (same client_message_id) is answered "already stored".
        # The raw memory's id is therefore fixed in the message before it is saved: a retry finds the
        # messages whose raw memory is missing and ingests them again (job first, raw memories last).
        for m in messages:
            m.raw_memory_id = new_id()  # the server's, always
        with rec.stage("raw_store"):
            stored = await self.messages.save_messages(messages)
        new_msgs = [m for m, created in stored if created]
        seen = {m.id for m in new_msgs}
        earlier: list[Message] = []
        for m, created in stored:  # a client id repeated within one batch returns the same message again
            if not created and m.id not in seen:
                seen.add(m.id)
                earlier.append(m)
        new_msgs += await self._unfinished(owner, earlier)
        with rec.stage("resolution"):
            resolved = self.resolve(new_msgs)
        raw = await self.build_raw_memories(resolved, rec)
        result = IngestResult(messages=[m for m, _ in stored], created=[c for _, c in stored], raw_memories=raw)
        job = Job(
            tenant_id=owner.tenant_id,
            user_id=owner.user_id,
            message_ids=[m.id for m in new_msgs],
            max_attempts=self.job_max_attempts,
        )
        if self.extractor is not None and new_msgs:
            # Async: the job runs now. Sync: an intent job, due only after the request's extraction could
            # have finished; marked done when it does, so a process killed during the LLM calls still
            # leaves the extraction to a worker (the messages are stored and a retry would be "already
            # stored").
            if not background:
                job.next_attempt_at = utcnow() + timedelta(seconds=self.sync_grace_s)
            await self.jobs.enqueue_job(job)
            if background:
                result.job = job
        with rec.stage("raw_store"):
            await self._insert_raw(owner, raw)
        if new_msgs:
            await self.cache.invalidate(owner)
        if self.extractor is None:
            return result
        if not new_msgs:
            result.facts = FACTS_NOTHING_NEW
            return result
        if background:
            result.facts = FACTS_PENDING
            return result
        try:
            with rec.stage("extraction"):
                result.extraction = await self._extract_by_session(owner, resolved, job, Priority.INGEST)
                result.facts = FACTS_EXTRACTED
            job.status, job.result, job.updated_at = JobStatus.DONE, result.extraction, utcnow()
            await self.jobs.save_job(job)
        except (DependencyUnavailableError, LLMOutputError) as exc:
            # The messages are stored, so the client's retry (same client_message_id) is answered
            # "already stored" and would never extract them: the durable job does it, due now, and the
            # answer says so (stored, facts pending) instead of failing a request whose data is safe.
            job.next_attempt_at = job.updated_at = utcnow()
            await self.jobs.save_job(job)
            result.job, result.facts = job, FACTS_PENDING
            unusable = isinstance(exc, LLMOutputError)
            result.extraction = {"deferred": "llm_unusable_answer" if unusable else "llm_unavailable"}
            result.degraded.append((f"llm: unusable answer: {exc}" if unusable else str(exc))[:500])
            rec.mark_degraded("llm")
        return result

    async def _unfinished(self, owner: Owner, existing: list[Message]) -> list[Message]:
        """Already stored messages whose raw memory was never written (an earlier attempt died)."""
        known = {m.raw_memory_id: m for m in existing if m.raw_memory_id}  # none in messages stored before it was kept
        if not known:
            return []
        have = {x.id for x in await self.memories.fetch_memories(owner, list(known))}
        return [m for raw_id, m in known.items() if raw_id not in have]

    async def _insert_raw(self, owner: Owner, raw: list[Memory]) -> None:
        """Insert raw memories; ids a concurrent attempt of the same messages inserted first are skipped."""
        try:
            await self.memories.insert_memories(raw)
        except Exception:
            have = {x.id for x in await self.memories.fetch_memories(owner, [m.id for m in raw])}
            if not have:
                raise
            await self.memories.insert_memories([m for m in raw if m.id not in have])

    async def run_job(self, job: Job, rec: StageRecorder) -> dict[str, Any]:
        """Stages 2-4 (extraction) for a claimed job. Raises on failure (the worker retries)."""
        owner = Owner(job.tenant_id, job.user_id)
        if self.extractor is None:
            return {"skipped": "no LLM configured"}
        messages = await self.messages.get_messages(owner, job.message_ids)
        if not messages:  # the user was forgotten meanwhile
            return {"skipped": "messages no longer exist"}
        with rec.stage("resolution"):
            resolved = self.resolve(messages)
        with rec.stage("extraction"):
            # progress stays on the job object: the worker saves it with the attempt's outcome (a save now
            # would clear the claim's lease, and a worker that died after it would leave the job unclaimable)
            return await self._extract_by_session(
                owner, resolved, job, Priority.BACKGROUND, recheck=True, save_progress=False
            )

    async def _extract_by_session(
        self,
        owner: Owner,
        resolved: list[ResolvedMessage],
        job: Job,
        priority: Priority,
        *,
        recheck: bool = False,
        save_progress: bool = True,
    ) -> dict[str, Any]:
        """Extract and apply the messages session run by session run (see the module docstring), skipping
        those the job already extracted. The job's ``result`` records the messages applied while later
        runs remain; ``save_progress``: the job is saved then too (a request's intent job, which nobody
        holds a lease on). ``recheck``: before a run's writes, check that its messages still exist (a
        forget of the user during the seconds of LLM calls must not be undone by them)."""
        assert self.extractor is not None
        done: list[str] = list((job.result or {}).get(EXTRACTED_MESSAGE_IDS, []))
        already = set(done)
        runs = session_runs([r for r in resolved if r.message.id not in already])
        total: dict[str, Any] = {}
        for i, run in enumerate(runs):
            extraction = await self.extractor.extract(owner, run, priority=priority)
            ids = list(dict.fromkeys(r.message.id for r in run))
            if recheck and not await self.messages.get_messages(owner, ids):
                return {"skipped": "messages no longer exist"}
            total = add_counts(total, await self.apply(owner, extraction, run))
            done += ids
            if i + 1 < len(runs):
                job.result = {**(job.result or {}), EXTRACTED_MESSAGE_IDS: list(done)}  # keeps the worker's "waits"
                if save_progress:
                    job.updated_at = utcnow()
                    await self.jobs.save_job(job)
        if len(runs) > 1:
            total["sessions"] = len(runs)
        return total

    async def apply(
        self, owner: Owner, extraction: ExtractionResult, resolved: list[ResolvedMessage]
    ) -> dict[str, Any]:
        """Write the decided operations; each UPDATE/DELETE is one atomic version write. A fact cites the
        messages it was said in (its ``sources``), takes its speaker, session and time from the first,
        and an UPDATE records which earlier messages stated what it replaces (:mod:`.supersession`)."""
        counts: dict[str, Any] = {a.value: 0 for a in Action}
        counts["conflicts"] = 0
        adds: list[Memory] = []
        for op in extraction.operations:
            fact = op.fact
            sources = fact.sources or resolved
            source_ids = list(dict.fromkeys(r.message.id for r in sources))  # a long message has several parts
            first = sources[0] if sources else None
            if op.action is Action.NONE:
                counts["NONE"] += 1
                continue
            if op.action is Action.ADD:
                adds.append(self._new_fact(owner, fact, source_ids, first))
                counts["ADD"] += 1
                continue
            assert op.target is not None
            applied = await self._change(owner, op, source_ids, first)
            if applied is None:  # deleted, or restated later, meanwhile: an UPDATE's new value is still kept
                if op.action is Action.UPDATE:
                    adds.append(self._new_fact(owner, fact, source_ids, first))
                counts["conflicts"] += 1
            else:
                counts[op.action.value] += 1
        await self.memories.insert_memories(adds)
        await self.cache.invalidate(owner)
        counts["rejected_aliases"] = extraction.rejected_aliases
        counts["candidates"] = extraction.candidates
        counts["answers"] = extraction.report.as_dict()
        return counts

    @staticmethod
    def _new_fact(owner: Owner, fact: CandidateFact, source_ids: list[str], first: ResolvedMessage | None) -> Memory:
        return Memory(
            tenant_id=owner.tenant_id,
            user_id=owner.user_id,
            agent_id=first.message.agent_id if first else None,
            session_id=first.message.session_id if first else None,
            scope=fact.scope,
            category=fact.category,
            kind=MemoryKind.FACT,
            content=fact.content,
            speaker=first.speaker if first else None,
            event_time=fact.event_time or (first.event_time if first else None),
            message_time=first.message_time if first else None,
            source_message_ids=source_ids,
            embedding=fact.embedding,
            embedding_short=fact.embedding_short,
        )

    async def _change(
        self, owner: Owner, op: Operation, source_ids: list[str], first: ResolvedMessage | None
    ) -> Memory | None:
        """The UPDATE or DELETE of ``op.target``, written on the chain's current version: when another
        writer changed the memory since the LLM saw it, the change goes on top of that newer version.
        None when the chain has no current version any more (deleted meanwhile), or when that version was
        said after the new evidence: an older statement never replaces or retires a newer one,
        whatever order the jobs run in (they are claimed by ``next_attempt_at``, so a retried older batch
        can run after a newer one). An UPDATE's new version takes the new fact's scope and session, speaker
        and agent: a USER fact replacing a CONTEXT fact of another session is seen by every session."""
        target = op.target
        assert target is not None
        said = first.message_time if first else None
        for _ in range(3):
            if said is not None and (target.message_time or target.created_at) > said:
                return None
            if op.action is Action.UPDATE:
                fact = op.fact
                new = target.next_version(
                    content=fact.content,
                    category=fact.category,
                    scope=fact.scope,
                    session_id=first.message.session_id if first else target.session_id,
                    agent_id=first.message.agent_id if first else target.agent_id,
                    speaker=first.speaker if first else target.speaker,
                    event_time=fact.event_time or target.event_time,
                    source_message_ids=list(dict.fromkeys(target.source_message_ids + source_ids)),
                    embedding=fact.embedding,
                    embedding_short=fact.embedding_short,
                )
                mark_superseded(target, new, source_ids, said)
            else:
                new = target.tombstone()
                new.source_message_ids = list(dict.fromkeys(target.source_message_ids + source_ids))
            try:
                return await self.memories.write_version(owner, target.id, new)
            except (ConflictError, NotFoundError):
                chain = await self.memories.get_chain(owner, target.id)
                head = next((m for m in reversed(chain) if m.is_current), None)
                if head is None:
                    return None
                target = head
        return None
