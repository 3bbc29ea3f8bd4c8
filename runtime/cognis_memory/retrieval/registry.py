"""The retrieval stages that run after fusion, in the order they run: :data:`RETRIEVAL_STAGES`.

Each entry is the stage's name (as logged, ``<name>_ms``, and as the ``Stage`` dimension of the
``StageLatency`` metric) and its loader, a function that imports the stage's module and returns its
:class:`~.stages.RetrievalStage` class; :func:`~.stages.load_stages` builds them and checks the order of
their phases. A new stage adds its loader and its line here, its switch and weights to
:class:`~.recipes.RetrievalConfig`, and nothing else outside its own module and test. The providers
(:mod:`cognis_memory.providers.registry`) and the stores (:mod:`cognis_memory.stores.registry`) are
registered the same way.
"""

from __future__ import annotations

from .stages import RetrievalStage, StageLoader


def _speaker_boost() -> type[RetrievalStage]:
    from .speakers import SpeakerBoost

    return SpeakerBoost


def _context() -> type[RetrievalStage]:
    from .conversation_context import ConversationContext

    return ConversationContext


def _role_prior() -> type[RetrievalStage]:
    from .role_prior import RolePrior

    return RolePrior


def _kind_prior() -> type[RetrievalStage]:
    from .kind_prior import KindPrior

    return KindPrior


def _temporal_boost() -> type[RetrievalStage]:
    from .temporal import TemporalBoost

    return TemporalBoost


def _dedup() -> type[RetrievalStage]:
    from .dedup import NearDuplicateRemoval

    return NearDuplicateRemoval


def _cross_encoder() -> type[RetrievalStage]:
    from .cross_encoder import CrossEncoderRerank

    return CrossEncoderRerank


def _current_state() -> type[RetrievalStage]:
    from .current_state import CurrentStateOrder

    return CurrentStateOrder


def _version_chain() -> type[RetrievalStage]:
    from .version_history import VersionHistory

    return VersionHistory


#: stage name -> its loader, in the order the stages run
RETRIEVAL_STAGES: dict[str, StageLoader] = {
    "speaker_boost": _speaker_boost,
    "context": _context,
    "role_prior": _role_prior,
    "kind_prior": _kind_prior,
    "temporal_boost": _temporal_boost,
    "dedup": _dedup,
    "cross_encoder": _cross_encoder,
    "current_state": _current_state,
    "version_chain": _version_chain,
}
