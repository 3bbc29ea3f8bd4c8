"""Token counts from the providers reach the counter of the calling context, and only it."""

from __future__ import annotations

import asyncio

from cognis_memory.providers.llm_usage import counting_tokens, report_tokens


async def test_calls_made_at_once_in_one_batch_add_to_its_counter_and_not_to_another() -> None:
    async def call(prompt: int, output: int) -> None:
        await asyncio.sleep(0)
        report_tokens(prompt, output)

    async def batch(n: int) -> tuple[int, int]:
        with counting_tokens() as usage:
            await asyncio.gather(*(call(10 * n, n) for _ in range(3)))
        return usage.prompt_tokens, usage.output_tokens

    assert await asyncio.gather(batch(1), batch(2)) == [(30, 3), (60, 6)]


def test_an_inner_counter_adds_to_the_outer_one_and_bad_counts_are_zero() -> None:
    report_tokens(5, 5)  # nobody counting: nothing happens
    with counting_tokens() as outer:
        report_tokens(1, 2)
        with counting_tokens() as inner:
            report_tokens(10, 20)
            report_tokens(None, -3)
            report_tokens(True, "7")
        assert (inner.prompt_tokens, inner.output_tokens) == (10, 20)
    assert (outer.prompt_tokens, outer.output_tokens) == (11, 22)
