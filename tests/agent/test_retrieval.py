"""Retrieval: a few preferences plus episodes matched by task terms, whole records, inside the budget."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memkit import FakeClock, Limits, MemoryStore, retrieve
from memkit.jsonutil import json_chars
from memkit.retrieval import task_terms

TEXT = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")


def test_task_terms_are_bounded_deduplicated_and_skip_stopwords():
    assert task_terms("What drink do I like in the morning? drink!") == ["drink", "morning"]
    assert len(task_terms(" ".join(f"word{n}" for n in range(50)))) == 8
    assert task_terms("我喜欢咖啡") == ["我喜", "喜欢", "欢咖", "咖啡"]
    assert task_terms("a" * 1000, max_chars=256) == ["a" * 256]


def test_matched_episodes_and_preferences_are_included_whole(tmp_path):
    with MemoryStore(tmp_path / "m.sqlite3", clock=FakeClock(step_seconds=1)) as store:
        store.put("alice", "s1", "preference", "drink", "green tea")
        store.put("alice", "s1", "episode", "trip.kyoto", "Visited Kyoto in May")
        store.put("alice", "s1", "episode", "dentist", "Dentist appointment moved")
        context = retrieve(store, "alice", "Tell me about Kyoto again")
    keys = [(m["kind"], m["key"]) for m in context.memory]
    assert ("episode", "trip.kyoto") in keys and ("preference", "drink") in keys
    assert ("episode", "dentist") not in keys
    assert all(m["value"] in ("green tea", "Visited Kyoto in May") for m in context.memory)


def test_at_most_five_preferences_and_the_report_says_why(tmp_path):
    with MemoryStore(tmp_path / "m.sqlite3", clock=FakeClock(step_seconds=1)) as store:
        for n in range(9):
            store.put("alice", "s1", "preference", f"pref{n}", f"value {n}")
        context = retrieve(store, "alice", "anything")
    assert len([m for m in context.memory if m["kind"] == "preference"]) == 5
    # The most recent five, newest first.
    assert [m["key"] for m in context.memory] == ["pref8", "pref7", "pref6", "pref5", "pref4"]
    assert {row["matched_by"] for row in context.packing} == {"recent preference"}


def test_budget_skips_whole_records_and_reports_them(tmp_path):
    limits = Limits().replace(retrieval_budget_chars=400)
    with MemoryStore(tmp_path / "m.sqlite3", limits=limits, clock=FakeClock(step_seconds=1)) as store:
        for n in range(4):
            store.put("alice", "s1", "episode", f"coffee{n}", f"coffee story {n} " + "x" * 120)
        context = retrieve(store, "alice", "coffee")
    assert context.chars == json_chars(context.memory) <= 400
    skipped = [row for row in context.packing if row["status"] == "skipped"]
    assert skipped and all("budget 400" in row["reason"] for row in skipped)
    assert all(len(m["value"]) == len("coffee story 0 ") + 120 for m in context.memory)  # never cut


def test_a_record_matched_by_more_terms_ranks_first(tmp_path):
    with MemoryStore(tmp_path / "m.sqlite3", clock=FakeClock(step_seconds=1)) as store:
        store.put("alice", "s1", "episode", "one", "kyoto trip")
        store.put("alice", "s1", "episode", "two", "kyoto temple trip with tea")
        context = retrieve(store, "alice", "kyoto temple tea")
    assert [m["key"] for m in context.memory] == ["two", "one"]


@settings(max_examples=30, deadline=None)
@given(values=st.lists(st.text(TEXT, min_size=1, max_size=200).filter(str.strip), min_size=1, max_size=12),
       budget=st.integers(50, 3000), task=st.text(max_size=80))
def test_never_over_budget_and_never_another_users_value(tmp_path_factory, values, budget, task):
    path = tmp_path_factory.mktemp("r") / "m.sqlite3"
    limits = Limits().replace(retrieval_budget_chars=budget)
    with MemoryStore(path, limits=limits) as store:
        for n, value in enumerate(values):
            store.put("alice", "s1", "episode", f"e{n}", value)
            store.put("bob", "s1", "episode", f"e{n}", "BOB-ONLY " + value)
        context = retrieve(store, "alice", task + " " + " ".join(values))
    assert json_chars(context.memory) <= budget
    assert not any("BOB-ONLY" in m["value"] for m in context.memory)


def test_mixed_script_words_split_into_their_scripts():
    assert task_terms("Kyoto京都trip?") == ["kyoto", "京都", "trip"]
    assert task_terms("我喜欢coffee和tea") == ["我喜", "喜欢", "coffee", "和", "tea"]
