"""StoreWindow: the window in the store's own SQLite file keeps the promises of every window.

The last N turns, a sliding expiry (FakeClock drives it), older turns archived exactly once (also
with two processes appending at once), forgetting removes them, bad input changes nothing.
"""

from __future__ import annotations

import datetime
import sqlite3
import subprocess
import sys
import types

import pytest

from memkit import Limits, MemoryStore, ValidationError
from memkit.errors import LockedError
from memkit.clock import FakeClock
from memkit.forgetting import forget_user
from memkit.window import StoreWindow


@pytest.fixture
def db(tmp_path):
    return tmp_path / "m.sqlite3"


def contents(turns):
    return [t["content"] for t in turns]


def test_the_last_n_turns_stay_recent_and_the_older_are_archived_once(db):
    with MemoryStore(db) as store:
        window = StoreWindow(store, size=3)
        for n in range(1, 8):
            assert window.append("alice", "s1", "user", f"m{n}")["turn"] == n
        assert contents(window.recent("alice", "s1")) == ["m5", "m6", "m7"]
        assert contents(store.archived_turns("alice", "s1")) == ["m1", "m2", "m3", "m4"]
        assert contents(window.load_session("alice", "s1")) == [f"m{n}" for n in range(1, 8)]
        assert window.recent("alice", "s2") == [] and window.user_turns("bob") == 0


def test_the_conversation_continues_in_a_new_store_object(db):
    with MemoryStore(db) as store:
        StoreWindow(store, size=2).append_exchange("alice", "s1", "My ticket is T-1", "Noted")
    with MemoryStore(db) as store:  # as the next process opens it
        window = StoreWindow(store, size=2)
        assert contents(window.recent("alice", "s1")) == ["My ticket is T-1", "Noted"]
        assert window.append("alice", "s1", "user", "and?")["turn"] == 3


def test_the_expiry_slides_on_every_use_and_an_idle_window_goes_to_the_archive(db):
    clock = FakeClock()
    with MemoryStore(db) as store:
        window = StoreWindow(store, size=5, ttl=60, clock=clock)
        window.append("alice", "s1", "user", "hello")
        window.append("bob", "s1", "user", "hi")
        clock.advance(seconds=50)
        assert contents(window.recent("alice", "s1")) == ["hello"]  # a read restarts alice's clock
        clock.advance(seconds=50)  # bob idle 100 s, alice 50 s
        assert window.flush() == {"closed": 1, "archived": 1}
        assert window.user_turns("bob") == 0 and contents(store.archived_turns("bob", "s1")) == ["hi"]
        assert contents(window.recent("alice", "s1")) == ["hello"]
        clock.advance(seconds=61)
        assert window.recent("alice", "s1") == []  # expired: no longer recent, not lost
        assert contents(window.load_session("alice", "s1")) == ["hello"]
        assert window.append("alice", "s1", "user", "back")["turn"] == 2  # numbering goes on past the archive


def test_the_expiry_is_kept_to_the_whole_second_rounded_up_never_before_the_ttl(db):
    start = datetime.datetime(2026, 1, 1, 9, 0, 0, 500_000, tzinfo=datetime.UTC)
    clock = FakeClock(start)
    with MemoryStore(db) as store:
        window = StoreWindow(store, size=5, ttl=60, clock=clock)
        window.append("alice", "s1", "user", "hello")  # used at 09:00:00.5: expires at 09:01:01, not 09:01:00.5
        assert [row[4] for row in store.window_rows("alice", "s1")] == ["2026-01-01T09:01:01.000000Z"]
        clock.advance(seconds=60.4)  # idle 60.4 s of its 60: the rounding keeps it, never the reverse
        window.flush()
        assert contents(window.recent("alice", "s1")) == ["hello"]
        assert [row[4] for row in store.window_rows("alice", "s1")] == ["2026-01-01T09:02:01.000000Z"]
        clock.advance(seconds=61)
        assert window.recent("alice", "s1") == [] and contents(store.archived_turns("alice", "s1")) == ["hello"]


def test_a_read_within_the_second_of_the_last_use_writes_nothing_and_needs_no_lock(db):
    clock = FakeClock(datetime.datetime(2026, 1, 1, 9, 0, 0, 200_000, tzinfo=datetime.UTC))
    with MemoryStore(db, limits=Limits(busy_timeout_ms=200)) as store:
        window = StoreWindow(store, size=3, ttl=60, clock=clock)
        for n in range(4):
            window.append("alice", "s1", "user", f"m{n}")
        writes = store.connection.total_changes
        clock.advance(seconds=0.5)  # 09:00:00.7: the expiry is still 09:01:01
        assert contents(window.recent("alice", "s1")) == ["m1", "m2", "m3"]
        assert store.connection.total_changes == writes  # the stored expiry already says this second
        other = sqlite3.connect(db, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # another program holds the write lock
            assert contents(window.recent("alice", "s1")) == ["m1", "m2", "m3"]  # read, not refused
            clock.advance(seconds=1)  # the expiry must move now: that read waits for the lock, and says so
            with pytest.raises(LockedError):
                window.recent("alice", "s1")
            other.execute("ROLLBACK")
        finally:
            other.close()
        assert contents(window.recent("alice", "s1")) == ["m1", "m2", "m3"]
        assert store.connection.total_changes > writes  # the expiry moved, once
        assert {row[4] for row in store.window_rows("alice", "s1")} == {"2026-01-01T09:01:02.000000Z"}


APPENDER = """
import sys
from memkit import MemoryStore
from memkit.window import StoreWindow
with MemoryStore(sys.argv[1]) as store:
    window = StoreWindow(store, size=3)
    for n in range(40):
        window.append_exchange("alice", "s1", f"{sys.argv[2]}-{n}", "ok")
"""


def test_two_processes_appending_at_once_number_every_turn_once_and_archive_it_once(db):
    with MemoryStore(db, limits=Limits(max_archived_turns_per_user=1_000)):
        pass  # the schema (its bound on archived turns past the race's 160), made before the race
    writers = [subprocess.Popen([sys.executable, "-c", APPENDER, str(db), name]) for name in ("a", "b")]
    assert [w.wait(timeout=120) for w in writers] == [0, 0]
    with MemoryStore(db) as store:
        window = StoreWindow(store, size=3)
        turns = window.load_session("alice", "s1")
        archived = store.archived_turns("alice", "s1")
        recent = window.recent("alice", "s1")
    assert [t["turn"] for t in turns] == list(range(1, 161))
    assert len(archived) + len(recent) == 160 and {t["turn"] for t in archived}.isdisjoint(t["turn"] for t in recent)
    questions = [t["content"] for t in turns if t["role"] == "user"]
    assert sorted(questions) == sorted(f"{w}-{n}" for w in "ab" for n in range(40))
    assert all(turns[i + 1]["role"] == "assistant" for i in range(0, 160, 2))  # exchanges never interleave


def test_forgetting_a_user_removes_their_window_turns_and_no_one_elses(db):
    with MemoryStore(db) as store:
        window = StoreWindow(store, size=2)
        for user in ("alice", "bob"):
            for n in range(3):
                window.append(user, "s1", "user", f"{user} {n}")
        report = forget_user(store, "alice")
        assert report["removed"]["window_turns"] == 2 and report["removed"]["transcript"] == 1
        assert report["windows"] == [{"window": "the store's own window", "window_turns": 2}]
        assert window.user_turns("alice") == 0 and window.load_session("alice", "s1") == []
        assert contents(window.load_session("bob", "s1")) == ["bob 0", "bob 1", "bob 2"]
        assert window.forget_user("bob")["window_turns"] == 2 and window.user_turns("bob") == 0


def test_forgetting_through_the_store_alone_leaves_no_recent_turn(db):
    with MemoryStore(db) as store:
        window = StoreWindow(store, size=2)
        window.append_exchange("alice", "s1", "My ticket is T-1", "Noted")
        store.forget_user("alice")  # as the inspector or any store caller forgets
        assert window.user_turns("alice") == 0 and window.recent("alice", "s1") == []


@pytest.mark.parametrize("make, message", [
    (lambda s: StoreWindow(s, size=0), "window size is 0"),
    (lambda s: StoreWindow(s, ttl=0), "ttl is 0"),
    (lambda s: StoreWindow(types.SimpleNamespace(path=None)), "not one; for a PostgreSQL store use RedisWindow"),
])
def test_a_bad_setting_is_refused_by_name(db, make, message):
    with MemoryStore(db) as store, pytest.raises(ValidationError, match=message):
        make(store)


@pytest.mark.parametrize("user, role, content, message", [
    ("al\tice", "user", "hi", "user"),
    ("alice", "system", "hi", "turn role 'system' is unknown"),
    ("alice", "user", "a\x00b", "NUL"),
    ("alice", "user", "x" * 20_001, "a turn holds at most 20000"),
])
def test_bad_input_is_refused_with_a_clear_error_and_nothing_changes(db, user, role, content, message):
    with MemoryStore(db) as store:
        window = StoreWindow(store, size=2)
        window.append("alice", "s1", "user", "kept")
        with pytest.raises(ValidationError, match=message):
            window.append(user, "s1", role, content)
        with pytest.raises(ValidationError):
            window.append_exchange("alice", "s1", "fine", "a\x00b")  # a good question, a bad answer: neither
        assert contents(window.load_session("alice", "s1")) == ["kept"]
