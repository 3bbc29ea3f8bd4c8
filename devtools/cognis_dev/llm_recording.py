"""Recording a real LLM's answers, and replaying them, at the LLM protocol's edge.

:class:`RecordingLLM` wraps any object of the runtime's LLM protocol (``generate_structured``) and
writes one JSON line per call: the schema name, the system prompt and prompt, and what came back,
exactly as the pipeline saw it: the validated answer, or the :class:`LLMOutputError` with the
answer's JSON value or text (what the repair step works from), or the model being unreachable, and the
tokens the provider reported (replayed as reported, so a replay's cost figures are the recording's).

:class:`ReplayLLM` answers the same calls from such a file, raising the same errors with the same
payload, so a test or the CI quality gate runs the real pipeline on a real model's recorded answers
in seconds and without the model. Calls are matched on (schema name, system prompt, prompt); a call
the recording does not hold raises :class:`NotRecorded` naming it: the recording is stale (the
prompts or what the pipeline shows the model changed) and must be made again with the model
(``scripts/bench_updates.py --record``).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from cognis_memory.errors import DependencyUnavailableError
from cognis_memory.providers.base import LLM, LLMOutputError
from cognis_memory.providers.llm_usage import TokenUsage, counting_tokens, report_tokens

AnswerT = TypeVar("AnswerT", bound=BaseModel)


def call_key(schema_name: str, system: str, prompt: str) -> str:
    return hashlib.sha256(json.dumps([schema_name, system, prompt]).encode()).hexdigest()


def _open(path: Path, mode: str) -> Any:
    return gzip.open(path, mode + "t", encoding="utf-8") if path.suffix == ".gz" else open(path, mode, encoding="utf-8")


class RecordingLLM:
    """Forwards every call to ``inner`` and appends what happened to ``path`` (JSON lines, ``.gz`` allowed)."""

    def __init__(self, inner: LLM, path: Path) -> None:
        self.inner, self.path = inner, Path(path)
        self.name = getattr(inner, "name", "llm")
        self.path.parent.mkdir(parents=True, exist_ok=True)

    async def generate_structured(
        self, *, system: str, prompt: str, response_model: type[AnswerT], schema_name: str
    ) -> AnswerT:
        record: dict[str, Any] = {"schema": schema_name, "system": system, "prompt": prompt, "model": self.name}
        started = time.perf_counter()
        usage = TokenUsage()
        try:
            with counting_tokens() as usage:
                answer = await self.inner.generate_structured(
                    system=system, prompt=prompt, response_model=response_model, schema_name=schema_name
                )
        except LLMOutputError as exc:
            record["output_error"] = {
                "message": str(exc), "answer": exc.answer, "text": exc.text, "truncated": exc.truncated
            }  # fmt: skip
            raise
        except DependencyUnavailableError as exc:
            record["unavailable"] = str(exc)
            raise
        else:
            record["answer"] = answer.model_dump(mode="json")
            return answer
        finally:
            record["seconds"] = round(time.perf_counter() - started, 3)
            record["usage"] = {"prompt_tokens": usage.prompt_tokens, "output_tokens": usage.output_tokens}
            with _open(self.path, "a") as fh:
                fh.write(json.dumps(record) + "\n")


class NotRecorded(LookupError):
    """A call the recording does not hold."""


def read_recording(path: Path) -> Iterator[dict[str, Any]]:
    with _open(Path(path), "r") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


class ReplayLLM:
    """Answers calls from a recording (see the module docstring). The same call recorded more than once
    (a retry) is answered in recorded order. ``calls`` counts the calls answered from the recording.

    With ``fallback`` (the live model), a call the recording does not hold is asked of it instead of
    raising :class:`NotRecorded` (``live`` counts them): a variant of a recorded run (a guard changed,
    so later prompts differ) then costs only the calls that differ."""

    def __init__(self, path: Path, name: str | None = None, *, fallback: LLM | None = None) -> None:
        self.fallback, self.live = fallback, 0
        self._records: dict[str, list[dict[str, Any]]] = {}
        for record in read_recording(path):
            key = call_key(record["schema"], record["system"], record["prompt"])
            self._records.setdefault(key, []).append(record)
            name = name or record.get("model")
        self.name = f"replay:{name or Path(path).name}"
        self.calls = 0

    async def generate_structured(
        self, *, system: str, prompt: str, response_model: type[AnswerT], schema_name: str
    ) -> AnswerT:
        queue = self._records.get(call_key(schema_name, system, prompt))
        if not queue and self.fallback is not None:
            self.live += 1
            return await self.fallback.generate_structured(
                system=system, prompt=prompt, response_model=response_model, schema_name=schema_name
            )
        if not queue:
            raise NotRecorded(f"no recorded answer for this {schema_name} call (prompt starts {prompt[:120]!r})")
        record = queue.pop(0) if len(queue) > 1 else queue[0]
        self.calls += 1
        usage = record.get("usage") or {}
        report_tokens(usage.get("prompt_tokens"), usage.get("output_tokens"))
        if "unavailable" in record:
            raise DependencyUnavailableError("llm", record["unavailable"])
        if "output_error" in record:
            e = record["output_error"]
            raise LLMOutputError(e["message"], answer=e["answer"], text=e["text"], truncated=e["truncated"])
        return response_model.model_validate(record["answer"])
