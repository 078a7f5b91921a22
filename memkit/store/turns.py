"""Writers take turns: a queue in the kernel in front of SQLite's write lock. An optimisation, kept
apart (a reader of db.py can skip it): correctness never depends on it, SQLite's lock still does.

Without it, a writer that finds the file locked sleeps in SQLite's busy handler (1, 2, 5, 10 ... 100
ms) and a writer that has just committed takes the lock again at once: four processes on one file
made 1, 301, 799 and 7,712 writes in the same two seconds, and a few writes waited out the whole
busy timeout while the others progressed. Here a writer first takes an exclusive `flock` on the
database's folder: the waiters sleep in the kernel and are woken when it is released, right after
the commit. Why the folder and not the database file: closing any descriptor of the database file
drops every POSIX lock this process holds on it, SQLite's included (fcntl(2)), while SQLite never
locks the folder, so the descriptor here can be opened and closed at will. Writers of other
databases in the same folder take turns with these too: they only wait, never fail for it.

The wait is bounded by the store's busy timeout (a writer stalled inside its transaction, or a
lock that cannot be had, ends in LockedError as before); a descriptor's lock goes with its process,
however it ends; where `flock` is missing (Windows) or refused (some network file systems), writers
go straight to SQLite's lock. bench/RESULTS.md ("Four writer processes on one file") has the figures.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no flock; SQLite's own lock alone
    fcntl = None  # type: ignore[assignment]

_held = threading.local()  # the folders this thread holds a turn on (another store's, in a nested write)


class _Request:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.granted = self.cancelled = False


class WriterTurns:
    """The turn of one store's writers: `turn(timeout)` holds it for a write transaction."""

    def __init__(self, path: Path) -> None:
        self._fd: int | None = None
        if fcntl is not None:
            try:
                self._fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                self._key = os.fstat(self._fd)[:2]  # (device, inode): the folder, however it was named
            except OSError:
                self._fd = None
        self._state = threading.Lock()  # guards a request between the caller and the waiting thread
        self._requests: queue.SimpleQueue[_Request | None] | None = None

    @contextlib.contextmanager
    def turn(self, timeout: float) -> Iterator[bool]:
        """Hold the folder's turn inside the block; yields False when waiting `timeout` seconds did
        not get it (the caller refuses the write), True otherwise (also without flock: no turn to take)."""
        held: dict[tuple[int, int], int] = _held.__dict__.setdefault("folders", {})
        if self._fd is None or held.get(self._key):
            yield True  # no flock here, or this thread holds the folder's turn already (a nested write)
            return
        if not self._take(timeout):
            yield False
            return
        held[self._key] = 1
        try:
            yield True
        finally:
            del held[self._key]
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _take(self, timeout: float) -> bool:
        assert self._fd is not None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        except OSError:  # flock refused here (a network file system): SQLite's lock alone decides
            self.close()
            return True
        if timeout <= 0:
            return False
        # Another writer holds it: wait in the kernel, from a thread of our own, so the wait can end.
        request = _Request()
        if self._requests is None:
            self._requests = queue.SimpleQueue()
            threading.Thread(target=self._wait, args=(os.dup(self._fd), self._requests), daemon=True,
                             name=f"memkit-writer-turn-{self._key}").start()
        self._requests.put(request)
        request.done.wait(timeout)
        with self._state:
            if not request.granted:
                request.cancelled = True  # the waiting thread lets go of it when it comes
            return request.granted

    def _wait(self, fd: int, requests: queue.SimpleQueue[_Request | None]) -> None:
        """The waiting thread: one blocking flock per request, on a duplicate of the descriptor (the
        same open file, so the same lock), closed here when the store closes."""
        try:
            while (request := requests.get()) is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                except OSError:
                    request.granted = True  # cannot wait here: SQLite's lock alone decides
                    request.done.set()
                    continue
                with self._state:
                    if request.cancelled:
                        fcntl.flock(fd, fcntl.LOCK_UN)
                    else:
                        request.granted = True
                request.done.set()
        finally:
            os.close(fd)

    def close(self) -> None:
        """Let go of the folder's descriptor (and stop the waiting thread). Safe to call twice."""
        if self._requests is not None:
            self._requests.put(None)
            self._requests = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
