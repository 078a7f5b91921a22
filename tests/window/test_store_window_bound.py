"""The store's own window under one user's endless conversation: every append checks the size cap,
and a user's windows together hold at most `Limits.max_archived_turns_per_user` turns (their least
recently written sessions retire into the archive, whose own bound trims the oldest).

Before: an append that archived nothing never checked the size cap, so one user opening a new
session per message grew the file past it, and other users' first memories were refused.
"""

from __future__ import annotations

import os

import pytest

from _store_helpers import snapshot
from memkit.errors import QuotaError
from memkit.limits import Limits
from memkit.store import MemoryStore
from memkit.window.store_window import StoreWindow


def _window_turns(store: MemoryStore, user: str) -> int:
    return store.connection.execute("SELECT count(*) FROM window_turns WHERE user_id = ?", (user,)).fetchone()[0]


@pytest.mark.parametrize("sessions", [1, 600], ids=["one-session", "a-session-per-message"])
def test_one_users_conversation_never_refuses_another_users_first_memory(tmp_path, sessions):
    limits = Limits(max_db_bytes=1 << 20)
    path = tmp_path / "memory.sqlite3"
    refused_hog = refused_others = 0
    with MemoryStore(path, limits=limits) as store:
        window = StoreWindow(store, size=16)
        for n in range(1, 601):  # 1.2 million characters
            try:
                window.append("hog", f"s{n % sessions}", "user", f"{n} " + "x" * 2000)
            except QuotaError:
                refused_hog += 1
        for other in range(10):
            try:
                store.put(f"user{other}", "s1", "episode", "trip", "a long story " + "y" * 490)
            except QuotaError:
                refused_others += 1
        archived = store.traces("hog")["transcript"]
        in_windows = _window_turns(store, "hog")
    assert refused_hog == refused_others == 0
    assert archived == limits.max_archived_turns_per_user
    assert in_windows == (16 if sessions == 1 else limits.max_archived_turns_per_user)
    assert os.path.getsize(path) <= limits.max_db_bytes


def test_an_append_past_the_size_cap_is_refused_and_writes_nothing(tmp_path):
    path = tmp_path / "memory.sqlite3"
    with MemoryStore(path, limits=Limits(max_db_bytes=1 << 20, max_archived_turns_per_user=10_000)) as store:
        window = StoreWindow(store, size=1_000)  # nothing ever falls out: only the cap can refuse
        with pytest.raises(QuotaError, match="the cap is 1048576 bytes"):
            for n in range(1, 2_000):
                window.append("alice", "s1", "user", f"{n} " + "x" * 2000)
        before = snapshot(store, ("window_turns", "transcript"))
        with pytest.raises(QuotaError):
            window.append("alice", "s2", "user", "y" * 5000)
        assert snapshot(store, ("window_turns", "transcript")) == before
    assert os.path.getsize(path) <= 1 << 20


def test_the_least_recently_written_sessions_retire_whole_and_stay_readable(tmp_path):
    limits = Limits(max_archived_turns_per_user=6)
    with MemoryStore(tmp_path / "memory.sqlite3", limits=limits) as store:
        window = StoreWindow(store, size=4)
        for session in ("a", "b", "c"):
            for n in range(2):
                window.append("alice", session, "user", f"{session}{n}")
        window.append("bob", "a", "user", "bob's own")
        assert _window_turns(store, "alice") == 6
        window.append("alice", "d", "user", "d0")  # 7 turns in alice's windows: session a retires whole
        assert [t["content"] for t in window.recent("alice", "a")] == []
        assert [t["content"] for t in window.load_session("alice", "a")] == ["a0", "a1"]
        assert [t["content"] for t in window.recent("alice", "b")] == ["b0", "b1"]
        assert [t["content"] for t in window.recent("bob", "a")] == ["bob's own"]
        assert _window_turns(store, "alice") == 5
