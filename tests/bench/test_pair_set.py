"""The supersession pair set (``cognis_dev.pair_set``): deterministic, balanced, well formed, apart from the update set."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import date
from pathlib import Path

import pytest
from cognis_dev.pair_set import CATEGORIES, GAP_DAYS, LabelledPair, counts, generate, main
from cognis_dev.update_set import ATTRIBUTES

TRUE_CATEGORIES = {"change", "ended"}
#: categories whose pairs come in both orders of their two values
BOTH_ORDERS = {"change", "multi_valued", "elaboration"}


@pytest.fixture(scope="module")
def pairs() -> list[LabelledPair]:
    return generate()


def test_deterministic_for_a_seed_and_seeds_differ_only_in_subjects_dates_and_keys(pairs: list[LabelledPair]) -> None:
    assert generate() == pairs and generate(0) == pairs
    other = generate(7)
    assert other != pairs
    assert [(p.id, p.category, p.no_longer_true, p.ambiguous) for p in other] == [
        (p.id, p.category, p.no_longer_true, p.ambiguous) for p in pairs
    ]
    assert [(p.older.value, p.newer.value) for p in other] == [(p.older.value, p.newer.value) for p in pairs]


def test_size_categories_and_balance(pairs: list[LabelledPair]) -> None:
    assert len(pairs) >= 200
    per = counts(pairs)
    assert list(per) == list(CATEGORIES)
    for category, row in per.items():
        assert row["total"] >= 15, category
        assert row["positives"] + row["negatives"] == row["total"]
    positives = sum(p.no_longer_true for p in pairs) / len(pairs)
    assert 0.35 <= positives <= 0.55, positives
    assert sum(row["total"] for row in per.values()) == len(pairs)


def test_labels_follow_the_category(pairs: list[LabelledPair]) -> None:
    for p in pairs:
        assert p.category in CATEGORIES, p.id
        assert p.no_longer_true == (p.category in TRUE_CATEGORIES), p.id
        assert p.id.startswith(f"{p.category}-"), p.id


def test_ids_unique_and_dates_ordered(pairs: list[LabelledPair]) -> None:
    ids = [p.id for p in pairs]
    assert len(set(ids)) == len(ids)
    for p in pairs:
        assert p.older.said < p.newer.said, p.id
        assert GAP_DAYS[0] <= (p.newer.said - p.older.said).days <= GAP_DAYS[1], p.id
        assert isinstance(p.older.said, date) and isinstance(p.newer.said, date)


def test_both_orders_where_they_make_sense(pairs: list[LabelledPair]) -> None:
    by_id = {p.id: p for p in pairs}
    reversed_pairs = [p for p in pairs if p.id.endswith("-rev")]
    assert {p.category for p in reversed_pairs} == BOTH_ORDERS
    for rev in reversed_pairs:
        fwd = by_id[rev.id.removesuffix("-rev") + "-fwd"]
        assert (rev.older.value, rev.newer.value) == (fwd.newer.value, fwd.older.value), rev.id
        assert rev.no_longer_true == fwd.no_longer_true and rev.ambiguous == fwd.ambiguous, rev.id
    for p in pairs:
        if p.category in ("multi_valued", "elaboration"):
            assert p.id.removesuffix("-fwd").removesuffix("-rev") + "-rev" in by_id, p.id
    ended = Counter(p.id.rsplit("-", 2)[0] for p in pairs if p.category == "ended")
    assert all(n >= 2 for n in ended.values()), ended  # each ended situation twice, in other words


def test_subjects_and_keys(pairs: list[LabelledPair]) -> None:
    for p in pairs:
        for claim in (p.older, p.newer):
            assert claim.key == claim.key.lower() and 1 <= len(claim.key.split()) <= 4, (p.id, claim.key)
            assert claim.value and len(claim.value) <= 60, (p.id, claim.value)
        if p.category == "other_person":
            assert p.newer.subject != p.older.subject, p.id
        else:
            assert p.newer.subject == p.older.subject, p.id
    subjects = Counter("user" if p.older.subject == "user" else "named" for p in pairs)
    assert subjects["user"] >= len(pairs) // 4 and subjects["named"] >= len(pairs) // 4, subjects
    others = [p.newer.subject for p in pairs if p.category == "other_person"]
    assert any("'s " in s for s in others) and any("'s " not in s for s in others), others
    # about a third of the pairs about one attribute word the newer key differently
    same_attribute = [p for p in pairs if p.category in ("change", "ended", "other_person")]
    paraphrased = sum(p.older.key != p.newer.key for p in same_attribute) / len(same_attribute)
    assert 0.2 <= paraphrased <= 0.5, paraphrased


def test_ambiguous_pairs_are_few_and_explained(pairs: list[LabelledPair]) -> None:
    ambiguous = [p for p in pairs if p.ambiguous]
    assert 0 < len(ambiguous) <= len(pairs) // 20
    assert all(p.note for p in ambiguous) and not any(p.note for p in pairs if not p.ambiguous)


def test_nothing_of_the_update_set_is_used(pairs: list[LabelledPair]) -> None:
    values = [v for attribute in ATTRIBUTES for v in attribute.values]
    pattern = re.compile(r"\b(?:" + "|".join(re.escape(v) for v in values) + r")\b", re.IGNORECASE)
    forbidden_keys = {attribute.name for attribute in ATTRIBUTES} | {"pet", "dog"}
    assert {"home", "employer", "diet", "pet", "car", "language", "drink", "instrument"} <= forbidden_keys
    for p in pairs:
        for claim in (p.older, p.newer):
            assert not pattern.search(claim.value), (p.id, claim.value)
            assert claim.key not in forbidden_keys, (p.id, claim.key)


def test_dump_writes_json_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "pairs.jsonl"
    assert main(["--seed", "3", "--dump", str(out)]) == 0
    printed = capsys.readouterr().out
    assert all(category in printed for category in CATEGORIES)
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    expected = generate(3)
    assert len(rows) == len(expected)
    assert [r["id"] for r in rows] == [p.id for p in expected]
    first = rows[0]
    assert set(first) == {"id", "category", "older", "newer", "no_longer_true", "ambiguous", "note"}
    assert set(first["older"]) == {"subject", "key", "value", "said"}
    assert first["older"]["said"] == expected[0].older.said.isoformat()
