"""Stage 8: version history.

For a history query (:attr:`~.query_analysis.QueryAnalysis.history`) or a search that asks for it
(``include_history``), each answer carries the earlier versions of its memory, read from the
store's version chain; a first version (no predecessor) needs no store round trip.
"""

from __future__ import annotations

import asyncio

from .stages import RetrievalStage, SearchState


class VersionHistory(RetrievalStage):
    name = "version_chain"
    phase = "hits"

    def enabled(self, s: SearchState) -> bool:
        return s.cfg.history and (s.analysed.analysis.history or s.query.include_history) and bool(s.hits)

    async def apply(self, s: SearchState) -> None:
        walk = [hit for hit in s.hits if hit.memory.version > 1 or hit.memory.replaces_id is not None]
        memories = self.resources.memories
        chains = await asyncio.gather(*(memories.get_chain(s.query.owner, hit.memory.id) for hit in walk))
        for hit, chain in zip(walk, chains, strict=True):
            hit.history = [m for m in chain if m.version < hit.memory.version]
