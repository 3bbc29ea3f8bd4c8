"""Internal names renamed to what they hold keep their old names, with a DeprecationWarning, for one release."""

from __future__ import annotations

import importlib

import pytest

from cognis_memory.api import middleware
from cognis_memory.ingest import extraction


def test_the_old_middleware_name_is_the_request_envelope() -> None:
    with pytest.warns(DeprecationWarning, match="RequestEnvelope"):
        from cognis_memory.api.middleware import RequestContext
    assert RequestContext is middleware.RequestEnvelope


def test_the_old_extractor_name_builds_a_fact_extractor_and_takes_its_old_keyword() -> None:
    with pytest.warns(DeprecationWarning, match="FactExtractor"):
        old = extraction.ContextAwareExtractor
    built = old(None, None, None, None, context_size=4)  # the constructor only keeps its parts
    assert isinstance(built, extraction.FactExtractor)
    assert built.similar_facts == 4
    assert old(None, None, None, None).similar_facts == extraction.SIMILAR_FACTS_SHOWN


def test_the_old_count_constant_is_the_similar_facts_count() -> None:
    with pytest.warns(DeprecationWarning, match="SIMILAR_FACTS_SHOWN"):
        assert extraction.CONTEXT_SIZE == extraction.SIMILAR_FACTS_SHOWN


@pytest.mark.parametrize("module", ["cognis_memory.api.middleware", "cognis_memory.ingest.extraction"])
def test_an_unknown_name_is_still_an_attribute_error(module: str) -> None:
    with pytest.raises(AttributeError, match="NoSuchName"):
        _ = importlib.import_module(module).NoSuchName
