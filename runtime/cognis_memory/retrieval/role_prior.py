"""Role prior: whose turns a question asks about, from the question's grammatical person.

An agent stores its conversations as ``user`` and ``assistant`` turns. A question in the first
person ("what's my favourite food?", "where do I live?") asks about what the user said; one
that addresses the assistant about its own words ("what did you recommend?", "which hotel did
you suggest?") asks about the assistant's turns. Fused scores of the candidates said in the
wanted role are multiplied by ``1 + boost``; nothing else changes.

The rule reads grammar only (personal pronouns), never the subject of the query. "you" in a
request to the assistant ("can you remind me ...", "do you remember ...") is not a question
about the assistant's turns; query analysis reads the role with the rest of the query
(:func:`~.query_analysis.query_role`, :attr:`~.query_analysis.AnalysedQuery.role`). A memory takes
part only when its speaker *is* its role (a turn without a speaker name, see
:func:`.speakers.speaker_name`): where turns carry names (two friends chatting under their own
names, a user speaking as "Maya"), the query's names decide through the speaker-aware step, and
this prior is neutral.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..domain import Memory
from .query_analysis import Role
from .stages import RetrievalStage, SearchState


def role_of(memory: Memory) -> str | None:
    """The memory's role when its speaker is that role (a turn stored without a speaker name), else None.
    A memory without a recorded role (a fact extracted from messages) has its speaker's role when that
    speaker is ``user`` or ``assistant``: ingest gives a fact the speaker of the message it came from."""
    speaker = (memory.speaker or "").strip().lower()
    role = memory.metadata.get("role") if isinstance(memory.metadata, dict) else None
    if not isinstance(role, str):
        return speaker if speaker in ("user", "assistant") else None
    return role.strip().lower() if speaker in ("", role.strip().lower()) else None


def role_boosted(
    scores: Mapping[str, float], memories: Mapping[str, Memory], role: Role, boost: float
) -> dict[str, float]:
    """``scores`` with the candidates said in ``role`` multiplied by ``1 + boost``."""
    return {d: s * (1.0 + boost) if role_of(memories[d]) == role else s for d, s in scores.items()}


class RolePrior(RetrievalStage):
    """:func:`role_boosted` with the role query analysis read from the query (``role_boost``;
    :func:`~.query_analysis.query_role`)."""

    name = "role_prior"
    phase = "fused"

    def enabled(self, s: SearchState) -> bool:
        return s.cfg.role_boost > 0 and bool(s.fused) and s.analysed.role is not None

    async def apply(self, s: SearchState) -> None:
        role = s.analysed.role
        assert role is not None
        s.fused = role_boosted(s.fused, s.candidates, role, s.cfg.role_boost)
