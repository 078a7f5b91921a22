"""A read-only open makes no file and changes no byte, whatever sidecars lie beside the database.

A killed writer leaves its last commits in `-wal` beside a `-shm`; a folder copied or restored file
by file may bring the `-wal` alone, or a `-shm` alone. SQLite reading a WAL database makes a `-shm`
(and a reader writes marks into one), so a read-only open chooses its way by what it finds
(readonly.py). Each state is made with a real writer killed by SIGKILL, and read both in a folder
this process can write and in one it cannot (as the user `nobody` where the tests run as root,
which may write anywhere).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from _store_helpers import folder_state, killed_writer
from memkit.store import MemoryStore

STATES = ("wal alone", "shm alone", "wal and shm", "neither")

READER = """
import json, os, sys
from memkit.store import MemoryStore
from memkit.inspector.core import InspectorCore
path, uid = sys.argv[1], int(sys.argv[2])
if uid != os.getuid():  # drop root after the imports: the interpreter's own files may be root's alone
    os.setgid(uid)
    os.setuid(uid)
with MemoryStore(path, read_only=True) as store:
    found = {key: (store.get(user, "preference", key) or {}).get("value")
             for user, key in (("alice", "pin"), ("alice", "drink"))}
    how = store.opened["how"]
    store.get("alice", "preference", "pin")  # a second read: a reopen may not make a file either
inspector = InspectorCore(path)
found["inspector"] = inspector.store.get("alice", "preference", "pin")["value"]
inspector.close()
print(json.dumps({"found": found, "how": how, "uid": os.getuid()}))
"""


def make_state(path: Path, state: str) -> None:
    """`path` with alice's drink in the database itself and her pin committed by a writer killed
    with SIGKILL, then the sidecars of `state` (the pin is in the `-wal` where there is one)."""
    with MemoryStore(path) as store:
        store.put("alice", "s1", "preference", "drink", "tea")
    killed_writer(path, "alice", "pin", "4321")
    wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
    if state == "wal alone":
        shm.unlink()
    elif state in ("shm alone", "neither"):
        kept = shm.read_bytes()
        MemoryStore(path).close()  # a writer's clean close: its commits into the file, both sidecars gone
        assert not wal.exists() and not shm.exists()
        if state == "shm alone":
            shm.write_bytes(kept)  # left by a copy, or a restore file by file


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


def read_as_reader(path: Path, writable: bool) -> dict:
    """Read alice's memory in another process; with `writable` False, the folder and files are
    made read-only first and, where this runs as root, the reader is `nobody`."""
    uid = os.getuid()
    if not writable:
        for file in path.parent.iterdir():
            file.chmod(0o444)
        path.parent.chmod(0o555)
        uid = 65534 if uid == 0 else uid
    done = subprocess.run([sys.executable, "-c", READER, str(path), str(uid)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("writable", [True, False], ids=["writable folder", "unwritable folder"])
@pytest.mark.parametrize("state", STATES)
def test_a_read_only_open_makes_no_file_changes_no_byte_and_sees_the_wal_s_commits(shared_folder, state, writable):
    folder = shared_folder / "store"
    folder.mkdir(mode=0o755)
    path = folder / "memory.sqlite3"
    make_state(path, state)
    before = folder_state(folder)
    read = read_as_reader(path, writable)
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
