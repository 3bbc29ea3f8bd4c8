"""Conversation context: memories said next to a strong match (its session neighbours) share its score.

One concept, one name: this module, its stage class :class:`ConversationContext`, and, shortened
because they are published, the ``context`` stage of the logs, metrics and ``explain`` and the
``context``/``context_weight``/``context_window_minutes`` fields of :class:`~.config.RetrievalConfig`.

An answer is often split over turns: a question and its reply, a statement and the
follow-up that names the thing. A turn that matches the query lends part of its score to
the other candidates from the *same session* said within ``window_minutes`` of it:

    context(d) = max over c != d in the same session, |t_c - t_d| <= window, of score(c)
    score'(d)  = score(d) + weight * context(d)

Only candidates already found by the vector or keyword side take part (no extra store
query), memories without a session take no part, and the boost is proportional to the
scores, so it works on any fused scale. Times are message times (when the turn was said),
not event times.
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


class ConversationContext(RetrievalStage):
    """score + ``context_weight`` * :func:`neighbour_scores` (shown as ``context`` in ``explain``)."""

    name = "context"
    phase = "fused"

    def enabled(self, s: SearchState) -> bool:
        return s.cfg.context and s.cfg.context_weight > 0 and bool(s.fused)

    async def apply(self, s: SearchState) -> None:
        ctx = neighbour_scores(s.fused, s.candidates, window_minutes=s.cfg.context_window_minutes)
        s.fused = {d: v + s.cfg.context_weight * ctx[d] for d, v in s.fused.items()}
        for d, c in ctx.items():
            if c:
                s.explain[d]["context"] = c
