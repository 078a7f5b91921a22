"""The files beside a store's database: `-wal` and `-shm` that are not its own, the WAL after a
refused write, and half-made databases left by killed creators.

Every test uses real files under tmp_path and real processes killed with SIGKILL.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from _store_helpers import folder_state, killed_writer
from memkit.errors import QuotaError, StoreError
from memkit.limits import Limits
from memkit.store import MemoryStore, seal_bundle


# -- a new store never inherits a -wal or -shm --------------------------------------------------


def test_a_deleted_database_does_not_come_back_from_its_leftover_wal(tmp_path):
    path = tmp_path / "memory.sqlite3"
    killed_writer(path, "alice", "pin", "4321")  # its commit lives in memory.sqlite3-wal
    path.unlink()  # the operator resets memory by deleting the database; -wal and -shm stay
    before = folder_state(tmp_path)
    with pytest.raises(StoreError, match=r"memory\.sqlite3-wal.*memory\.sqlite3-shm") as refused:
        MemoryStore(path)
    assert "remove" in str(refused.value) or "move" in str(refused.value)
    assert folder_state(tmp_path) == before  # nothing created, nothing removed
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink()
    with MemoryStore(path) as store:  # once they are gone: a new, empty store
        assert store.get("alice", "preference", "pin") is None and store.users() == {}


def test_a_leftover_shm_alone_is_refused_too(tmp_path):
    path = tmp_path / "memory.sqlite3"
    Path(f"{path}-shm").write_bytes(b"\0" * 32768)
    before = folder_state(tmp_path)
    with pytest.raises(StoreError, match=r"memory\.sqlite3-shm"):
        MemoryStore(path)
    assert folder_state(tmp_path) == before


# -- a -wal from another database is refused --------------------------------------------------------


@pytest.mark.parametrize("with_shm", [True, False], ids=["wal and shm copied", "wal copied alone"])
def test_a_wal_from_another_database_is_refused_and_no_file_changes(tmp_path, with_shm):
    a, b = tmp_path / "a.sqlite3", tmp_path / "b.sqlite3"
    killed_writer(a, "alice", "pin", "4321")
    with MemoryStore(b) as store:
        store.put("bob", "s1", "preference", "drink", "water")
    shutil.copy(f"{a}-wal", f"{b}-wal")
    if with_shm:
        shutil.copy(f"{a}-shm", f"{b}-shm")
    before = folder_state(tmp_path)
    with pytest.raises(StoreError, match=r"b\.sqlite3-wal.*another database"):
        MemoryStore(b)
    assert folder_state(tmp_path) == before
    Path(f"{b}-wal").unlink()
    Path(f"{b}-shm").unlink(missing_ok=True)
    with MemoryStore(b) as store:  # without it, b is b
        assert store.users() == {"bob": 1} and store.get("alice", "preference", "pin") is None


def test_a_database_with_its_own_wal_after_a_kill_still_opens_with_every_write(tmp_path):
    path = tmp_path / "memory.sqlite3"
    written = killed_writer(path, "alice", "pin", "4321")
    with MemoryStore(path) as store:
        assert store.get("alice", "preference", "pin") == written


# -- a refused write leaves no WAL past the cap -----------------------------------------------------


def _bundle(user: str, count: int) -> str:
    at = "2026-01-01T00:00:00.000000Z"
    lines = [{"format": "memkit-export", "format_version": 1, "schema_version": 2, "user": user,
              "records": count, "events": 0}]
    lines += [{"type": "record", "kind": "episode", "key": f"e{n}", "value": f"{n} " + "x" * 500,
               "source_session": "load", "revision": 1, "created_at": at, "updated_at": at} for n in range(count)]
    return seal_bundle(lines)


def test_a_write_refused_by_the_size_cap_leaves_no_wal_past_the_cap(tmp_path):
    cap = 1_500_000
    limits = Limits().replace(max_db_bytes=cap, max_records_per_user=100_000, max_records_total=100_000)
    path = tmp_path / "memory.sqlite3"
    with MemoryStore(path, limits=limits) as store:
        store.import_records(_bundle("alice", 130))  # about half the cap (a row past 1 KB has an overflow page)
        with pytest.raises(QuotaError, match=f"the cap is {cap} bytes"):
            store.import_records(_bundle("bob", 10_000))  # about 5 MB: refused whole
        on_disk = path.stat().st_size + Path(f"{path}-wal").stat().st_size
        assert on_disk <= cap, on_disk
        assert store.users() == {"alice": 130}
        store.put("carol", "s1", "preference", "drink", "tea")  # and writing goes on
    assert path.stat().st_size <= cap


# -- half-made databases of killed creators are cleaned up ------------------------------------------


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def test_half_made_databases_of_dead_creators_are_removed_and_live_ones_kept(tmp_path):
    path = tmp_path / "memory.sqlite3"
    dead = [tmp_path / f".memory.sqlite3.{_dead_pid()}.140000000000{n}.creating" for n in range(2)]
    live_process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = tmp_path / f".memory.sqlite3.{live_process.pid}.140000000000.creating"
        other = tmp_path / f".other.sqlite3.{_dead_pid()}.1.creating"  # another database's
        for leftover in (*dead, Path(f"{dead[0]}-wal"), Path(f"{dead[0]}-journal"), live, other):
            leftover.write_bytes(b"half-made")
        with MemoryStore(path) as store:
            store.put("alice", "s1", "preference", "drink", "tea")
        left = sorted(name for name in folder_state(tmp_path) if name.endswith((".creating", "-wal", "-journal")))
        assert left == sorted([live.name, other.name])
        with MemoryStore(path):  # an existing database's next open cleans up too
            pass
        dead[0].write_bytes(b"half-made")
        with MemoryStore(path):
            pass
        assert not dead[0].exists() and live.exists()
    finally:
        live_process.kill()
        live_process.communicate()


def test_opening_while_another_process_closes_the_last_connection_and_removes_the_wal(tmp_path, monkeypatch):
    """The -wal was there when the opening store looked, and gone when it read it (a real race of
    several processes opening one file: the last one to close checkpoints the WAL and deletes it)."""
    import sqlite3

    from memkit.store import files

    path = tmp_path / "m.sqlite3"
    with MemoryStore(path) as store:
        store.put("alice", "s1", "preference", "drink", "tea")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("UPDATE store_meta SET sequence = sequence + 1")  # a commit: the -wal is not empty
    wal = Path(f"{path}-wal")
    assert wal.stat().st_size > 0
    real = files.WalLog

    def closed_meanwhile(where: Path) -> object:
        other.close()  # the last connection: SQLite checkpoints and removes the -wal
        assert not wal.exists()
        return real(where)

    monkeypatch.setattr(files, "WalLog", closed_meanwhile)
    with MemoryStore(path) as store:
        assert store.get("alice", "preference", "drink")["value"] == "tea"
