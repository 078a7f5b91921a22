"""The disk's fsync latency: the physical floor of a durable commit, measured beside the stores.

A commit at `synchronous=FULL` in WAL mode writes its pages to the WAL file and waits for one sync
of that file; nothing durable can be faster than that wait. `FsyncProbe` does just that, on a file in
the same folder as the databases (so on the same disk): write one 4 KiB page, then sync it. It has
the write methods of a store contender (`put`, `delete`), so the suite times it in the same rounds,
alternating with the stores, under the same noise.

SQLite on Linux syncs with `fdatasync` (it skips the inode's timestamps); `os.fsync` also flushes
them. The probe uses `fdatasync` where the platform has it, as SQLite does, and says which.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

PAGE = 4096
PAGES = 64
"""The probe cycles over this many pages, as a WAL file grows and is reset after a checkpoint."""


class FsyncProbe:
    """Write one page and sync it: what a durable commit waits for, without a database."""

    name = "fsync (4 KiB write)"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        self._sync = getattr(os, "fdatasync", os.fsync)
        self.call = "fdatasync" if self._sync is not os.fsync else "fsync"
        self._block = b"\x5a" * PAGE
        self._n = 0
        os.pwrite(self.fd, self._block * PAGES, 0)
        os.fsync(self.fd)

    def _commit(self, *_: Any) -> None:
        os.pwrite(self.fd, self._block, (self._n % PAGES) * PAGE)
        self._n += 1
        self._sync(self.fd)

    put = delete = _commit

    def close(self) -> None:
        os.close(self.fd)
        self.path.unlink(missing_ok=True)
