"""An extraction "LLM" that answers from the knowledge-update set's ground truth: what a perfect model would.

It implements the runtime's LLM protocol (``generate_structured``) and reads the same prompts a real
model gets (the numbered transcript of the extract call, the facts and listed memories of the decide
call); it never sees ids or the store. Asked to extract, it returns one fact per statement the set
says a message makes about the user ("home=Lisbon" -> "Maya lives in Lisbon."), citing that
message, and nothing for small talk or for what is said about other people. Asked to decide, it
UPDATEs the listed fact about the same attribute of the same person, says NONE when that fact
already holds the value, and ADDs otherwise; a fact that is not listed cannot be updated, exactly
as for a real model.

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

#: attribute -> (the fact as a perfect model following the extract prompt writes it: the person, what the
#: fact is about and its value; its category)
FACTS: dict[str, tuple[str, str]] = {
    "home": ("{who} lives in {v}, {whose} home city.", "personal_details"),
    "employer": ("{who} works at {v}, {whose} employer.", "professional"),
    "diet": ("{who} follows a {diet} diet.", "dietary"),
    "pet": ("{whose} dog is called {v}.", "relationships"),
    "car": ("{whose} car is {v}.", "personal_details"),
    "exercise": ("{whose} exercise routine is {v}.", "hobbies"),
    "commute": ("{whose} commute to the office is {v}.", "behavioral_patterns"),
    "language": ("{who} is learning the {v} language.", "educational"),
    "drink": ("{whose} usual morning drink is {v}.", "preferences"),
    "instrument": ("{whose} musical instrument is the {v}.", "hobbies"),
}


_LINE = re.compile(r"^\[(\d+)\] \d{4}-\d{2}-\d{2} \d{2}:\d{2} (?:([^:]+): )?(.*)$")
_ANNOTATION = re.compile(r" \[[^\]]*\]")


class UpdateSetOracle:
    """See the module docstring. ``calls`` counts the questions asked, by schema name."""

    name = "oracle"

    def __init__(self, histories: Sequence[UserHistory]) -> None:
        self._states: dict[str, list[str]] = {}  # turn text -> its "attribute=value" statements
        for h in histories:
            for t in h.turns:
                if t.states:
                    self._states[t.content] = list(t.states)
        self._facts: dict[str, tuple[str, str, str]] = {}  # fact text -> (person, attribute, value)
        self.calls: dict[str, int] = {}

    async def generate_structured(
        self, *, system: str, prompt: str, response_model: type[AnswerT], schema_name: str
    ) -> AnswerT:
        self.calls[schema_name] = self.calls.get(schema_name, 0) + 1
        if schema_name == "extracted_facts":
            answer = self._extract(prompt)
        elif schema_name == "memory_decisions":
            answer = self._decide(prompt)
        else:
            raise ValueError(f"the oracle answers extraction questions only, not {schema_name!r}")
        return response_model.model_validate(answer)

    def _extract(self, prompt: str) -> dict[str, Any]:
        facts = []
        for line in prompt.splitlines():
            m = _LINE.match(line)
            if not m:
                continue
            number, speaker, text = int(m.group(1)), (m.group(2) or "").strip(), _ANNOTATION.sub("", m.group(3))
            for state in self._states.get(text, []):
                attribute, value = state.split("=", 1)
                person = "The user" if speaker.lower() in ("", "user") else speaker
                whose = "The user's" if person == "The user" else f"{person}'s"
                template, category = FACTS[attribute]
                diet = value.removeprefix("on a ").removesuffix(" diet")
                content = template.format(who=person, whose=whose, v=value, diet=diet)
                self._facts[content] = (person, attribute, value)
                facts.append(
                    {"content": content, "category": category, "scope": "USER", "event_date": None, "sources": [number]}
                )
        return {"facts": facts}

    def _decide(self, prompt: str) -> dict[str, Any]:
        blocks: list[tuple[str, dict[str, str]]] = []
        for line in prompt.splitlines():
            if m := re.match(r"fact (\d+): (.*)$", line):
                blocks.append((m.group(2), {}))
            elif (m := re.match(r"\s+- (m\d+): (.*)$", line)) and blocks:
                blocks[-1][1][m.group(1)] = m.group(2)
        decisions = []
        for i, (content, listed) in enumerate(blocks):
            decision: dict[str, Any] = {"fact": i, "action": "ADD", "target": None, "content": None, "category": None}
            known = self._facts.get(content)
            if known is not None:
                person, attribute, value = known
                for alias, text in listed.items():
                    other = self._facts.get(text)
                    if other is None or other[:2] != (person, attribute):
                        continue
                    if other[2] == value:
                        decision["action"] = "NONE"
                    else:
                        decision.update(action="UPDATE", target=alias, content=content)
                    break
            decisions.append(decision)
        return {"decisions": decisions}
