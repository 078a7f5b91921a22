"""The per-user bound on archived turns (`Limits.max_archived_turns_per_user`), on every backend.

Unbounded, one user's conversation filled a 1 MiB store and then another user's first memory was
refused. A write past the bound removes that user's oldest archived turns (every session, by their
time) inside its own transaction, and a retried batch never brings a removed turn back.
"""

from __future__ import annotations

import threading

import pytest

from _store_helpers import open_store, snapshot
from memkit.errors import QuotaError
from memkit.limits import Limits

pytestmark = pytest.mark.usefixtures("backend")  # the conformance suite: every test on every backend


def turn(number: int, content: str = "", at: int | None = None) -> dict:
    """A turn numbered `number`; its time orders it among every session's turns (`at`, default its number)."""
    return {"turn": number, "role": "user" if number % 2 else "assistant",
            "content": content or f"turn {number}", "at": f"2026-01-01T00:00:00.{at or number:06d}+00:00"}


def kept(store, user: str, session: str) -> list[int]:
    return [t["turn"] for t in store.archived_turns(user, session)]


def test_one_users_conversation_never_refuses_another_users_first_memory(tmp_path):
    # The outside attack's reproducer: turns of 2,000 characters under a 1 MiB cap, the default bound.
    limits = Limits(max_db_bytes=1 << 20)
    refused_hog = 0
    with open_store(tmp_path / "memory.sqlite3", limits=limits) as store:
        for n in range(1, 601):  # 1.2 million characters: past the cap when nothing bounds them
            try:
                store.archive_turns("hog", f"s{n // 50}", [turn(n, f"{n} " + "x" * 2000)])
            except QuotaError:
                refused_hog += 1
        refused_others = 0
        for other in range(10):  # refused before the bound: "the write would grow the database to ... bytes"
            try:
                store.put(f"user{other}", "s1", "episode", "trip", "a long story " + "y" * 490)
            except QuotaError:
                refused_others += 1
        held = store.traces("hog")["transcript"]
        newest = [t["turn"] for s in range(13) for t in store.archived_turns("hog", f"s{s}")]
    assert refused_others == refused_hog == 0
    assert newest == list(range(601 - limits.max_archived_turns_per_user, 601))  # the newest, each once
    assert held == limits.max_archived_turns_per_user


def test_the_oldest_archived_turns_go_first_across_sessions_and_never_another_users(tmp_path):
    with open_store(tmp_path / "memory.sqlite3", limits=Limits(max_archived_turns_per_user=5)) as store:
        store.archive_turns("bob", "s1", [turn(n) for n in (1, 2, 3)])
        store.archive_turns("alice", "old", [turn(1, at=1), turn(2, at=2), turn(3, at=3)])
        store.archive_turns("alice", "new", [turn(1, at=4), turn(2, at=5)])
        assert kept(store, "alice", "old") == [1, 2, 3] and kept(store, "alice", "new") == [1, 2]  # at the bound
        assert store.archive_turns("alice", "new", [turn(3, at=6), turn(4, at=7)]) == 2
        assert kept(store, "alice", "old") == [3] and kept(store, "alice", "new") == [1, 2, 3, 4]
        assert kept(store, "bob", "s1") == [1, 2, 3]


def test_a_retried_batch_never_brings_back_a_trimmed_turn(tmp_path):
    # The exactly-once promise: a window's archiver that crashed after the commit archives the same
    # turns again; what the bound removed meanwhile stays removed, and nothing counts as new.
    with open_store(tmp_path / "memory.sqlite3", limits=Limits(max_archived_turns_per_user=4)) as store:
        every = [turn(n) for n in range(1, 11)]
        added = sum(store.archive_turns("alice", "s1", [t]) for t in every)
        before = snapshot(store)
        assert added == 10 and kept(store, "alice", "s1") == [7, 8, 9, 10]
        assert store.archive_turns("alice", "s1", every) == 0
        assert store.archive_turns("alice", "s1", every[:3]) == 0
        assert snapshot(store) == before and store.last_archived_turn("alice", "s1") == 10


def test_a_batch_longer_than_the_bound_keeps_its_newest_turns(tmp_path):
    with open_store(tmp_path / "memory.sqlite3", limits=Limits(max_archived_turns_per_user=3)) as store:
        assert store.archive_turns("alice", "s1", [turn(n) for n in range(1, 9)]) == 3
        assert kept(store, "alice", "s1") == [6, 7, 8]


def test_writers_racing_for_one_user_leave_exactly_the_bound(tmp_path):
    # Four connections archive one user's sessions at once (on PostgreSQL each in its own transaction,
    # read committed): the user's lock makes each trim see the others' turns, so none is left over.
    path = tmp_path / "memory.sqlite3"
    limits = Limits(max_archived_turns_per_user=8)
    with open_store(path, limits=limits):
        pass
    stores = [open_store(path, limits=limits) for _ in range(4)]
    start = threading.Barrier(len(stores))

    def archive(store, name: str) -> None:
        start.wait()
        for n in range(1, 41):
            store.archive_turns("alice", name, [turn(n, f"{name} {n}")])

    threads = [threading.Thread(target=archive, args=(store, f"s{i}")) for i, store in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    held = stores[0].traces("alice")["transcript"]
    for store in stores:
        store.close()
    assert held == limits.max_archived_turns_per_user
