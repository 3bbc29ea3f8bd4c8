"""Conversation context: memories said next to a strong match (its session neighbours) share its score.

One concept, one name: this module, its stage class :class:`ConversationContext`, and, shortened
because they are published, the ``context`` stage of the logs, metrics and ``explain`` and the
``context``/``context_weight``/``context_max_lift``/``context_window_minutes`` fields of
:class:`~.recipes.RetrievalConfig`.

An answer is often split over turns: a question and its reply, a statement and the
follow-up that names the thing. A turn that matches the query lends part of its score to
the other candidates from the *same session* said within ``window_minutes`` of it:

    context(d) = max over c != d in the same session, |t_c - t_d| <= window, of score(c)
    lift(d)    = min(weight * context(d), max_lift * score(d))
    score'(d)  = score(d) + lift(d)

A neighbour is lifted only on evidence of its own. It must be a candidate already (found by the
vector or keyword side for this query: no extra store query), and its lift is at most
``max_lift`` times its own score, so the stage can reorder two candidates only when their own
scores are within a factor ``1 + max_lift`` of each other: a neighbour never passes a hit whose
own score is clearly better, however strong the match it sits next to. Without the bound, one
strong match lent the same amount to every turn of its session, and a whole session of unrelated
chat could pass a closer memory said elsewhere. Memories without a session take no part, and both
terms are proportional to the scores, so the rule works on any fused scale. Times are message
times (when the turn was said), not event times.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..domain import Memory
from .stages import RetrievalStage, SearchState


def neighbour_scores(
    scores: Mapping[str, float], memories: Mapping[str, Memory], *, window_minutes: float
) -> dict[str, float]:
    """For each candidate, the best score of another candidate said near it in its session (0 if none)."""
    window_s = window_minutes * 60.0
    by_session: dict[str, list[tuple[float | None, str]]] = {}
    for d in scores:
        m = memories[d]
        if m.session_id is None:
            continue
        t = m.message_time.timestamp() if m.message_time is not None else None
        by_session.setdefault(m.session_id, []).append((t, d))
    out = {d: 0.0 for d in scores}
    for members in by_session.values():
        if len(members) < 2:
            continue
        times = [t for t, _ in members if t is not None]
        if len(times) == len(members) and max(times) - min(times) <= window_s:
            # the whole session is within the window: the best other score is the top or the runner-up
            ranked = sorted(members, key=lambda td: -scores[td[1]])
            top, second = ranked[0][1], ranked[1][1]
            for _, d in members:
                out[d] = scores[second] if d == top else scores[top]
            continue
        for t, d in members:
            best = 0.0
            for t2, d2 in members:
                if d2 == d:
                    continue
                if t is not None and t2 is not None and abs(t - t2) > window_s:
                    continue
                best = max(best, scores[d2])
            out[d] = best
    return out


def context_lifts(
    scores: Mapping[str, float],
    memories: Mapping[str, Memory],
    *,
    weight: float,
    max_lift: float,
    window_minutes: float,
) -> tuple[dict[str, float], dict[str, float]]:
    """Per candidate, the lift ``min(weight * context, max_lift * own score)`` (0 without a neighbour),
    and the neighbour scores it came from (:func:`neighbour_scores`)."""
    ctx = neighbour_scores(scores, memories, window_minutes=window_minutes)
    lifts = {d: min(weight * ctx[d], max_lift * max(scores[d], 0.0)) for d in scores}
    return lifts, ctx


class ConversationContext(RetrievalStage):
    """score + :func:`context_lifts` (the neighbour's score shown as ``context`` in ``explain``, the
    amount added as ``context_lift``)."""

    name = "context"
    phase = "fused"

    def enabled(self, s: SearchState) -> bool:
        return s.cfg.context and s.cfg.context_weight > 0 and s.cfg.context_max_lift > 0 and bool(s.fused)

    async def apply(self, s: SearchState) -> None:
        cfg = s.cfg
        lifts, ctx = context_lifts(
            s.fused, s.candidates, weight=cfg.context_weight, max_lift=cfg.context_max_lift,
            window_minutes=cfg.context_window_minutes,
        )  # fmt: skip
        s.fused = {d: v + lifts[d] for d, v in s.fused.items()}
        for d, c in ctx.items():
            if c:
                s.explain[d].update(context=c, context_lift=lifts[d])
