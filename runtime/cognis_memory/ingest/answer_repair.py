"""Reading an extraction LLM's answers so that one bad field never costs a whole message.

The providers hold every answer to the schema derived from :mod:`.answers` (the wire schema is
strict and stays so). Small and local models break it in typical ways: prose around the JSON, an
answer cut off at the token limit, a category outside the enum ("work"), a target given as a
memory's text instead of its alias, a fact index as a string, a list of strings where objects were
asked for. Failing the message for that loses every good fact in the answer, and a retried job
meets the same answer again until it is dead-lettered.

So the ingest stage reads answers item by item:

* :func:`ask` makes the call; a valid answer is read as is. An :class:`LLMOutputError` carries what
  the model said: its JSON value (which failed validation) or its text, which
  :func:`~cognis_memory.providers.llms.structured.repair_json_text` tries to turn into JSON. When
  nothing readable comes back, the model is asked once more, told what was wrong; after that the
  error stands (and the job is retried later).
* :func:`read_facts` and :func:`read_decisions` keep every item that can be read, repair what has
  one safe reading (``"Personal Details"`` is ``personal_details``; ``"M3"`` or the memory's exact
  text is ``m3``; ``"2"`` is 2) and drop the rest, each repair and drop counted by kind in the
  :class:`AnswerReport` that ends up in the ingest response, the job's result and the log line. A
  category that cannot be read is left to the non-LLM categorizer; a decision that cannot be read
  leaves its fact undecided, and undecided facts are added (a fact is never lost to a bad decision).

The readers never invent content: what is kept was in the answer.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel

from ..domain import Category, Scope, as_utc
from ..errors import CognisError
from ..providers.base import LLM, LLMOutputError
from ..providers.llm_usage import counting_tokens
from ..providers.llms.structured import repair_json_text
from .answers import Action

T = TypeVar("T")

#: What the second attempt adds to the prompt after an unusable answer.
RETRY_NOTE = (
    "\n\nYour previous answer could not be used ({error}). Answer again with only the JSON object "
    "described, and nothing else."
)


class Unusable(CognisError, ValueError):
    """An answer whose envelope holds nothing readable (not the expected object or list)."""


@dataclass
class AnswerReport:
    """The outcome of the LLM questions asked for one batch of messages, summed.

    ``asked``: questions (an extract or a decide call, with its possible retry); of these ``valid``
    were valid as first answered, ``repaired`` usable after repairing the first answer, ``retried``
    usable only from the second answer, ``unusable`` neither. ``calls`` counts HTTP/API calls,
    ``seconds`` their time, ``prompt_tokens`` and ``output_tokens`` what the provider reported for them.
    ``repairs`` and ``dropped`` count what the readers (and the extraction's checks of the facts) did, by
    kind; ``overruled`` the decisions the extraction's guards changed.
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
    """A fact as read from the extract answer: ``category`` None when it must come from the categorizer;
    ``sources`` the 0-based indexes of the numbered messages it came from (empty: not known)."""

    content: str
    category: Category | None
    scope: Scope
    event_time: datetime | None
    sources: list[int]


@dataclass(slots=True)
class DecisionDraft:
    fact: int
    action: Action
    target: str | None  # an alias shown to the model, for UPDATE and DELETE
    content: str | None
    category: Category | None


def _items(value: Any, key: str, notes: Notes, looks_like_item: str) -> list[Any]:
    """The list under ``key``; a bare list, another single list, or one item alone are read as it."""
    if isinstance(value, Mapping):
        items = value.get(key)
        if isinstance(items, list):
            extra = [k for k in value if k != key]
            for _ in extra:
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


def _enum(enum: type[Category] | type[Scope] | type[Action], value: Any, notes: Notes, what: str) -> Any:
    """The member ``value`` names exactly, or after case, spaces and dashes are normalised (a repair)."""
    if not isinstance(value, str):
        return None
    try:
        return enum(value)
    except ValueError:
        pass
    key = re.sub(r"[\s\-]+", "_", value.strip()).lower()
    for member in enum:
        if member.value.lower() == key:
            notes.repair(f"{what}_spelling")
            return member
    return None


def _integer(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*\d+\s*", value):
        return int(value)
    return None


def _date(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        return as_utc(datetime.fromisoformat(value.strip().replace("Z", "+00:00")))
    except ValueError:
        return None


_FACT_KEYS = {"content", "category", "scope", "event_date", "sources"}


def read_facts(value: Any, notes: Notes, *, messages: int) -> list[FactDraft]:
    """The facts of an ``extracted_facts`` answer; ``messages`` is how many messages the prompt numbered."""
    out: list[FactDraft] = []
    for item in _items(value, "facts", notes, "content"):
        if isinstance(item, str):  # the fact's text alone
            item = {"content": item}
            notes.repair("fact_as_text")
        if not isinstance(item, Mapping):
            notes.drop("fact_not_an_object")
            continue
        content = item.get("content")
        if not isinstance(content, str) or not content.strip():
            notes.drop("fact_without_content")
            continue
        content = content.strip()
        if content.endswith("?"):
            notes.drop("fact_is_a_question")
            continue
        for _ in set(item) - _FACT_KEYS:
            notes.repair("extra_key")
        category = _enum(Category, item.get("category"), notes, "category")
        if category is None:
            notes.repair("category_unknown")
        scope = _enum(Scope, item.get("scope"), notes, "scope")
        if scope is None:
            notes.repair("scope_default")
            scope = Scope.USER
        out.append(FactDraft(content, category, scope, _date(item.get("event_date")), _sources(item, notes, messages)))
    return out


def _sources(item: Mapping[str, Any], notes: Notes, messages: int) -> list[int]:
    raw = item.get("sources")
    if raw is None:
        notes.repair("sources_missing")
        return []
    values = raw if isinstance(raw, list) else [raw]
    out = []
    for v in values:
        n = _integer(v)
        if n is None or not 1 <= n <= messages:
            notes.repair("source_invalid")
            continue
        if n - 1 not in out:
            out.append(n - 1)
    return out


_ALIAS = re.compile(r"^\W*(m\d+)\W*$", re.IGNORECASE)


def _normalised(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().strip(".").lower()


def _alias(target: Any, aliases: Mapping[str, str], notes: Notes) -> str | None:
    """The alias ``target`` names: exactly, in another spelling ("M3", "[m3]", 3), or by the listed
    memory's text (the whole text, or a unique listed text that starts with it)."""
    if isinstance(target, int) and not isinstance(target, bool):
        target = f"m{target}"
    if not isinstance(target, str) or not target.strip():
        return None
    if target in aliases:
        return target
    match = _ALIAS.match(target)
    if match and match.group(1).lower() in aliases:
        notes.repair("target_spelling")
        return match.group(1).lower()
    wanted = _normalised(re.sub(r"^\W*m\d+\W+", "", target, flags=re.IGNORECASE))
    if len(wanted) >= 8:
        same = [a for a, text in aliases.items() if _normalised(text) == wanted]
        if not same:
            same = [a for a, text in aliases.items() if _normalised(text).startswith(wanted)]
        if len(same) == 1:
            notes.repair("target_by_text")
            return same[0]
    return None


def read_decisions(value: Any, notes: Notes, *, facts: int, aliases: Mapping[str, str]) -> list[DecisionDraft]:
    """The decisions of a ``memory_decisions`` answer for ``facts`` new facts and the listed memories
    (``aliases``: alias -> text). An UPDATE whose target cannot be read becomes an ADD of its fact (the
    new information is kept); a DELETE without a readable target is dropped (nothing is retired on a
    guess)."""
    items = _items(value, "decisions", notes, "action")
    out: list[DecisionDraft] = []
    for position, item in enumerate(items):
        if not isinstance(item, Mapping):
            notes.drop("decision_not_an_object")
            continue
        index = _integer(item.get("fact"))
        if index is None and "fact" not in item and len(items) == facts:
            index = position
            notes.repair("fact_by_position")
        if index is None or not 0 <= index < facts:
            notes.drop("decision_fact_unknown")
            continue
        action = _enum(Action, item.get("action"), notes, "action")
        if action is None:
            notes.drop("decision_action_unknown")
            continue
        for _ in set(item) - {"fact", "action", "target", "content", "category"}:
            notes.repair("extra_key")
        target = None
        if action in (Action.UPDATE, Action.DELETE):
            target = _alias(item.get("target"), aliases, notes)
            if target is None and action is Action.UPDATE:
                notes.repair("update_without_target_added")
                action = Action.ADD
            elif target is None:
                notes.drop("delete_without_target")
                continue
        content = item.get("content") if action is Action.UPDATE else None
        if content is not None and (not isinstance(content, str) or not content.strip()):
            notes.repair("update_content_unreadable")
            content = None
        category = _enum(Category, item.get("category"), notes, "category") if action is Action.UPDATE else None
        out.append(DecisionDraft(index, action, target, content.strip() if content else None, category))
    return out
