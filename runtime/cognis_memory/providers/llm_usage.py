"""Token counts of LLM calls, from the providers to whoever is counting them.

A provider reads the counts its API answers with (OpenAI's ``usage.prompt_tokens`` and
``completion_tokens``, Bedrock Converse's ``usage.inputTokens`` and ``outputTokens``) and reports
them with :func:`report_tokens`; a caller that wants them wraps its calls in :func:`counting_tokens`.
The counter lives in a context variable, so concurrent calls of one batch (tasks started inside the
``with``) add to the same counter and calls of other batches do not; a counter opened inside another
adds its counts to the outer one when it closes. Nothing is counted when nobody asks.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(slots=True)
class TokenUsage:
    prompt_tokens: int = 0
    output_tokens: int = 0

    def add(self, prompt_tokens: int, output_tokens: int) -> None:
        self.prompt_tokens += prompt_tokens
        self.output_tokens += output_tokens


_counter: ContextVar[TokenUsage | None] = ContextVar("cognis_llm_token_usage", default=None)


@contextmanager
def counting_tokens() -> Iterator[TokenUsage]:
    """A counter of the tokens of the LLM calls made inside the block (and added to an enclosing one)."""
    outer = _counter.get()
    usage = TokenUsage()
    token = _counter.set(usage)
    try:
        yield usage
    finally:
        _counter.reset(token)
        if outer is not None:
            outer.add(usage.prompt_tokens, usage.output_tokens)


def report_tokens(prompt_tokens: object, output_tokens: object) -> None:
    """Add one call's counts to the counter of the calling context, if any (values that are not
    non-negative integers count as 0: a server may leave them out)."""
    usage = _counter.get()
    if usage is not None:
        usage.add(_count(prompt_tokens), _count(output_tokens))


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
