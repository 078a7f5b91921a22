"""Writers take turns: a queue in the kernel in front of SQLite's write lock, so that writer
processes of one file all progress. An optimisation, kept apart (a reader of db.py can skip it):
correctness never depends on it, SQLite's lock still does.

A process takes an exclusive `flock` on the database's folder before `BEGIN IMMEDIATE` and keeps it
for a slice of writes (`SLICE`); the waiters sleep in the kernel until it is released. Why the
folder, why a slice, and what each race this must survive looks like: docs/design/store.md
("Writers take turns"); the figures: bench/RESULTS.md ("Four writer processes on one file").
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

try:
    import fcntl
except ImportError:  # Windows: no flock; SQLite's own lock alone
    fcntl = None  # type: ignore[assignment]

SLICE = 0.010
"""Seconds a process keeps the turn for the writes it starts, from when it took it (about 25 writes at
FULL on the bench's disk). Longer slices bought little more; another process waits at most this long."""

GRACE = 0.0002
"""Seconds a process waits after letting go before asking again, while other processes write: time
for a woken waiter to take the turn (flock hands it to whoever asks first, and the process that let
go is awake)."""

CONTENDED = 1.0
"""Seconds after this process last found the turn taken during which it counts other writers as
active and waits its GRACE: a lone writer never does. (Asking the kernel who waits, through
/proc/locks, cost up to 15 ms a read here.)"""


class _Request:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.granted = self.cancelled = False


class WriterTurns:
    """This process's turn on one folder, shared by every store it opens there (`for_folder`):
    `turn(timeout)` holds it for a write transaction."""

    _open: ClassVar[dict[tuple[int, int], WriterTurns]] = {}  # this process's turns, by folder (device, inode)
    _registry: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def for_folder(cls, path: Path) -> WriterTurns:
        """The turn on `path`'s folder, shared with this process's other stores there; `close()` it
        when the store closes (the last one closes the folder's descriptor)."""
        try:
            if fcntl is None:
                raise OSError("no flock here")
            fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:  # no flock (Windows), or a folder that cannot be opened: SQLite's lock alone
            return cls(None, (0, 0))
        key = os.fstat(fd)[:2]  # (device, inode): the folder, however it was named
        with cls._registry:
            turns = cls._open.get(key)
            if turns is None:
                turns = cls._open[key] = cls(fd, key)
            else:
                os.close(fd)
            turns._stores += 1
        return turns

    def __init__(self, fd: int | None, key: tuple[int, int]) -> None:
        self._fd, self._key, self._stores = fd, key, 0
        self._state = threading.Lock()  # guards a request between the caller and the waiting thread
        self._requests: queue.SimpleQueue[_Request | None] | None = None
        self._pending = 0  # requests given to the waiting thread and not yet answered (under `_state`)
        self._waiting_fd: int | None = None  # the waiting thread's duplicate of `_fd`
        self._taking = threading.Lock()  # one thread of this process asks for the turn at a time
        guard = threading.RLock()
        self._slice = threading.Condition(guard)  # guards what follows, against the watching thread
        # On the same lock, threads of this process waiting for the writes under way to end: apart
        # from `_slice`, so that the end of every write does not wake the watching thread (that cost
        # an append of the store's window a third more CPU).
        self._drained = threading.Condition(guard)
        self._holding = False
        self._writers = 0  # writes of this process under way in the turn (threads, nested stores)
        self._taken_at = self._let_go_at = 0.0
        self._contended_at = -CONTENDED  # when a take last found another process holding the turn
        self._watcher: threading.Thread | None = None
        self._mine = threading.local()  # this thread's writes under way (nested stores)

    @contextlib.contextmanager
    def turn(self, timeout: float) -> Iterator[bool]:
        """Hold the folder's turn inside the block; yields False when waiting `timeout` seconds did
        not get it, True otherwise (also without flock: no turn to take). The turn is advisory: a
        caller that did not get it tries SQLite's lock once, without waiting, since a holder may be
        idle (a process in one long C call cannot run the thread that ends its slice)."""
        if self._fd is None or getattr(self._mine, "n", 0) > 0:
            yield True  # no turn to take, or one write of this thread holds it (this one is nested)
            return
        if not self._enter(timeout):
            yield False
            return
        self._mine.n = getattr(self._mine, "n", 0) + 1
        try:
            yield True
        finally:
            self._mine.n -= 1
            with self._slice:
                self._writers -= 1
                if not self._writers:
                    self._drained.notify_all()
                if not self._writers and time.monotonic() - self._taken_at >= SLICE:
                    self._let_go()

    def _enter(self, timeout: float) -> bool:
        """Count a write in: within the slice this process holds, or after taking the turn."""
        deadline = time.monotonic() + timeout
        with self._slice:
            # Another thread's write joins only within the slice, else waits for the writes under way
            # (a write nested in this thread's own never comes here: `turn`).
            if self._holding and time.monotonic() - self._taken_at < SLICE:
                self._writers += 1
                return True
            while self._holding and self._writers:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._drained.wait(left)
            if self._holding:
                self._let_go()
        if not self._taking.acquire(timeout=max(deadline - time.monotonic(), 0)):
            return False
        try:
            with self._slice:
                if self._holding:  # another thread of this process took it meanwhile
                    self._writers += 1
                    return True
                rest = self._let_go_at + GRACE - time.monotonic()
            if rest > 0 and time.monotonic() - self._contended_at < CONTENDED:
                time.sleep(rest)
            if not self._take(deadline - time.monotonic()):
                return False
            with self._slice:
                self._holding, self._writers, self._taken_at = True, self._writers + 1, time.monotonic()
                if self._watcher is None:
                    self._watcher = threading.Thread(target=self._watch, daemon=True,
                                                     name=f"memkit-writer-slice-{self._key}")
                    self._watcher.start()
                self._slice.notify()
            return True
        finally:
            self._taking.release()

    def _let_go(self) -> None:
        """(holding `_slice`) Release the turn."""
        self._holding, self._let_go_at = False, time.monotonic()
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _watch(self) -> None:
        """The watching thread: lets go of the turn when the slice is over and no write is under way
        (a write that ends after the slice lets go itself)."""
        with self._slice:
            while self._fd is not None:
                left = self._taken_at + SLICE - time.monotonic()
                if not self._holding or self._writers or left > 0:
                    self._slice.wait(left if self._holding and left > 0 else None)
                    continue
                self._let_go()

    def _take(self, timeout: float) -> bool:
        assert self._fd is not None
        with self._state:
            pending = self._pending
        if not pending:  # the waiting thread is idle: a LOCK_NB here cannot meet its flock on the same file
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                self._contended_at = time.monotonic()
            except OSError:  # flock refused here (a network file system): SQLite's lock alone decides
                self._stop()
                return True
        if timeout <= 0:
            return False
        # Another process holds it: wait in the kernel, from a thread of our own, so the wait can end.
        request = _Request()
        with self._state:
            if self._requests is None:
                self._requests = queue.SimpleQueue()
                self._waiting_fd = os.dup(self._fd)
                threading.Thread(target=self._wait, args=(self._waiting_fd, self._requests), daemon=True,
                                 name=f"memkit-writer-turn-{self._key}").start()
            self._pending += 1
            self._requests.put(request)
        try:
            request.done.wait(timeout)
        except BaseException:  # interrupted (KeyboardInterrupt): nobody will write in this turn
            with self._state:
                if request.granted:
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
                request.cancelled = True  # the waiting thread lets go of it when it comes
            raise
        with self._state:
            if not request.granted:
                request.cancelled = True  # the waiting thread lets go of it when it comes
            return request.granted

    def _wait(self, fd: int, requests: queue.SimpleQueue[_Request | None]) -> None:
        """The waiting thread: one blocking flock per request, on a duplicate of the descriptor (the
        same open file, so the same lock), closed here when the last store closes."""
        try:
            while (request := requests.get()) is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                except OSError:
                    with self._state:
                        self._pending -= 1
                    request.granted = True  # cannot wait here: SQLite's lock alone decides
                    request.done.set()
                    continue
                with self._state:
                    self._pending -= 1
                    if not request.cancelled:
                        request.granted = True
                    elif not self._pending:  # else a later request is queued: this lock is its
                        fcntl.flock(fd, fcntl.LOCK_UN)
                request.done.set()
        finally:
            os.close(fd)
            self._waiting_fd = None

    def close(self) -> None:
        """One store is done with the folder's turn (call once per `for_folder`); the last closes its
        descriptor, releasing the lock, and stops both threads."""
        with WriterTurns._registry:
            self._stores -= 1
            if self._stores > 0:
                return
            if WriterTurns._open.get(self._key) is self:
                del WriterTurns._open[self._key]
        self._stop()

    def _stop(self) -> None:
        if self._requests is not None:
            self._requests.put(None)
            self._requests = None
        with self._slice:
            self._holding = False
            if self._fd is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)  # the waiting thread's duplicate keeps the file open
                os.close(self._fd)
                self._fd = None
            self._slice.notify()


def _forget_in_child() -> None:
    """A forked child starts with no turn: the parent's descriptors share its locks (one open file),
    and its threads are gone, perhaps holding the locks here (a store of the parent's, used in the
    child, then writes through SQLite's lock alone, and closes without waiting on them)."""
    for turns in WriterTurns._open.values():
        for fd in (turns._fd, turns._waiting_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        fresh = WriterTurns(None, turns._key)
        fresh._stores = turns._stores
        turns.__dict__.update(fresh.__dict__)
    WriterTurns._open.clear()
    WriterTurns._registry = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
