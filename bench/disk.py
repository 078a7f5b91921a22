"""The disk's fsync latency: the physical floor of a durable commit, measured beside the stores.

A commit at `synchronous=FULL` in WAL mode writes its pages to the WAL file and waits for one sync
of that file; nothing durable can be faster than that wait. `FsyncProbe` does just that, on a file in
the same folder as the databases (so on the same disk): write one 4 KiB page, then sync it. It has
the write methods of a store contender (`put`, `delete`), so the suite times it in the same rounds,
alternating with the stores, under the same noise.

SQLite on Linux syncs with `fdatasync` (it skips the inode's timestamps); `os.fsync` also flushes
them. The probe uses `fdatasync` where the platform has it, as SQLite does, and says which.

`FsyncProbe(path, frames=k)` writes what a commit of k pages writes instead: k WAL frames (a 24-byte
frame header, then the 4 KiB page, one write each, as SQLite does), one after the other through a
file of 1000 frames (the automatic checkpoint's size, after which SQLite starts the WAL over), then
one sync. On a disk where a sync costs more the more it flushes, this is the floor of a commit that
writes k pages: how much of a store's write time its page count alone explains.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

PAGE = 4096
PAGES = 64
"""The probe cycles over this many pages, as a WAL file grows and is reset after a checkpoint."""


FRAME_HEADER = 24
WAL_FRAMES = 1000
"""Frames the `frames` probe cycles through: SQLite's automatic checkpoint comes at 1000 pages."""


class FsyncProbe:
    """Write one page (or `frames` WAL frames) and sync: what a durable commit waits for, without a database."""

    name = "fsync (4 KiB write)"

    def __init__(self, path: Path, frames: int | None = None) -> None:
        self.path = path
        self.frames = frames
        if frames is not None:
            self.name = f"sync of {frames} WAL frames"
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        self._sync = getattr(os, "fdatasync", os.fsync)
        self.call = "fdatasync" if self._sync is not os.fsync else "fsync"
        self._block = b"\x5a" * PAGE
        self._header = b"\xa5" * FRAME_HEADER
        self._n = 0
        size = PAGES * PAGE if frames is None else WAL_FRAMES * (FRAME_HEADER + PAGE)
        os.pwrite(self.fd, b"\x5a" * size, 0)  # allocated once, as a WAL that is reused
        os.fsync(self.fd)

    def _commit(self, *_: Any) -> None:
        if self.frames is None:
            os.pwrite(self.fd, self._block, (self._n % PAGES) * PAGE)
            self._n += 1
        else:
            if self._n + self.frames > WAL_FRAMES:
                self._n = 0  # the WAL starts over after a checkpoint
            for _frame in range(self.frames):
                offset = self._n * (FRAME_HEADER + PAGE)
                os.pwrite(self.fd, self._header, offset)
                os.pwrite(self.fd, self._block, offset + FRAME_HEADER)
                self._n += 1
        self._sync(self.fd)

    put = delete = _commit

    def close(self) -> None:
        os.close(self.fd)
        self.path.unlink(missing_ok=True)
