"""The contenders beside memkit's store: langgraph's `SqliteStore`, and the disk's sync.

`LangGraphStore` is what a user would pick instead, as `SqliteStore (rollback journal)` (its default,
as `SqliteStore.from_conn_string` opens it) and `SqliteStore (WAL)`, each at the run's `synchronous`,
read back with PRAGMA (`durability`). A memory is the item `("memkit", user, kind) / key ->
{"value", "at"}`; it keeps no history and checks no quota, and its `search` lists the user's items
and filters them in Python by memkit's rule (it has no substring search). `FsyncProbe` (one 4 KiB
page and a sync) and `PagesProbe` (exactly the WAL frames a store's write adds, and one sync) are
the floors of a durable commit, timed as contenders in the same rounds (NOTES.md has the details).
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from memkit.clock import iso, utc_now

from .data import DataSet

NAMESPACE = "memkit"
LIST_LIMIT = 1_000_000
"""Page size when listing a user's items for search: every item of the user in one call."""

SYNCHRONOUS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def durability(conn: sqlite3.Connection) -> dict[str, str]:
    """The journal mode and `synchronous` a connection really has, read with PRAGMA."""
    return {"journal_mode": conn.execute("PRAGMA journal_mode").fetchone()[0].upper(),
            "synchronous": SYNCHRONOUS[conn.execute("PRAGMA synchronous").fetchone()[0]]}


def check_durability(name: str, conn: sqlite3.Connection, journal_mode: str, synchronous: str) -> dict[str, str]:
    """`durability(conn)`, or an error naming the contender if it is not what the run states."""
    found = durability(conn)
    wanted = {"journal_mode": journal_mode.upper(), "synchronous": synchronous.upper()}
    if found != wanted:
        raise RuntimeError(f"{name}: PRAGMA reports {found}, the run states {wanted}; its figures would not compare")
    return found


def _import_store() -> Any:
    try:
        from langgraph.store.sqlite import SqliteStore
    except ImportError:
        raise ImportError("the peer benchmarks need the bench extra: pip install -e '.[bench]'") from None
    return SqliteStore


def peers_available() -> str | None:
    """None if every peer library imports; else why not (for a skip reason)."""
    missing = []
    for module in ("langgraph.store.sqlite", "agents.memory", "agents.extensions.memory.redis_session"):
        try:
            __import__(module)
        except ImportError as exc:
            missing.append(f"{module} ({exc})")
    return ("not installed: " + ", ".join(missing) + "; pip install -e '.[bench]'") if missing else None


class LangGraphStore:
    """langgraph `SqliteStore` holding the same memories (see the module docstring for the mapping)."""

    def __init__(self, path: Path, synchronous: str, *, wal: bool, data: DataSet | None = None) -> None:
        store_class = _import_store()
        self.name = "SqliteStore (WAL)" if wal else "SqliteStore (rollback journal)"
        self.journal_mode = "WAL" if wal else "DELETE"
        # As SqliteStore.from_conn_string opens it; it stays open for the store's life.
        self.conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        if wal:
            self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute(f"PRAGMA synchronous = {synchronous}")
        self.store = store_class(self.conn)
        self.store.setup()
        if data is not None:
            self._load(data)
        self.durability = check_durability(self.name, self.conn, self.journal_mode, synchronous)

    def _load(self, data: DataSet) -> None:
        from langgraph.store.base import PutOp

        ops = [PutOp((NAMESPACE, r.user, r.kind), r.key, {"value": r.value, "at": r.at}) for r in data.records]
        for start in range(0, len(ops), 5_000):  # one transaction per call of batch()
            self.store.batch(ops[start:start + 5_000])

    def close(self) -> None:
        self.conn.close()

    def put(self, user: str, kind: str, key: str, value: str) -> None:
        self.store.put((NAMESPACE, user, kind), key, {"value": value, "at": iso(utc_now())})

    def get(self, user: str, kind: str, key: str) -> str | None:
        item = self.store.get((NAMESPACE, user, kind), key)
        return item.value["value"] if item else None

    def delete(self, user: str, kind: str, key: str) -> None:
        self.store.delete((NAMESPACE, user, kind), key)

    def _items(self, user: str) -> list[tuple[str, str, str, str]]:
        """(at, kind, key, value) of every item of `user`, newest first."""
        items = self.store.search((NAMESPACE, user), limit=LIST_LIMIT)
        rows = [(i.value["at"], i.namespace[2], i.key, i.value["value"]) for i in items]
        rows.sort(reverse=True)
        return rows

    def search(self, user: str, query: str, limit: int = 5) -> list[tuple[str, str, str]]:
        folded = query.casefold()
        found = []
        for _, kind, key, value in self._items(user):
            if folded in key.casefold() or folded in value.casefold():
                found.append((kind, key, value))
                if len(found) == limit:
                    break
        return found

    def records(self, user: str) -> list[tuple[str, str, str]]:
        return sorted((kind, key, value) for _, kind, key, value in self._items(user))


def make_peers(workdir: Path, data: DataSet, synchronous: str) -> tuple[list[LangGraphStore], dict[str, float]]:
    """Both `SqliteStore` configurations loaded with `data`; return them and their load times."""
    peers, load = [], {}
    for wal in (False, True):
        started = time.perf_counter()
        name = "wal" if wal else "rollback"
        peer = LangGraphStore(workdir / f"langgraph-{name}.sqlite3", synchronous, wal=wal, data=data)
        load[f"{peer.name} (batch)"] = time.perf_counter() - started
        peers.append(peer)
    return peers, load


PAGE, FRAME_HEADER = 4096, 24
WAL_FRAMES = 1000
"""The probes cycle through a file of this many WAL frames: SQLite's automatic checkpoint comes at 1000 pages."""


class FsyncProbe:
    """Write one 4 KiB page and sync: the floor of a durable commit, timed as a store's write."""

    name = "fsync (4 KiB write)"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        self._sync = getattr(os, "fdatasync", os.fsync)
        self.call = "fdatasync" if self._sync is not os.fsync else "fsync"
        self._n = self.frames_written = 0
        os.pwrite(self.fd, b"\x5a" * WAL_FRAMES * (FRAME_HEADER + PAGE), 0)  # allocated once, as a reused WAL
        os.fsync(self.fd)

    def _write_frames(self, frames: int) -> None:
        """`frames` WAL frames (a 24-byte header, then the page: one write each), as SQLite writes them."""
        self.frames_written += frames
        if self._n + frames > WAL_FRAMES:
            self._n = 0  # the WAL starts over after a checkpoint
        for _frame in range(frames):
            offset = self._n * (FRAME_HEADER + PAGE)
            os.pwrite(self.fd, b"\xa5" * FRAME_HEADER, offset)
            os.pwrite(self.fd, b"\x5a" * PAGE, offset + FRAME_HEADER)
            self._n += 1

    def _commit(self, *_: Any) -> None:
        os.pwrite(self.fd, b"\x5a" * PAGE, (self._n % 64) * PAGE)
        self._n += 1
        self._sync(self.fd)

    def put(self, *args: Any) -> None:
        self._commit(*args)

    delete = put

    def close(self) -> None:
        os.close(self.fd)
        self.path.unlink(missing_ok=True)


class PagesProbe(FsyncProbe):
    """The sync of exactly the WAL pages a store's write adds, per write kind: what that write would
    cost at FULL if its page count were all it paid for.

    `pages` maps an operation to the pages one write of it adds (measured, so fractional: 7.3 is seven
    frames on most calls and eight on some, so that the mean is exact). The suite names the operation
    it is about to time (`start_operation`); each call then writes that many frames and syncs once.
    """

    def __init__(self, path: Path, name: str, pages: dict[str, float]) -> None:
        super().__init__(path)
        self.name, self.pages = name, pages
        self._per_call, self._calls, self._done = 0.0, 0, 0

    def start_operation(self, operation: str) -> None:
        """Write `pages[operation]` frames per call from now on (none for an operation it has no count for)."""
        self._per_call, self._calls, self._done = self.pages.get(operation, 0.0), 0, 0

    def _commit(self, *_: Any) -> None:
        # After n calls, round(n * pages) frames in all: whole frames a call, averaging `pages` exactly.
        self._calls += 1
        due = round(self._calls * self._per_call)
        self._write_frames(due - self._done)
        self._done = due
        self._sync(self.fd)
