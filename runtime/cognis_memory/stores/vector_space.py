"""Which embedding model's vectors a store holds, recorded when it is first opened and checked afterwards.

Vectors of two models cannot be compared, even at the same width (all-MiniLM-L6-v2 and
bge-small-en-v1.5 both give 384 floats): a store filled by one model and searched with the other
answers nonsense without any error. So a store built from the settings records the configured
model's *vector space* (``Settings.vector_space``: the named embedding model, or the model file or
directory given by ``embedder_path``) the first time it opens, and refuses to open under another
one, naming the setting. A store that has no record yet (made before this check) takes the
configured space as its own; a store object built without a vector space (tests, tools that read
a store) checks nothing.
"""

from __future__ import annotations

from ..errors import ConfigurationError

#: The key under which a store keeps its vector space (a row, or an index's ``_meta`` entry).
KEY = "vector_space"


class VectorSpaceMismatchError(ConfigurationError, ValueError):
    """The store holds vectors of another embedding model than the service is configured with."""

    def __init__(self, where: str, recorded: str, configured: str) -> None:
        super().__init__(
            f"embedding_model: {where} holds vectors of {recorded!r}, but the service is configured for "
            f"{configured!r}; vectors of two models cannot be compared: configure {recorded!r} again, or "
            "export the memories and import them into a new store"
        )
        self.recorded, self.configured = recorded, configured


def check(where: str, recorded: str | None, configured: str | None) -> bool:
    """Whether ``configured`` must now be recorded (the store has no record); raises on a mismatch."""
    if configured is None:
        return False
    if recorded is None:
        return True
    if recorded != configured:
        raise VectorSpaceMismatchError(where, recorded, configured)
    return False
