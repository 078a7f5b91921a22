"""The reliability lab: a read-only open makes no file and changes no byte, whatever lies beside it.

Where a killed writer left a `-wal` but no `-shm` (its folder copied, or restored file by file), the
inspector's read-only open created a `-shm` and left it. Every sidecar state (`-wal` alone, `-shm`
alone, both, neither) is made from a real writer killed with SIGKILL, then read by the store
opened read-only and by the inspector, in a folder the reader can write and in one it cannot (as
the user `nobody` where the tests run as root). Counted: files made or removed, files whose bytes
changed, and whether the commits that live only in the `-wal` were seen. Under `make reliability`
each state is made and read several times, each time with a new writer. See conftest.py for the
`figures` fixture.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from _reliability import scale
from _store_helpers import folder_state
from _readonly_helpers import STATES, make_state, read_as_reader


def test_read_only_opens_leave_every_sidecar_state_as_they_found_it(figures):
    rounds = scale(1, 5)
    reads = failed = made = removed = changed = missed = 0
    for _ in range(rounds):
        for state in STATES:
            for writable in (True, False):
                folder = Path(tempfile.mkdtemp(prefix="memkit-sidecars-"))
                try:
                    folder.chmod(0o755)
                    path = folder / "memory.sqlite3"
                    make_state(path, state)
                    before = folder_state(folder)
                    read = read_as_reader(path, writable)
                    after = folder_state(folder)
                    reads += 1
                    made += len(after.keys() - before.keys())
                    removed += len(before.keys() - after.keys())
                    changed += sum(before[name] != after[name] for name in before.keys() & after.keys())
                    failed += "error" in read
                    missed += read.get("found") != {"pin": "4321", "drink": "tea", "inspector": "4321"}
                finally:
                    for entry in [folder, *folder.rglob("*")]:
                        entry.chmod(0o700 if entry.is_dir() else 0o600)
                    shutil.rmtree(folder)
    figures("Read-only opens: sidecar states",
            **{"states": len(STATES), "folders": "writable and not" + (" (read as nobody)" if os.getuid() == 0 else ""),
               "reads (store and inspector)": reads, "reads refused": failed, "files created": made,
               "files removed": removed,
               "files whose bytes changed": changed, "reads that missed a -wal commit": missed})
    assert failed == made == removed == changed == missed == 0
