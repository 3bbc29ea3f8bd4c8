"""An extraction "LLM" that answers from the knowledge-update set's ground truth: what a perfect model would.

It implements the runtime's LLM protocol (``generate_structured``) and reads the same prompts a real
model gets: the message of an extract question, the two facts of a change check; it never sees ids
or the store. Asked to extract, it returns one fact per statement the set says the message makes
about the user (``home=Lisbon`` -> subject ``speaker``, attribute ``home city``, value ``Lisbon``),
and nothing for small talk or for what is said about other people. Asked whether an older fact is
no longer true, it says yes exactly when both facts give the same attribute of the same person and
their values differ.

So a benchmark run with it measures the pipeline alone (extraction applied, versions, the ranking of
facts and raw messages): anything short of the targets is the pipeline's fault, not the model's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from .update_set import UserHistory

AnswerT = TypeVar("AnswerT", bound=BaseModel)

#: set attribute -> the attribute as a perfect model names it
ATTRIBUTES: dict[str, str] = {
    "home": "home city",
    "employer": "employer",
    "diet": "diet",
    "pet": "dog",
    "car": "car",
    "exercise": "exercise routine",
    "commute": "commute to work",
    "language": "language being learnt",
    "drink": "morning drink",
    "instrument": "musical instrument",
}

_MESSAGE = re.compile(r"^Message from .*\):\n(.*)\Z", re.MULTILINE | re.DOTALL)
_ANNOTATION = re.compile(r" \[[^\]]*\]")
_FACT = re.compile(r"^(Older|Newer) fact \(said [^)]*\): (.*)'s? ([^:]+): (.*)$", re.MULTILINE)


def _value(attribute: str, value: str) -> str:
    return value.removeprefix("on a ").removesuffix(" diet") if attribute == "diet" else value


class UpdateSetOracle:
    """See the module docstring. ``calls`` counts the questions asked, by schema name."""

    name = "oracle"

    def __init__(self, histories: Sequence[UserHistory]) -> None:
        self._states: dict[str, list[str]] = {}  # turn text -> its "attribute=value" statements
        for h in histories:
            for t in h.turns:
                if t.states:
                    self._states[t.content] = list(t.states)
        self.calls: dict[str, int] = {}

    async def generate_structured(
        self, *, system: str, prompt: str, response_model: type[AnswerT], schema_name: str
    ) -> AnswerT:
        self.calls[schema_name] = self.calls.get(schema_name, 0) + 1
        if schema_name == "extracted_facts":
            answer = self._extract(prompt)
        elif schema_name == "fact_change":
            answer = self._change(prompt)
        else:
            raise ValueError(f"the oracle answers extraction questions only, not {schema_name!r}")
        return response_model.model_validate(answer)

    def _extract(self, prompt: str) -> dict[str, Any]:
        m = _MESSAGE.search(prompt)
        text = _ANNOTATION.sub("", m.group(1)).strip() if m else ""
        facts = []
        for state in self._states.get(text, []):
            attribute, value = state.split("=", 1)
            facts.append({"subject": "speaker", "attribute": ATTRIBUTES[attribute], "value": _value(attribute, value)})
        return {"facts": facts}

    def _change(self, prompt: str) -> dict[str, Any]:
        facts = {m.group(1): (m.group(2), m.group(3), m.group(4)) for m in _FACT.finditer(prompt)}
        older, newer = facts.get("Older"), facts.get("Newer")
        known = set(ATTRIBUTES.values())
        changed = (
            older is not None and newer is not None and older[1] in known
            and older[:2] == newer[:2] and older[2] != newer[2]
        )  # fmt: skip
        return {"no_longer_true": "yes" if changed else "no"}
