"""Ingest stages 2 and 4 as units: resolution/annotation, Matryoshka prefix, categorizer."""

from datetime import UTC, datetime

import numpy as np
import pytest

from cognis_memory.domain import Category, Message
from cognis_memory.encoding.encoder import MatryoshkaEncoder, fit_variance_rotation, normalise_rows
from cognis_memory.ingest.categorizer import EmbeddingCategorizer
from cognis_memory.ingest.resolution import part_id, resolve_message, resolve_parts

TS = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def _msg(text: str, speaker: str | None = "Mira", role: str = "user") -> Message:
    return Message(tenant_id="t", user_id="u", content=text, timestamp=TS, speaker=speaker, role=role)


def test_resolution_sets_event_time_and_annotates_relative_dates() -> None:
    r = resolve_message(_msg("I went to a support group yesterday and start a course next month."))
    assert r.speaker == "Mira"
    assert r.message_time == TS
    assert r.event_time == datetime(2023, 5, 7, 12, tzinfo=UTC)  # centre of the day
    assert r.annotated_text == (
        "I went to a support group yesterday [7 May 2023] and start a course next month [June 2023]."
    )
    assert r.display_text.startswith("Mira: I went")


def test_resolution_keeps_the_text_as_said_and_records_each_expression_with_its_date() -> None:
    said = "I went to a support group yesterday and start a course next month."
    r = resolve_message(_msg(said))
    assert r.text == said
    assert [(e["text"], e["date"], e["granularity"]) for e in r.time_expressions] == [
        ("yesterday", "7 May 2023", "day"),
        ("next month", "June 2023", "month"),
    ]
    assert r.time_expressions[0]["start"] == "2023-05-07T00:00:00+00:00"
    assert r.time_expressions[0]["end"] == "2023-05-08T00:00:00+00:00"


def test_resolution_without_expressions_has_no_event_time_and_unchanged_text() -> None:
    r = resolve_message(_msg("I like tea.", speaker=None, role="assistant"))
    assert r.event_time is None
    assert r.speaker == "assistant"
    assert r.display_text == "assistant: I like tea."


def test_resolution_does_not_annotate_absolute_days() -> None:
    r = resolve_message(_msg("We met on 2023-04-01."))
    assert r.annotated_text == "We met on 2023-04-01."
    assert r.event_time == datetime(2023, 4, 1, 12, tzinfo=UTC)


def test_naive_message_timestamp_is_utc() -> None:
    m = _msg("yesterday")
    m.timestamp = datetime(2023, 5, 8, 0, 30)
    assert resolve_message(m).event_time == datetime(2023, 5, 7, 12, tzinfo=UTC)


class _FixedEmbedder:
    """An Embedder provider returning given vectors (rows need not be unit length)."""

    name = "fixed"

    def __init__(self, vectors: np.ndarray) -> None:
        self.vectors = vectors.astype(np.float32)
        self.dim = vectors.shape[1]

    def embed(self, texts):
        return self.vectors[: len(texts)]


def test_a_long_message_resolves_once_into_parts_each_with_its_dates_and_raw_memory_id() -> None:
    m = _msg("I moved to Porto yesterday.\n\nMy sister visits next week.")
    m.raw_memory_id = "r" * 32
    (whole,) = resolve_parts(m, 1000)
    assert (whole.memory_id, whole.parts, whole.text) == (m.raw_memory_id, 1, m.content)
    first, second = resolve_parts(m, 40)
    assert [first.text, second.text] == ["I moved to Porto yesterday.", "My sister visits next week."]
    assert (first.part, second.part, first.parts) == (0, 1, 2) and first.message is second.message is m
    assert [s.text for s in first.spans] == ["yesterday"] and [s.text for s in second.spans] == ["next week"]
    # part 0 keeps the message's raw memory id, later ones derive from it (a retry writes the same ids)
    assert (first.memory_id, second.memory_id) == (m.raw_memory_id, part_id(m.raw_memory_id, 1))
    assert second.memory_id != first.memory_id and len(second.memory_id) == 32


def test_prefix_is_renormalised_to_unit_length() -> None:
    v = np.array([[3.0, 4.0, 12.0, 0.0]])
    enc = MatryoshkaEncoder(_FixedEmbedder(v), dim_short=2)
    full, short = enc.encode(["x"])
    assert np.allclose(full, v / 13.0)
    assert np.allclose(short, [[0.6, 0.8]])  # [3, 4] / 5, not [3, 4] / 13
    assert np.allclose(np.linalg.norm(short, axis=1), 1.0)


def test_full_truncation_is_renormalised_and_sizes_are_checked() -> None:
    v = np.array([[1.0, 1.0, 1.0, 1.0]])
    enc = MatryoshkaEncoder(_FixedEmbedder(v), dim_short=1, dim_full=2)
    full, short = enc.encode(["x"])
    assert full.shape == (1, 2) and np.allclose(full, [[2**-0.5, 2**-0.5]])
    assert np.allclose(short, [[1.0]])
    with pytest.raises(ValueError, match="embedding_dim_short"):
        MatryoshkaEncoder(_FixedEmbedder(v), dim_short=5)
    with pytest.raises(ValueError, match="embedding_dim_full"):
        MatryoshkaEncoder(_FixedEmbedder(v), dim_short=1, dim_full=8)


def test_variance_rotation_preserves_full_cosines_and_puts_variance_first() -> None:
    rng = np.random.default_rng(7)
    sample = rng.normal(size=(500, 6)) * np.array([0.1, 0.2, 5.0, 0.3, 3.0, 0.1])
    rot = fit_variance_rotation(sample)
    assert np.allclose(rot.T @ rot, np.eye(6), atol=1e-5)  # orthogonal
    x = normalise_rows(sample[:10])
    enc = MatryoshkaEncoder(_FixedEmbedder(sample[:10]), dim_short=2, rotation=rot)
    full, _ = enc.encode(["a"] * 10)
    assert np.allclose(full @ full.T, x @ x.T, atol=1e-4)
    rotated = (sample - sample.mean(0)) @ rot
    assert rotated[:, :2].var(0).sum() > 0.9 * rotated.var(0).sum()


async def test_categorizer_uses_keywords_then_nearest_description(embedder) -> None:
    enc = MatryoshkaEncoder(embedder, dim_short=128)
    cat = EmbeddingCategorizer(enc)
    texts = [
        "I am allergic to peanuts, my doctor said so",
        "We booked a flight to Tokyo for our vacation",
        "I have been writing Python and SQL at work for years",
        "I feel so happy and grateful today",
        "My sister and my husband came over",
    ]
    full, _ = enc.encode(texts)
    got = await cat.categorize_many(texts, full)
    assert got[:3] == [Category.HEALTH, Category.TRAVEL, Category.TECHNICAL_SKILLS]
    assert got[3] == Category.EMOTIONAL
    assert got[4] == Category.RELATIONSHIPS


async def test_rotation_setting_is_used_by_the_service(make_service, embedder, tmp_path) -> None:
    rng = np.random.default_rng(3)
    rot = fit_variance_rotation(rng.normal(size=(600, embedder.dim)))
    path = tmp_path / "rotation.npy"
    np.save(path, rot)
    svc = await make_service(embedding_rotation_path=path)
    assert svc.encoder.rotation is not None and np.allclose(svc.encoder.rotation, rot)
    raw = embedder.embed(["hello there"])
    full, short = svc.encoder.encode(["hello there"])
    assert np.allclose(full, normalise_rows(raw @ rot), atol=1e-5)
    assert np.allclose(short, normalise_rows((raw @ rot)[:, : svc.encoder.dim_short]), atol=1e-5)
