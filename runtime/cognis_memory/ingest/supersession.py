"""How an extracted fact relates to the raw memories it came from when the fact changes.

Raw memories are the evidence: every message is stored as-is and stays searchable. Facts are
what an extraction LLM concluded from that evidence, and each cites it through
``source_message_ids``. When a later message changes a fact (an UPDATE: "I live in Porto" ->
"I moved to Lisbon"), the new version keeps citing every message (its full provenance), and
this module records which of them stated what is no longer true: the sources of the replaced
version that are not part of the new evidence, in the new version's
:attr:`~cognis_memory.domain.Memory.superseded_sources` (a stored field of the domain's record, since
retrieval reads it too). The new version's ``message_time`` becomes the time of the new evidence (when
the fact was last stated), not the time of the first statement.

Retrieval reads the link (``retrieval/current_state.py``): for a present-state query a raw
memory whose message is superseded evidence of a current fact among the candidates ranks
directly below that fact, never above it; for a history query it comes first, with its date.
Nothing is deleted or hidden: the raw message is still what the user said, and a message
that also stated other things (the dog in "I live in Porto with my dog Biscuit") is still found
for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from ..domain import Memory


def mark_superseded(
    replaced: Memory, new: Memory, evidence_ids: Sequence[str], evidence_time: datetime | None
) -> Memory:
    """Record on ``new`` (the version replacing ``replaced``) which messages stated the replaced value,
    and date it by the new evidence. Returns ``new``."""
    evidence = set(evidence_ids)
    earlier = dict.fromkeys([*replaced.superseded_sources, *replaced.source_message_ids])
    new.superseded_sources = [m for m in earlier if m not in evidence]
    if evidence_time is not None:
        new.message_time = evidence_time
    return new
