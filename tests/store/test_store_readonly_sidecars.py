"""A read-only open makes no file and changes no byte, whatever sidecars lie beside the database.

A killed writer leaves its last commits in `-wal` beside a `-shm`; a folder copied or restored file
by file may bring the `-wal` alone, or a `-shm` alone. SQLite reading a WAL database makes a `-shm`
(and a reader writes marks into one), so a read-only open chooses its way by what it finds
(readonly.py). Each state is made with a real writer killed by SIGKILL, and read both in a folder
this process can write and in one it cannot (as the user `nobody` where the tests run as root,
which may write anywhere).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from _readonly_helpers import STATES, make_state, read_as_reader
from _store_helpers import folder_state
from memkit.store import MemoryStore


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """A folder another user can reach (pytest's own temporary folders are 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="memkit-readonly-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        for entry in [folder, *folder.rglob("*")]:
            entry.chmod(0o700 if entry.is_dir() else 0o600)
        shutil.rmtree(folder)


@pytest.mark.parametrize("writable", [True, False], ids=["writable folder", "unwritable folder"])
@pytest.mark.parametrize("state", STATES)
def test_a_read_only_open_makes_no_file_changes_no_byte_and_sees_the_wal_s_commits(shared_folder, state, writable):
    folder = shared_folder / "store"
    folder.mkdir(mode=0o755)
    path = folder / "memory.sqlite3"
    make_state(path, state)
    before = folder_state(folder)
    read = read_as_reader(path, writable)
    assert "error" not in read, read
    assert folder_state(folder) == before  # no file made, removed or changed
    assert read["found"] == {"pin": "4321", "drink": "tea", "inspector": "4321"}
    if not writable and os.getuid() == 0:
        assert read["uid"] == 65534
    assert read["how"] == {"wal alone": "copy", "wal and shm": "ro"}.get(state, "immutable")


def test_a_private_copy_leaves_nothing_in_the_temporary_folder(tmp_path, monkeypatch):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    path = tmp_path / "memory.sqlite3"
    make_state(path, "wal alone")
    with MemoryStore(path, read_only=True) as store:
        assert store.opened["how"] == "copy"
        assert list(scratch.iterdir()) == []  # read into memory; the copy is gone already
        assert store.get("alice", "preference", "pin")["value"] == "4321"


def test_a_copy_reads_again_once_a_writer_changes_the_file(tmp_path):
    path = tmp_path / "memory.sqlite3"
    make_state(path, "wal alone")
    with MemoryStore(path, read_only=True) as reader:
        assert reader.opened["how"] == "copy"
        with MemoryStore(path) as writer:
            writer.put("alice", "s2", "preference", "pin", "9999")
            assert reader.get("alice", "preference", "pin")["value"] == "9999"
        assert reader.get("alice", "preference", "pin")["value"] == "9999"
