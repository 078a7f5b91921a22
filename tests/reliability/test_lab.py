"""The real-process experiments: every one starts real interpreters on a real SQLite file."""

from __future__ import annotations

import os
import signal
import sqlite3

import pytest

import lab
from classroom.lab import workers
from memkit.clock import FakeClock
from memkit.errors import StoreError
from memkit.limits import Limits
from memkit.store import MemoryStore, inspect_file


def test_goldfish_remembers_within_a_process_and_forgets_at_restart():
    first = lab.run_goldfish_session(["Remember my drink is green tea", "What is my drink?"])
    second = lab.run_goldfish_session(["What is my drink?"])

    assert first["pid"] != second["pid"] != os.getpid()
    assert [r["text"] for r in first["replies"]] == ["Noted: drink = green tea.", "From memory: drink = green tea."]
    assert second["replies"][0]["text"] == "I have nothing in memory about that yet."


def test_a_confirmed_preference_saved_by_one_process_is_recalled_by_the_next(tmp_path):
    db = tmp_path / "memory.sqlite3"
    first = lab.run_session(db, "alice", "s1", ["Remember my drink is green tea"],
                                    confirm_puts=[("preference", "drink", "green tea")])
    second = lab.run_session(db, "alice", "s2", ["What do I like to drink?"])

    assert first["pid"] != second["pid"]
    assert first["replies"][0]["tools"][0]["ok"] is True
    assert second["replies"][0]["text"] == "From memory: preference drink = green tea."
    with MemoryStore(db) as store:
        assert store.get("alice", "preference", "drink")["source_session"] == "s1"


def test_an_unconfirmed_save_in_a_session_process_is_refused_and_nothing_is_written(tmp_path):
    db = tmp_path / "memory.sqlite3"
    result = lab.run_session(db, "alice", "s1", ["Remember my city is Oslo"])

    tool = result["replies"][0]["tools"][0]
    assert tool["ok"] is False and "no confirmation" in tool["error"]
    with MemoryStore(db) as store:
        assert store.records("alice") == []


def test_session_errors_name_no_folder(tmp_path):
    db = tmp_path / "memory.sqlite3"
    limits = {"max_records_per_user": 1}
    lab.run_session(db, "alice", "s1", ["Remember my drink is tea"],
                            confirm_puts=[("preference", "drink", "tea")], limits=limits)
    result = lab.run_session(db, "alice", "s2", ["Remember my city is Oslo"],
                                     confirm_puts=[("preference", "city", "Oslo")], limits=limits)

    error = result["replies"][0]["tools"][0]["error"]
    assert "per-user quota is 1" in error
    assert str(tmp_path) not in repr(result)


def test_kit_writers_racing_at_the_quota_edge_never_exceed_it(tmp_path):
    result = lab.race_writers(tmp_path / "kit.sqlite3", naive=False, writers=3, quota=5,
                                      new_keys_per_writer=2, pause_s=0.01)

    assert result["prefill"] == 4
    assert result["stored"] == 5 and not result["exceeded"]
    assert (result["accepted_creates"], result["refused_creates"], result["errors"]) == (1, 5, 0)
    assert result["integrity"] == "ok" and result["counters_consistent"]


def test_naive_check_then_insert_writers_exceed_the_quota(tmp_path):
    # The pause between check and insert makes the race reliable; without it, it is only likely.
    result = lab.race_writers(tmp_path / "naive.sqlite3", naive=True, writers=3, quota=5,
                                      new_keys_per_writer=1, pause_s=0.2)

    assert result["exceeded"] and result["stored"] > 5
    assert result["accepted_creates"] == result["stored"] - result["prefill"]
    # The file itself is sound: the damage is a broken rule, not a broken database.
    assert result["integrity"] == "ok" and result["counters_consistent"]


def test_updates_at_the_quota_are_never_refused_while_creates_race(tmp_path):
    result = lab.race_writers(tmp_path / "updates.sqlite3", naive=False, writers=3, quota=4,
                                      new_keys_per_writer=2, updates_per_writer=3, pause_s=0.005, seed=7)

    assert result["accepted_updates"] == 9 and result["refused_updates"] == 0
    assert result["stored"] == 4
    assert sum(len(ops) for ops in result["outcomes"]) == 3 * 5


def test_updates_need_prefilled_keys(tmp_path):
    with pytest.raises(ValueError, match="prefill"):
        lab.race_writers(tmp_path / "x.sqlite3", naive=False, updates_per_writer=1, prefill=0)


def test_a_held_write_lock_refuses_writes_after_the_busy_timeout_but_not_reads(tmp_path):
    db = tmp_path / "memory.sqlite3"
    limits = Limits().replace(busy_timeout_ms=200)
    with MemoryStore(db, limits=limits) as store:
        store.put("alice", "s1", "preference", "drink", "tea")
        with lab.holding_write_lock(db) as holder:
            assert holder["pid"] != os.getpid()
            with pytest.raises(StoreError, match="locked by another writer"):
                store.put("alice", "s1", "preference", "city", "Oslo")
            assert store.get("alice", "preference", "drink")["value"] == "tea"  # WAL: readers go on
        assert holder["exited"] == -signal.SIGKILL
        assert store.put("alice", "s1", "preference", "city", "Oslo")["revision"] == 1
        assert store.get("holder", "preference", "half-written") is None
        assert store.users() == {"alice": 2}


def test_a_short_lock_is_waited_out_within_the_busy_timeout(tmp_path):
    db = tmp_path / "memory.sqlite3"
    with MemoryStore(db) as store:
        with lab.holding_write_lock(db, seconds=0.3):
            record = store.put("alice", "s1", "preference", "drink", "tea")
        assert record["revision"] == 1


def test_a_writer_killed_mid_stream_keeps_every_acknowledged_write(tmp_path):
    db = tmp_path / "memory.sqlite3"
    crash = lab.kill_writer(db, prefix="r1", kill_after_acks=5)

    assert crash["killed"] and crash["returncode"] == -signal.SIGKILL
    assert crash["acks"] >= 5 and crash["acked"][0] == "r1-000000"
    check = lab.check_writes(db, crash["acked"])
    assert (check["lost"], check["half_written"], check["integrity"]) == (0, 0, "ok")
    assert check["present"] == crash["acks"]
    assert check["unacknowledged_commits"] <= 1
    assert check["counters_consistent"]


def test_every_acknowledgement_is_counted_even_when_many_arrive_at_once(tmp_path):
    # A fast writer (NORMAL: no fsync per commit) puts many acknowledgements into one pipe read; each
    # must reach the checker. Once, those buffered by readline() were dropped and went unchecked.
    db = tmp_path / "memory.sqlite3"
    for number in range(8):
        crash = lab.kill_writer(db, prefix=f"n{number}", kill_after_acks=3, synchronous="NORMAL",
                                        delay_s=0.003 * (number % 3))
        numbers = [int(key.rsplit("-", 1)[1]) for key in crash["acked"]]
        assert numbers == list(range(len(numbers)))
        check = lab.check_writes(db, crash["acked"], prefixes=[f"n{number}"])
        assert (check["lost"], check["half_written"]) == (0, 0)
        assert check["unacknowledged_commits"] <= 1


def test_the_checker_reports_a_lost_write_and_a_half_written_one(tmp_path):
    db = tmp_path / "memory.sqlite3"
    crash = lab.kill_writer(db, prefix="r1", kill_after_acks=2)
    conn = sqlite3.connect(db, isolation_level=None)
    # A record without its create event: what a non-atomic writer could leave behind.
    conn.execute(
        "INSERT INTO memories (id, user_id, kind, memory_key, value, source_session, revision, created_at,"
        " updated_at, key_fold, value_fold, seq) VALUES (900000, 'crash', 'episode', 'r1-900000', 'x', 'r1', 1,"
        " 'x', 'x', 'r1-900000', 'x', 900000)"
    )
    conn.close()

    check = lab.check_writes(db, [*crash["acked"], "r1-999999"])
    assert check["lost"] == 1 and check["lost_keys"] == ["r1-999999"]
    assert check["half_written"] == 1 and check["half_written_keys"] == ["r1-900000"]


def test_crash_experiment_summarises_several_kills(tmp_path):
    result = lab.crash_experiment(tmp_path / "crash.sqlite3", kills=3, seed=1, min_acks=1, max_acks=4)

    assert result["kills"] == 3 and len(result["rounds"]) == 3
    assert (result["lost"], result["half_written"], result["integrity"]) == (0, 0, "ok")
    assert result["acknowledged"] == sum(r["acks"] for r in result["rounds"]) >= 3
    assert result["unacknowledged_commits"] <= 3
    assert all(r["returncode"] == -signal.SIGKILL for r in result["rounds"])


def test_try_open_refuses_a_foreign_file_and_leaves_it_untouched(tmp_path):
    foreign = tmp_path / "notes.sqlite3"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.execute("INSERT INTO notes (body) VALUES ('keep me')")
    conn.commit()
    conn.close()

    result = lab.try_open(foreign)

    assert not result["opened"] and result["unchanged"]
    assert result["sha256_before"] == result["sha256_after"] == lab.sha256_file(foreign)
    assert "another program" in result["error"] and str(tmp_path) not in result["error"]
    assert sorted(os.listdir(tmp_path)) == ["notes.sqlite3"]


def test_try_open_accepts_a_memkit_file(tmp_path):
    MemoryStore(tmp_path / "memory.sqlite3").close()
    result = lab.try_open(tmp_path / "memory.sqlite3")
    assert result["opened"] and result["error"] == ""


def test_attempt_puts_reports_each_outcome_without_raising(tmp_path):
    limits = Limits().replace(max_records_per_user=1)
    with MemoryStore(tmp_path / "memory.sqlite3", limits=limits, clock=FakeClock(step_seconds=1)) as store:
        rows = lab.attempt_puts(store, [
            {"user": "alice", "kind": "preference", "key": "drink", "value": "tea"},
            {"user": "alice", "kind": "preference", "key": "drink", "value": "tea"},
            {"user": "alice", "kind": "preference", "key": "drink", "value": "coffee"},
            {"user": "alice", "kind": "preference", "key": "city", "value": "Oslo"},
            {"user": "alice", "kind": "mood", "key": "x", "value": "y", "label": "bad kind"},
            {"user": "alice", "kind": "preference", "key": "k", "value": "a\x00b"},
        ])
    assert [r["outcome"] for r in rows] == ["saved", "unchanged", "saved", "QuotaError", "ValidationError",
                                            "ValidationError"]
    assert [r["revision"] for r in rows[:3]] == [1, 1, 2]
    assert rows[4]["attempt"] == "bad kind" and "unknown" in rows[4]["message"]
    assert rows[5]["value"] == "a\\x00b"


def test_scrub_leaves_file_names_only(tmp_path):
    path = tmp_path / "memory.sqlite3"
    assert lab.scrub(f"{path} is locked", path) == "memory.sqlite3 is locked"
    assert lab.scrub(f"the folder {tmp_path} does not exist", path) == "the folder <workspace> does not exist"


def test_the_worker_refuses_an_unknown_mode():
    with pytest.raises(SystemExit, match="usage"):
        workers.main(["nope"])


def test_files_in_a_folder_with_spaces_and_a_hash_work(tmp_path):
    folder = tmp_path / "my memory #1"
    folder.mkdir()
    crash = lab.kill_writer(folder / "memory.sqlite3", prefix="r1", kill_after_acks=1)
    check = lab.check_writes(folder / "memory.sqlite3", crash["acked"])
    assert (check["lost"], check["integrity"]) == (0, "ok")
    assert inspect_file(folder / "memory.sqlite3")["records"] >= 1


@pytest.mark.parametrize(("predicted", "measured", "said"), [
    (None, 3, "no prediction written yet"),
    ({"window": None, "pending": 2}, {"window": 3, "pending": 2}, "no prediction written yet"),
    (0, 0, "right"),
    ({"window": 3, "pending": 2}, {"window": 3, "pending": 2}, "right"),
    (2, 3, "not quite: it was 3"),
    ({"lost": 1}, {"lost": 0}, "not quite: it was {'lost': 0}"),
])
def test_compare_prediction_says_missing_right_or_what_it_was(predicted, measured, said):
    assert lab.compare_prediction(predicted, measured) == said
