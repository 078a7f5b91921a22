"""What the read-only sidecar tests share (tests/store and the reliability lab): a store in each
sidecar state a killed writer can leave, and a reader in another process, as another user where
the tests run as root."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from _store_helpers import killed_writer
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
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    return json.loads(done.stdout)
