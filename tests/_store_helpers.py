"""Helpers shared by the store tests: stores with a stepping clock on the backend under test, a
worker process, sample data, and what "the database is unchanged" means, measured."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any
from collections.abc import Iterator

import pytest

import lab
from memkit.clock import FakeClock
from memkit.store import MemoryStore, Store


DEBIAN_POSTGRES = Path("/usr/lib/postgresql/15/bin")
"""Debian's PostgreSQL 15 (package postgresql-15, with contrib: pg_trgm), run by `pg_trgm_url`."""

TEST_SERVER_SETTINGS = {"fsync": "off", "max_connections": "200"}
"""Throw-away servers: fsync off spares the disk (no test cuts the power; commits still wait for
`synchronous_commit`, and a killed server recovers from the WAL in the page cache)."""


class Backend:
    """Where the store tests open their stores: SQLite files, or schemas of a PostgreSQL server.

    On PostgreSQL each path stands for a schema of its own (named after the path), so a test that
    opens one path twice reopens the same store, and every test gets fresh ones.
    """

    def __init__(self, name: str, url: str | None = None) -> None:
        self.name, self.url = name, url
        self.schemas: set[str] = set()

    def open(self, path: Path, **options: Any) -> Store:
        if self.url is None:
            return MemoryStore(path, **options)
        from memkit.store import PostgresStore

        schema = "t_" + hashlib.sha256(str(path).encode()).hexdigest()[:20]
        self.schemas.add(schema)
        return PostgresStore(self.url, schema=schema, **options)

    def __repr__(self) -> str:
        return f"Backend({self.name!r})"


SQLITE = Backend("sqlite")
ACTIVE: list[Backend] = [SQLITE]
"""The backend of the running test: the `backend` fixture (tests/conftest.py) pushes and pops it."""


def open_store(path: Path, **options: Any) -> Store:
    """A store on the backend under test whose clock moves one second per reading: distinct,
    ordered timestamps."""
    options.setdefault("clock", FakeClock(step_seconds=1))
    return ACTIVE[-1].open(path, **options)


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

TABLES = ("memories", "memory_events", "user_counts", "transcript")


def count_sql(store: MemoryStore) -> str:
    """The store-wide record count as a row (1, records): SQLite keeps it in `store_meta` (step 12),
    PostgreSQL in `total_count`."""
    return "SELECT 1, records FROM store_meta" if store.path is not None else "SELECT * FROM total_count"


def snapshot(store: MemoryStore, tables: tuple[str, ...] = TABLES) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table and the store-wide count, in a stable order: equal snapshots mean
    nothing was written."""
    conn = store.connection
    found = {
        table: sorted((tuple(row) for row in conn.execute(f"SELECT * FROM {table}")), key=repr)
        for table in tables
    }
    return {**found, "total_count": [tuple(row) for row in conn.execute(count_sql(store))]}


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


@pytest.fixture
def demo(tmp_path):
    """Alice and Bob with the same keys and different values, on a fake clock."""
    with MemoryStore(tmp_path / "demo.sqlite3", clock=FakeClock(step_seconds=1)) as store:
        for user, drink, city in (("alice", "jasmine tea", "Lisbon"), ("bob", "espresso", "Oslo")):
            store.put(user, "s0", "preference", "drink", drink)
            store.put(user, "s0", "preference", "city", city)
        store.put("alice", "s0", "episode", "trip.lisbon", "Walked the Alfama hills in May")
        yield store
