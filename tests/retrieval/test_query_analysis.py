"""Stage 1: temporal and history intent, and the speaker-name helpers of query analysis."""

from datetime import UTC, datetime

import pytest

from cognis_memory.retrieval.query_analysis import (
    analysed_query,
    analyze_query,
    find_names,
    name_candidates,
    strip_names,
)

NOW = datetime(2023, 6, 15, 12, 0, tzinfo=UTC)


def test_no_intent() -> None:
    a = analyze_query("What is my favourite food?", NOW, default_window_days=30)
    assert a.temporal == "none" and not a.is_temporal and not a.history


def test_explicit_month_resolves_against_now() -> None:
    a = analyze_query("What did I cook in May?", NOW, default_window_days=30)
    assert a.temporal == "explicit"
    assert a.target_start == datetime(2023, 5, 1, tzinfo=UTC)
    assert a.target_end == datetime(2023, 6, 1, tzinfo=UTC)
    assert a.window_days == 31  # at least the span of the expression


def test_last_week_window() -> None:
    a = analyze_query("Where did I go last week?", NOW, default_window_days=30)
    assert a.temporal == "explicit"
    assert a.target_start == datetime(2023, 6, 5, tzinfo=UTC)  # the Monday of the previous week
    assert a.window_days == 30


def test_recent_targets_now() -> None:
    a = analyze_query("What have I been reading lately?", NOW, default_window_days=14)
    assert a.temporal == "recent" and a.target_start == NOW and a.window_days == 14


@pytest.mark.parametrize(
    "q", ["When did Alice move to Lisbon?", "what date is the wedding", "How long ago was the trip?"]
)
def test_when_questions(q: str) -> None:
    a = analyze_query(q, NOW, default_window_days=30)
    assert a.temporal == "when" and a.target_start is None


@pytest.mark.parametrize(
    ("q", "history"),
    [("Where did I used to live?", True), ("What did I previously work on?", True),
     ("Has my diet changed?", True), ("Where do I live?", False)],
)  # fmt: skip
def test_history_intent(q: str, history: bool) -> None:
    assert analyze_query(q, NOW, default_window_days=30).history is history


def test_explicit_date_beats_when() -> None:
    a = analyze_query("When in May 2022 did we meet?", NOW, default_window_days=30)
    assert a.temporal == "explicit" and a.target_start == datetime(2022, 5, 1, tzinfo=UTC)
    assert a.to_dict()["expressions"] == ["in May 2022"]


def test_name_candidates_skip_openers_and_acronyms() -> None:
    assert name_candidates("What did Priya research?") == ["Priya"]
    assert name_candidates("When did Tomas and Lena meet in Paris?") == ["Tomas", "Lena", "Paris"]
    assert name_candidates("Is NASA hiring?") == []  # all-caps acronyms are not names
    assert name_candidates("What is Marco's favourite book?") == ["Marco"]
    assert name_candidates("where does alice live") == []  # lower case: only known speakers match later


def test_find_names_whole_words_possessive_written_as_names() -> None:
    known = ["Alice", "Bob", "Al"]
    assert find_names("What is Alice's job?", known) == ["Alice"]
    assert find_names("Did Bob call?", known) == ["Bob"]
    assert find_names("Alicia called", known) == []  # whole words only
    assert find_names("what is alice's job?", known) == []  # not written as a name: not used as one


def test_strip_names_removes_name_and_possessive() -> None:
    assert strip_names("What is Priya's job?", ["Priya"]) == "What is job?"
    assert strip_names("When did Tomas and Lena meet?", ["Tomas", "Lena"]) == "When did and meet?"
    assert strip_names("Alice", ["Alice"]) == "Alice"  # never strip a query to nothing


def test_analysed_query_holds_every_cut_the_search_reads() -> None:
    q = "What does Will eat these days, tell me about it?"
    analysis = analyze_query(q, NOW, default_window_days=30)
    assert analysis.state == "present"
    a = analysed_query(q, analysis, ["Will", "Maya"], drop_state_words=True, keyword_cleanup=True)
    assert (a.text, a.analysis, a.role) == (q, analysis, "user")
    assert a.speaker_names == ("Will",)  # a known speaker the query uses as a name; Maya is not in it
    assert a.search_text == "What does eat, tell me about it?"  # the name and the state adverb leave it
    assert a.keyword_text == "What does eat, me it?"  # and the fillers leave the keyword text
    assert analysed_query("What did you recommend to Maya?", analysis, ["Maya"]).role == "assistant"


def test_analysed_query_without_speakers_or_cleanup_searches_the_text_as_asked() -> None:
    q = "What does Will eat these days, tell me about it?"
    a = analysed_query(q, analyze_query(q, NOW, default_window_days=30))
    assert (a.speaker_names, a.search_text, a.keyword_text) == ((), q, q)
