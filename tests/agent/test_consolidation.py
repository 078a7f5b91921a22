"""Consolidation: a finished session's archived turns become proposals a person approves.

Real SQLite store, turns archived by the store's own window; nothing is ever approved by it.
"""

from __future__ import annotations

import asyncio

import pytest

from memkit import FakeClock, FixtureModel, Limits, MemoryAgent, MemoryStore
from memkit.consolidation import consolidate, episode_key, summarise
from memkit.remembering import MemoryChange
from memkit.errors import CommittedThenFailedError, ValidationError
from memkit.window import StoreWindow

SAID = ["I live in Lisbon", "answer in French this time", "I'm vegetarian",
        "My ticket number is T-4471", "I moved to Porto", "What was my ticket number?"]


def finished_session(store: MemoryStore, user: str = "sam", session: str = "s1") -> None:
    """A conversation whose model proposed nothing (the background path), then archived whole."""
    window = StoreWindow(store, size=4)

    async def talk() -> None:
        agent = MemoryAgent(store, user, session, FixtureModel(policy=lambda said: None), window=window)
        for text in SAID:
            await agent.ask(text)

    asyncio.run(talk())
    window.retire_user(user)  # the session is over: every turn is in the archive


@pytest.fixture
def talked(tmp_path):
    with MemoryStore(tmp_path / "m.sqlite3", clock=FakeClock(step_seconds=1)) as store:
        finished_session(store)
        assert store.proposals("sam") == []  # the hot path proposed nothing
        yield store


def test_it_proposes_the_last_word_on_each_fact_and_an_episode_and_approves_nothing(talked):
    done = consolidate(talked, "sam", "s1")
    assert (done.turns_read, done.policy_calls) == (12, 6)
    proposed = [(p["kind"], p["key"], p["value"]) for p in done.proposed]
    assert proposed[:2] == [("preference", "diet", "vegetarian"), ("preference", "city", "Porto")]
    kind, key, summary = proposed[2]
    assert (kind, key) == ("episode", "session.s1")
    # A summary, not a copy: what it was about, what was named, how it ended.
    assert summary.startswith("Session s1 on ") and ", 6 messages from the person. " in summary
    assert "Told: city Porto (changed from Lisbon), diet vegetarian." in summary
    assert "Named: ticket number T-4471. Asked 1 question. 1 instruction for that time only, not kept." in summary
    assert summary.endswith("Ended with: 'From our conversation: your ticket number is T-4471.'")
    assert "French" not in summary and "What was my" not in summary  # nothing quoted whole
    assert all(p["status"] == "pending" for p in talked.proposals("sam"))
    assert talked.records("sam") == []  # a person approves, never consolidation


def test_run_again_it_proposes_nothing_new(talked):
    first = consolidate(talked, "sam", "s1")
    again = consolidate(talked, "sam", "s1")
    assert again.proposed == [] and [p["id"] for p in again.already_waiting] == [p["id"] for p in first.proposed]
    assert len(talked.proposals("sam")) == 3


def test_what_memory_already_holds_is_not_proposed(talked):
    talked.put("sam", "cli", "preference", "city", "Porto", confirmation="cli#1")
    done = consolidate(talked, "sam", "s1", summary=False)
    assert [p["key"] for p in done.proposed] == ["diet"]
    assert len(done.unchanged) == 1 and done.unchanged[0].startswith("preference city")


@pytest.mark.parametrize(("user", "session"), [("sam", "s9"), ("bob", "s1")])
def test_a_session_with_no_turns_of_the_user_is_refused_and_nothing_is_proposed(talked, user, session):
    with pytest.raises(ValidationError, match="Nothing was proposed"):
        consolidate(talked, user, session)
    assert talked.proposals("sam") == [] and talked.proposals("bob") == []


def test_a_failure_after_some_proposals_says_they_were_kept(tmp_path):
    with MemoryStore(tmp_path / "m.sqlite3", clock=FakeClock(step_seconds=1),
                     limits=Limits(max_pending_proposals_per_user=1)) as store:
        finished_session(store)
        with pytest.raises(CommittedThenFailedError, match="proposal 1 kept") as caught:
            consolidate(store, "sam", "s1")
        assert "at most 1 may wait" in str(caught.value)
        assert [p["key"] for p in store.proposals("sam")] == ["diet"]


def test_the_episode_key_is_a_key_whatever_the_session_id():
    assert episode_key("thread/42 Main") == "session.thread-42-main"
    assert episode_key("///") == "session.unnamed"
    assert len(episode_key("s" * 100)) == 64  # the default longest key
    assert episode_key("s" * 100, 20) == "session." + "s" * 12  # a store whose keys are shorter


def test_the_same_session_gives_the_same_summary(tmp_path):
    values = []
    for name in ("a", "b"):
        with MemoryStore(tmp_path / f"{name}.sqlite3", clock=FakeClock(step_seconds=1)) as store:
            finished_session(store)
            values.append(consolidate(store, "sam", "s1").proposed[-1]["value"])
    assert values[0][len("Session s1 on 2026-01-01"):] == values[1][len("Session s1 on 2026-01-01"):]


def test_a_summary_names_codes_and_figures_and_a_forgotten_fact():
    said = "Flight TP-1234 lands at 18:05, order 55120"
    turns = [{"turn": 1, "role": "user", "content": said, "at": "2026-03-02T09:00Z"},
             {"turn": 2, "role": "assistant", "content": "Noted.", "at": "2026-03-02T09:00Z"}]
    told = [MemoryChange("put", "preference", "diet", "vegan"), MemoryChange("delete", "preference", "diet")]
    text = summarise("s7", turns, told, [said])
    assert text == ("Session s7 on 2026-03-02, 3 messages from the person. Asked to forget: diet. "
                    "Named: TP-1234, 18:05, 55120. Ended with: 'Noted.'")


def _turns(*pairs: tuple[str, str]) -> list[dict[str, object]]:
    return [{"turn": n, "role": role, "content": text, "at": "2026-03-02T09:00Z"}
            for n, (role, text) in enumerate(pairs, 1)]


def test_a_count_or_an_hour_is_not_named_and_a_second_clause_is_not_part_of_the_value():
    said = ["I need 2 tickets for the 3pm show on May 5", "My order number is 55120 and flight TP-1234 was late",
            "My phone number is +351 912 345 678", "My name is not important"]
    text = summarise("s8", _turns(*[("user", s) for s in said], ("assistant", "Booked.")), [], said)
    assert "Named: order number 55120, TP-1234, phone number +351 912 345 678. " in text, text
    assert " 2," not in text and "3pm" not in text and "was late" not in text and "important" not in text, text


def test_a_fact_changed_back_and_forth_names_the_value_it_changed_from_and_a_note_is_quoted():
    told = [MemoryChange("put", "preference", "city", "Lisbon"), MemoryChange("put", "preference", "city", "Porto"),
            MemoryChange("put", "preference", "city", "Lisbon"),
            MemoryChange("put", "episode", "note.dentist-friday", "The dentist moved to Friday")]
    text = summarise("s9", _turns(("user", "..."), ("assistant", "Noted.")), told, [])
    assert "Told: city Lisbon (changed from Porto), 'The dentist moved to Friday'. " in text, text


def test_small_talk_only_says_how_it_ended():
    said = ["Hello!", "What a lovely day", "Thanks, bye"]
    text = summarise("s10", _turns(("user", said[0]), ("assistant", "Hi!"), ("user", said[1]),
                                   ("assistant", "Indeed."), ("user", said[2]), ("assistant", "Bye!")), [], said)
    assert text == "Session s10 on 2026-03-02, 3 messages from the person. Ended with: 'Bye!'"


def test_over_the_limit_the_last_things_named_give_way_and_the_ending_stays():
    said = [f"My order number is {55120 + n} and flight TP-{1234 + n} was delayed" for n in range(12)]
    turns = _turns(*[("user", s) for s in said], ("assistant", "Logged as complaint CX-9011."))
    whole = summarise("s11", turns, [], said)
    assert len(whole) > 300 and "TP-1245" in whole
    text = summarise("s11", turns, [], said, limit=300)
    assert len(text) <= 300 and text.endswith("Ended with: 'Logged as complaint CX-9011.'"), text
    assert "Named: order number 55120, TP-1234, " in text and " more. Ended with" in text, text
    shown = len(text.split("Named: ")[1].split(" and ")[0].split(", "))
    assert text.split(" and ")[-1].startswith(f"{24 - shown} more"), text
    # Nothing named fits: the count stays, the ending too.
    tight = summarise("s11", turns, [], said, limit=130)
    assert "24 things named. Ended with: " in tight, tight


def test_a_long_session_is_summarised_within_the_value_limit(tmp_path):
    limits = Limits(max_value_chars=200)
    with MemoryStore(tmp_path / "m.sqlite3", clock=FakeClock(step_seconds=1), limits=limits) as store:
        finished_session(store)
        episode = consolidate(store, "sam", "s1").proposed[-1]["value"]
    assert len(episode) == 200 and episode.endswith("…") and episode.startswith("Session s1 on ")


def test_a_models_summary_is_proposed_as_it_was_written(talked):
    done = consolidate(talked, "sam", "s1", summary="Sam moved from Lisbon to Porto and asked about ticket T-4471.")
    assert done.proposed[-1]["value"] == "Sam moved from Lisbon to Porto and asked about ticket T-4471."
    assert done.policy_calls == 6 and talked.records("sam") == []
