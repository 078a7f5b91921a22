"""Helpers shared by the store tests: stores with a stepping clock, a worker process, sample data,
and what "the database is unchanged" means, measured."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Iterator

import pytest

from memkit import lab
from memkit.clock import FakeClock
from memkit.store import MemoryStore


def open_store(path: Path, **options: Any) -> MemoryStore:
    """A store whose clock moves one second per reading: distinct, ordered timestamps."""
    options.setdefault("clock", FakeClock(step_seconds=1))
    return MemoryStore(path, **options)


@pytest.fixture
def clocked(tmp_path: Path) -> Iterator[MemoryStore]:
    with open_store(tmp_path / "memory.sqlite3") as opened:
        yield opened


def worker(mode: str, path: Path, user: str, key: str, value: str | None = None) -> object:
    """One put or get of a preference in a process of its own (the lab's `put`/`get` workers)."""
    payload = {"path": str(path), "user": user, "key": key, **({"value": value} if value is not None else {})}
    return lab.run_worker(mode, payload)


def fill(store: MemoryStore, user: str) -> None:
    """Records, an update, a deletion and two archived turns of `user`, with awkward characters."""
    store.put(user, "s1", "preference", "drink", "tea", confirmation="cli#1")
    store.put(user, "s2", "preference", "drink", "green tea\u2028with\x85milk", confirmation="cli#2")
    store.put(user, "s2", "episode", "trip", "went to 北京 \"quoted\" \\ back")
    store.put(user, "s2", "episode", "gone", "soon deleted")
    store.delete(user, "episode", "gone", session="s3", confirmation="cli#3")
    store.archive_turns(user, "s1", [{"turn": 1, "role": "user", "content": "hello", "at": "t1"},
                                     {"turn": 2, "role": "assistant", "content": "hi", "at": "t2"}])


def memkit_file(path: Path) -> Path:
    """A closed memkit database at `path`, filled for alice."""
    with MemoryStore(path) as store:
        fill(store, "alice")
    return path

TABLES = ("memories", "memory_events", "user_counts", "total_count", "transcript")


def snapshot(store: MemoryStore) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, in a stable order: equal snapshots mean nothing was written."""
    conn = store.connection
    return {
        table: sorted((tuple(row) for row in conn.execute(f"SELECT * FROM {table}")), key=repr)
        for table in TABLES
    }


def folder_state(folder: Path) -> dict[str, str]:
    """Name -> sha256 (or '<dir>', '<link>') of everything in a folder: shows a changed or a new file."""
    state = {}
    for name in sorted(os.listdir(folder)):
        entry = folder / name
        if entry.is_symlink():
            state[name] = "<link>" + os.readlink(entry)
        elif entry.is_dir():
            state[name] = "<dir>"
        else:
            state[name] = hashlib.sha256(entry.read_bytes()).hexdigest()
    return state


def killed_writer(path: Path, user: str, key: str, value: str) -> dict[str, Any]:
    """A process that opens `path`, commits one put and is killed with SIGKILL (no close, no checkpoint).

    Returns the record it committed; the commit lives only in the `-wal` file beside `path`.
    """
    hanging = lab.start_worker("put", {"path": str(path), "user": user, "key": key, "value": value, "hang": True})
    try:
        written = lab.read_answer(hanging)
        assert written is not None
    finally:
        hanging.kill()
        hanging.communicate()
    assert Path(f"{path}-wal").stat().st_size > 0
    return dict(written)
