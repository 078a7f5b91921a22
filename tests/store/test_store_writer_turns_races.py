"""The writers' turn as a slice (memkit/store/turns.py) against the races a review found: threads of
one process, a process busy in one C call, a wait that timed out, an interrupted wait. Each was a way
the slice kept a write waiting out its busy timeout, or let two hold the turn, that a turn per write
did not. A write that waits out its busy timeout for the turn still tries SQLite's lock once, so the
tests give the other writer a long busy timeout and check it never needed it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time

import pytest

from memkit.errors import LockedError
from memkit.limits import Limits
from memkit.store import MemoryStore

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="flock is POSIX; Windows uses SQLite's lock alone")

if sys.platform != "win32":
    import fcntl


def _limits(busy_timeout_ms: int = 5000) -> Limits:
    return Limits(busy_timeout_ms=busy_timeout_ms, max_records_per_user=100_000, max_records_total=1_000_000,
                  max_db_bytes=1 << 28)


OTHER_WRITER = """
import sys, time
from memkit.errors import LockedError
from memkit.limits import Limits
from memkit.store import MemoryStore
limits = Limits(busy_timeout_ms=5000, max_records_per_user=100_000, max_records_total=1_000_000,
                max_db_bytes=1 << 28)
with MemoryStore(sys.argv[1], limits=limits) as store:
    written = refused = 0
    worst = 0.0
    stop = time.monotonic() + float(sys.argv[2])
    while time.monotonic() < stop:
        started = time.monotonic()
        try:
            store.put("other", "s1", "episode", f"k{written}", "v")
            written += 1
        except LockedError:
            refused += 1
        worst = max(worst, time.monotonic() - started)
print(written, refused, worst, flush=True)
"""

WAITED_OUT = 2.5
"""Seconds a write of the other writer (busy timeout 5 s) must stay under: it got the turn, rather
than waiting out its busy timeout and then finding SQLite's lock free (a turn per write: 0.02 s)."""


def test_two_threads_whose_writes_overlap_do_not_keep_the_turn_from_another_process(tmp_path):
    # Two threads of one process write two stores of one folder back to back. A write that starts while
    # another is under way joins the turn whatever the slice (turns._enter), so with two threads the
    # count of writes under way seldom falls to 0 and the process keeps the turn for as long as they
    # write: the other process waited out its busy timeout on every write (0 written, 3 refused in
    # 3 s; 739 written, 0 refused with a turn per write, baed96a).
    a_path, b_path = tmp_path / "a.sqlite3", tmp_path / "b.sqlite3"
    stop = threading.Event()
    with MemoryStore(a_path, limits=_limits()) as a, MemoryStore(b_path, limits=_limits()) as b:
        def write(store: MemoryStore, name: str) -> None:
            n = 0
            while not stop.is_set():
                store.put(name, "s1", "episode", f"k{n}", "v")
                n += 1

        threads = [threading.Thread(target=write, args=(s, name)) for s, name in ((a, "ta"), (b, "tb"))]
        for t in threads:
            t.start()
        try:
            time.sleep(0.2)
            out = subprocess.run([sys.executable, "-c", OTHER_WRITER, str(a_path), "2.5"],
                                 capture_output=True, text=True, timeout=120).stdout.split()
        finally:
            stop.set()
            for t in threads:
                t.join()
    written, refused, worst = int(out[0]), int(out[1]), float(out[2])
    assert refused == 0 and written > 0, f"the other process wrote {written} and was refused {refused} times"
    assert worst < WAITED_OUT, f"a write of the other process waited {worst:.1f} s: the turn was kept from it"


BUSY_AFTER_ONE_WRITE = """
import sys, time
from memkit.store import MemoryStore
t = time.monotonic()
sum(range(10**6))
per = (time.monotonic() - t) / 10**6
with MemoryStore(sys.argv[1]) as store:
    print("ready", flush=True)
    sys.stdin.readline()
    store.put("busy", "s1", "episode", "once", "one write, then a long C call")
    print("wrote", flush=True)
    sum(range(int(2.0 / per)))  # one C call holds the GIL throughout (as a big sort or parse does)
    print("done", flush=True)
    sys.stdin.readline()
"""


def test_a_process_busy_in_one_long_c_call_after_writing_does_not_keep_the_turn(tmp_path):
    # The slice is ended by a thread of the writing process (turns._watch), which needs the GIL: a
    # process that writes once and then runs one long C call (sorted() of a big list, sum() below)
    # keeps the turn, idle, for the whole call, and another process's write is refused although
    # SQLite's lock is free (refused after 1.0 s while the other sorted for 2.7 s; written after
    # 0.003 s with a turn per write, baed96a).
    path = tmp_path / "memory.sqlite3"
    MemoryStore(path).close()
    busy = subprocess.Popen([sys.executable, "-c", BUSY_AFTER_ONE_WRITE, str(path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert busy.stdout is not None and busy.stdin is not None
        assert busy.stdout.readline().strip() == "ready"
        with MemoryStore(path, limits=_limits(busy_timeout_ms=500)) as store:
            busy.stdin.write("go\n")
            busy.stdin.flush()
            assert busy.stdout.readline().strip() == "wrote"
            time.sleep(0.05)  # past the busy process's slice: it is in its C call now
            try:
                store.put("alice", "s1", "preference", "drink", "tea")
            except LockedError as exc:
                pytest.fail(f"refused while the other process held the turn idle: {exc}")
            assert store.get("alice", "preference", "drink")["value"] == "tea"
    finally:
        busy.kill()
        busy.wait()


def test_a_timed_out_wait_does_not_release_the_turn_a_later_write_holds(tmp_path):
    # flock belongs to the open file, and the waiting thread's descriptor is a duplicate of the one
    # the caller tries first (LOCK_NB). After a write gave up waiting (its request cancelled), the
    # waiting thread still waits in flock; when the lock comes free, a later write's LOCK_NB and the
    # waiting thread's flock both succeed on that one open file, and the waiting thread, finding its
    # request cancelled, lets go of the lock the later write now holds. Here the waiting thread is
    # held (by `_state`) between its flock and that check for 0.3 s, as a busy scheduler may hold it.
    path = tmp_path / "memory.sqlite3"
    with MemoryStore(path, limits=_limits(busy_timeout_ms=200)) as quick, \
            MemoryStore(path, limits=_limits(busy_timeout_ms=5000)) as store:
        turns = store._db._turns  # type: ignore[attr-defined]
        assert quick._db._turns is turns  # type: ignore[attr-defined]
        other = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)  # another open file: as another process
        try:
            fcntl.flock(other, fcntl.LOCK_EX)
            with contextlib.suppress(LockedError):  # refused, or written by SQLite's lock alone
                quick.put("alice", "s1", "preference", "drink", "tea")  # gives up the turn after 0.2 s
            turns._state.acquire()
            release, started = threading.Timer(0.3, turns._state.release), False
            try:
                fcntl.flock(other, fcntl.LOCK_UN)  # the waiting thread takes it, for the cancelled request
                time.sleep(0.2)
                release.start()
                started = True
                with store.transaction():
                    store.put("alice", "s1", "preference", "drink", "coffee")
                    time.sleep(0.6)  # the waiting thread has run on
                    probe = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
                    try:
                        fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        taken = True
                    except BlockingIOError:
                        taken = False
                    finally:
                        os.close(probe)
            finally:
                if started:
                    release.join()
                else:
                    turns._state.release()
        finally:
            os.close(other)
        assert not taken, "another open file took the turn while this process's write held it"
        assert store.get("alice", "preference", "drink")["value"] == "coffee"


INTERRUPTED_WHILE_WAITING = """
import os, signal, sys, threading
from memkit.store import MemoryStore
store = MemoryStore(sys.argv[1])
print("open", flush=True)
sys.stdin.readline()  # the test holds the turn now
threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
try:
    store.put("interrupted", "s1", "episode", "k", "v")
    print("written", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
sys.stdin.readline()  # idle, its store open, until the test is done
store.close()
"""


def test_a_write_interrupted_while_waiting_for_the_turn_does_not_keep_it_once_granted(tmp_path):
    # Ctrl-C ("Interrupt the kernel" in a notebook) during a write that waits for the turn raises
    # KeyboardInterrupt in Event.wait, before `_take` cancels its request (turns._take). The waiting
    # thread later takes the lock for that request and grants it to nobody: the process, idle, holds
    # the turn until it writes again or closes its store, and every other writer waits out its busy
    # timeout (a script's other process was refused after 5.0 s, its busy timeout; the same at baed96a).
    path = tmp_path / "memory.sqlite3"
    with MemoryStore(path, limits=_limits(busy_timeout_ms=5000)) as store:
        other = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)  # another open file: as another process
        interrupted = subprocess.Popen([sys.executable, "-c", INTERRUPTED_WHILE_WAITING, str(path)],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert interrupted.stdout is not None and interrupted.stdin is not None
            assert interrupted.stdout.readline().strip() == "open"
            fcntl.flock(other, fcntl.LOCK_EX)
            interrupted.stdin.write("go\n")
            interrupted.stdin.flush()
            assert interrupted.stdout.readline().strip() == "interrupted"
            fcntl.flock(other, fcntl.LOCK_UN)  # the interrupted process's waiting thread takes it now
            time.sleep(0.2)
            started = time.monotonic()
            try:
                store.put("alice", "s1", "preference", "drink", "tea")
            except LockedError as exc:
                pytest.fail(f"refused while an idle process kept the turn its interrupted write asked for: {exc}")
            assert time.monotonic() - started < WAITED_OUT, "the idle process kept the turn its write asked for"
            assert store.get("alice", "preference", "drink")["value"] == "tea"
        finally:
            os.close(other)
            interrupted.kill()
            interrupted.wait()
