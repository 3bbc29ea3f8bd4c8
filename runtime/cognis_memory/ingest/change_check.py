"""The change check: one narrow question to the LLM about two facts of one person.

"Older fact (said on date A) / newer fact (said on date B): is the older one no longer true?",
answered yes or no under a schema. The pipeline asks it for each stored fact that code chose as a
candidate for replacement (:mod:`.candidates`), several at once; "yes" retires the older fact by
writing the newer one as its next version. The model never writes text, never picks among a list
and never sees an id: whatever it answers, the worst outcome of a wrong "no" is two current facts
(the newer of which retrieval puts first for a present-state question), and a wrong "yes" can only
retire a fact of the same person that code found to be about the same thing, said earlier.

An answer that cannot be read even when asked twice counts as "no" (nothing is retired on a guess).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..providers.base import LLM, LLMOutputError
from .answer_repair import AnswerReport, ask, read_verdict
from .answers import ChangeVerdict

CHANGE_SYSTEM = (
    "You keep a person's facts up to date. You are given an older fact and a newer fact about the same "
    "person, each with the date it was said. Answer yes when the older fact is no longer true because of the "
    "newer one: the newer fact gives the same thing a different value (another city, another job, another "
    "partner, a different routine) or says that it ended or stopped. Answer no when both can be true at the "
    "same time: the newer fact adds one more item (another pet, another hobby, one more language or friend), "
    "adds a detail, is about something else, or says the same thing again."
)


@dataclass(frozen=True, slots=True)
class StatedFact:
    """A fact as the change check shows it: its text and when it was said (None: not known)."""

    text: str
    said: datetime | None


def said_on(moment: datetime | None) -> str:
    return f"{moment.day} {moment:%B %Y}" if moment is not None else "at an unknown date"


def change_prompt(older: StatedFact, newer: StatedFact) -> str:
    return (
        f"Older fact (said {said_on(older.said)}): {older.text}\n"
        f"Newer fact (said {said_on(newer.said)}): {newer.text}\n"
        "Is the older fact no longer true?"
    )


class ChangeCheck:
    """Asks the change question of ``llm`` (see the module docstring)."""

    def __init__(self, llm: LLM) -> None:
        self.llm = llm

    async def no_longer_true(self, older: StatedFact, newer: StatedFact, report: AnswerReport) -> bool:
        """Whether the model says ``older`` is no longer true given ``newer``; False when no answer could be
        read (counted in ``report.dropped["change_check_unusable"]``). An unreachable model raises
        :class:`~cognis_memory.errors.DependencyUnavailableError` (the batch is retried later)."""
        try:
            return await ask(
                self.llm,
                system=CHANGE_SYSTEM,
                prompt=change_prompt(older, newer),
                response_model=ChangeVerdict,
                schema_name="fact_change",
                read=read_verdict,
                report=report,
            )
        except LLMOutputError:
            report.dropped["change_check_unusable"] += 1
            return False
