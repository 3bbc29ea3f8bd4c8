"""Reading an extraction LLM's answers so that one bad field never costs a whole message.

The providers hold every answer to the schema derived from :mod:`.answers` (the wire schema is
strict and stays so). Small and local models break it in typical ways: prose around the JSON, an
answer cut off at the token limit, a list of strings where objects were asked for, "Yes." for "yes".
Failing the message for that loses every good fact in the answer, and a retried job meets the same
answer again until it is dead-lettered.

So the ingest stage reads answers item by item:

* :func:`ask` makes the call; a valid answer is read as is. An :class:`LLMOutputError` carries what
  the model said: its JSON value (which failed validation) or its text, which
  :func:`~cognis_memory.providers.llms.structured.repair_json_text` tries to turn into JSON. When
  nothing readable comes back, the model is asked once more, told what was wrong; after that the
  error stands.
* :func:`read_facts` keeps every fact that can be read and drops the rest; :func:`read_verdict` reads
  a yes/no answer in the spellings a model uses. Each repair and drop is counted by kind in the
  :class:`AnswerReport` that ends up in the ingest response, the job's result and the log line.

The readers never invent content: what is kept was in the answer.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from ..providers.base import LLM, LLMOutputError
from ..providers.llm_usage import counting_tokens
from ..providers.llms.structured import repair_json_text

T = TypeVar("T")

#: What the second attempt adds to the prompt after an unusable answer.
RETRY_NOTE = (
    "\n\nYour previous answer could not be used ({error}). Answer again with only the JSON object "
    "described, and nothing else."
)


class Unusable(ValueError):
    """An answer whose envelope holds nothing readable (not the expected object or list)."""


@dataclass
class AnswerReport:
    """The outcome of the LLM questions asked for one batch of messages, summed.

    ``asked``: questions (an extract call or a change check, with its possible retry); of these ``valid``
    were valid as first answered, ``repaired`` usable after repairing the first answer, ``retried``
    usable only from the second answer, ``unusable`` neither. ``calls`` counts HTTP/API calls,
    ``seconds`` their time (summed over calls made at once), ``prompt_tokens`` and ``output_tokens``
    what the provider reported for them. ``repairs`` and ``dropped`` count what the readers (and the extraction's
    checks of the facts) did, by kind; ``overruled`` the decisions the extraction's guards changed.
    """

    asked: int = 0
    valid: int = 0
    repaired: int = 0
    retried: int = 0
    unusable: int = 0
    calls: int = 0
    seconds: float = 0.0
    prompt_tokens: int = 0
    output_tokens: int = 0
    repairs: Counter[str] = field(default_factory=Counter)
    dropped: Counter[str] = field(default_factory=Counter)
    #: decisions the extraction's guards changed (an UPDATE taken as an ADD, ...), by kind
    overruled: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        return {
            "asked": self.asked,
            "valid": self.valid,
            "repaired": self.repaired,
            "retried": self.retried,
            "unusable": self.unusable,
            "calls": self.calls,
            "seconds": round(self.seconds, 3),
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens,
            "repairs": dict(sorted(self.repairs.items())),
            "dropped": dict(sorted(self.dropped.items())),
            "overruled": dict(sorted(self.overruled.items())),
        }


class Notes:
    """What one reading repaired and dropped (merged into the report when the reading is used)."""

    def __init__(self, repairs: list[str] | None = None) -> None:
        self.repairs: Counter[str] = Counter(repairs or [])
        self.dropped: Counter[str] = Counter()

    def repair(self, kind: str) -> None:
        self.repairs[kind] += 1

    def drop(self, kind: str) -> None:
        self.dropped[kind] += 1


async def ask(
    llm: LLM,
    *,
    system: str,
    prompt: str,
    response_model: type[BaseModel],
    schema_name: str,
    read: Callable[[Any, Notes], T],
    report: AnswerReport,
) -> T:
    """Ask ``llm``, read its answer with ``read`` (repairing and dropping items, see the module), and
    ask once more when nothing is readable. Raises :class:`LLMOutputError` when the second answer is
    no better; :class:`~cognis_memory.errors.DependencyUnavailableError` passes through."""
    report.asked += 1
    error = ""
    for attempt in (0, 1):
        text = prompt if attempt == 0 else prompt + RETRY_NOTE.format(error=error[:300])
        report.calls += 1
        started = time.perf_counter()
        with counting_tokens() as usage:
            try:
                answer = await llm.generate_structured(
                    system=system, prompt=text, response_model=response_model, schema_name=schema_name
                )
            except LLMOutputError as exc:
                value, notes, error = _recovered(exc)
                strict = False
            else:
                value, notes, strict = answer.model_dump(mode="json"), Notes(), True
            finally:
                report.seconds += time.perf_counter() - started
                report.prompt_tokens += usage.prompt_tokens
                report.output_tokens += usage.output_tokens
        if value is None:
            continue
        try:
            out = read(value, notes)
        except Unusable as exc:
            error = str(exc)
            continue
        report.repairs.update(notes.repairs)
        report.dropped.update(notes.dropped)
        if attempt == 1:
            report.retried += 1
        elif strict and not notes.repairs:  # (a fact dropped as a question is not a JSON fault)
            report.valid += 1
        else:
            report.repaired += 1
        return out
    report.unusable += 1
    raise LLMOutputError(f"{getattr(llm, 'name', 'llm')}: no usable {schema_name} answer after a retry: {error}")


def _recovered(exc: LLMOutputError) -> tuple[Any, Notes, str]:
    """The JSON value an output error carries (or recovers from its text), the repairs that took, and
    the error to tell the model if nothing could be recovered."""
    if exc.answer is not None:
        return exc.answer, Notes(), str(exc)
    if exc.text:
        try:
            value, repairs = repair_json_text(exc.text)
        except ValueError as inner:
            return None, Notes(), f"{exc}; {inner}"
        return value, Notes(repairs), str(exc)
    return None, Notes(), str(exc)


# -- items -----------------------------------------------------------------------------------------
@dataclass(slots=True)
class FactDraft:
    """A fact as read from the extract answer, before the pipeline names its subject and writes its text."""

    subject: str
    attribute: str
    value: str


def _items(value: Any, key: str, notes: Notes, looks_like_item: str) -> list[Any]:
    """The list under ``key``; a bare list, another single list, or one item alone are read as it."""
    if isinstance(value, Mapping):
        items = value.get(key)
        if isinstance(items, list):
            for _ in (k for k in value if k != key):
                notes.repair("extra_key")
            return items
        lists = [v for v in value.values() if isinstance(v, list)]
        if key not in value and len(lists) == 1:
            notes.repair("envelope_key")
            return lists[0]
        if looks_like_item in value:
            notes.repair("envelope_single")
            return [dict(value)]
        raise Unusable(f'expected an object with a "{key}" list, got keys {sorted(map(str, value))[:8]}')
    if isinstance(value, list):
        notes.repair("envelope_list")
        return value
    raise Unusable(f'expected an object with a "{key}" list, got {type(value).__name__}')


def _text(value: Any) -> str:
    """A string field's text, or "" (a number is read as its digits: a value of 3 is "3")."""
    if isinstance(value, bool) or value is None:
        return ""
    if isinstance(value, int | float):
        return str(value)
    return " ".join(value.split()) if isinstance(value, str) else ""


_FACT_KEYS = {"subject", "attribute", "value"}


def read_facts(value: Any, notes: Notes) -> list[FactDraft]:
    """The facts of an ``extracted_facts`` answer. A fact without a value, a value that is a question or
    a fact given as bare text (no attribute to compare it by) is dropped; a missing subject is the
    speaker ("" here, named by the pipeline); a missing attribute drops the fact."""
    out: list[FactDraft] = []
    for item in _items(value, "facts", notes, "value"):
        if isinstance(item, str):
            notes.drop("fact_as_text")
            continue
        if not isinstance(item, Mapping):
            notes.drop("fact_not_an_object")
            continue
        for _ in set(item) - _FACT_KEYS:
            notes.repair("extra_key")
        text = _text(item.get("value"))
        if not text:
            notes.drop("fact_without_value")
            continue
        if text.endswith("?"):
            notes.drop("fact_is_a_question")
            continue
        attribute = _text(item.get("attribute"))
        if not attribute:
            notes.drop("fact_without_attribute")
            continue
        subject = _text(item.get("subject"))
        if not subject:
            notes.repair("subject_missing")
        out.append(FactDraft(subject, attribute, text))
    return out


_YES = frozenset({"yes", "y", "true", "1"})
_NO = frozenset({"no", "n", "false", "0"})


def read_verdict(value: Any, notes: Notes) -> bool:
    """The answer of a ``fact_change`` question: True for "yes" (the older fact is no longer true). Read
    from the expected object, from another single key or a bare value, and from a boolean or a word
    with punctuation or capitals ("Yes."); anything else is unusable."""
    if isinstance(value, Mapping):
        if "no_longer_true" in value:
            answer = value["no_longer_true"]
            if len(value) > 1:
                notes.repair("extra_key")
        elif len(value) == 1:
            notes.repair("envelope_key")
            answer = next(iter(value.values()))
        else:
            raise Unusable(f'expected an object with "no_longer_true", got keys {sorted(map(str, value))[:8]}')
    else:
        notes.repair("envelope_single")
        answer = value
    if isinstance(answer, bool):
        notes.repair("verdict_as_boolean")
        return answer
    word = re.sub(r"[^a-z0-9]", "", answer.lower()) if isinstance(answer, str) else ""
    if word in _YES or word in _NO:
        if answer != word:
            notes.repair("verdict_spelling")
        return word in _YES
    raise Unusable(f'expected "yes" or "no", got {str(answer)[:40]!r}')
