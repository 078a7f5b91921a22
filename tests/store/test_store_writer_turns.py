"""Writers of one file take turns (memkit/store/turns.py): real processes writing side by side all
progress, none is refused for waiting while the others write, and a writer killed or stalled while
it holds the turn neither blocks the others for good nor makes them wait past the busy timeout.

Before: SQLite's busy handler sleeps (1, 2, 5 ... 100 ms) and a writer that just committed takes the
lock again at once; four processes made 1, 301, 799 and 7,712 writes in the same two seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from memkit.errors import LockedError
from memkit.limits import Limits
from memkit.store import MemoryStore
from memkit.store import turns as turns_module

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="flock is POSIX; Windows uses SQLite's lock alone")

WRITER = """
import sys, time
from pathlib import Path
from memkit.errors import LockedError
from memkit.limits import Limits
from memkit.store import MemoryStore
path, name, go, seconds = sys.argv[1], sys.argv[2], Path(sys.argv[3]), float(sys.argv[4])
with MemoryStore(path, limits=Limits(max_records_per_user=100_000, max_records_total=1_000_000,
                                     max_db_bytes=1 << 28)) as store:
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.001)
    written = refused = 0
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        try:
            store.put(name, "s1", "episode", f"k{written}", f"value {written}")
            written += 1
        except LockedError:
            refused += 1
print(written, refused, flush=True)
"""

HOLDER = """
import sys, time
from memkit.store import MemoryStore
with MemoryStore(sys.argv[1]) as store, store.transaction():
    store.put("holder", "s1", "episode", "inside", "never committed")
    print("inside", flush=True)
    time.sleep(120)
"""


def _limits() -> Limits:
    return Limits(max_records_per_user=100_000, max_records_total=1_000_000, max_db_bytes=1 << 28)


def test_four_writer_processes_on_one_file_all_progress_and_none_is_refused(tmp_path):
    path, go = tmp_path / "memory.sqlite3", tmp_path / "go"
    MemoryStore(path, limits=_limits()).close()
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"writer{n}", str(go), "1.5"],
                                stdout=subprocess.PIPE, text=True) for n in range(4)]
    try:
        for w in writers:
            assert w.stdout is not None and w.stdout.readline().strip() == "ready"
        go.touch()
        done = [w.communicate(timeout=120)[0].split() for w in writers]
    finally:
        for w in writers:
            w.kill()
    written = [int(d[0]) for d in done]
    refused = [int(d[1]) for d in done]
    assert refused == [0, 0, 0, 0]
    assert min(written) >= sum(written) / 4 / 4, f"a writer starved: {written}"  # each at least a quarter of the mean
    with MemoryStore(path) as store:  # nothing lost: every acknowledged write is there, the counters exact
        assert store.users() == {f"writer{n}": written[n] for n in range(4)}
        health = store.health()
        assert health["counters_consistent"] and health["records_total"] == sum(written)


def _holding(path):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "inside"
    return holder


def test_a_writer_stalled_holding_the_turn_makes_others_fail_after_the_busy_timeout_not_later(tmp_path):
    path = tmp_path / "memory.sqlite3"
    MemoryStore(path).close()
    holder = _holding(path)
    try:
        with MemoryStore(path, limits=Limits(busy_timeout_ms=300)) as store:
            started = time.monotonic()
            with pytest.raises(LockedError, match="past the busy timeout"):
                store.put("alice", "s1", "preference", "drink", "tea")
            waited = time.monotonic() - started
            assert 0.25 <= waited < 2.0
            assert store.get("alice", "preference", "drink") is None
    finally:
        holder.kill()
        holder.wait()


def test_a_writer_killed_while_holding_the_turn_leaves_it_to_the_others(tmp_path):
    path = tmp_path / "memory.sqlite3"
    MemoryStore(path).close()
    holder = _holding(path)
    with MemoryStore(path, limits=Limits(busy_timeout_ms=2000)) as store:
        os.kill(holder.pid, signal.SIGKILL)  # the kernel lets go of its turn and its SQLite locks
        holder.wait()
        started = time.monotonic()
        store.put("alice", "s1", "preference", "drink", "tea")
        assert time.monotonic() - started < 1.5
        assert store.get("alice", "preference", "drink")["value"] == "tea"
        assert store.traces("holder")["records"] == 0  # its write never committed


def test_threads_and_nested_transactions_of_one_process_never_wait_on_themselves(tmp_path):
    # Two stores of one folder, the second written inside the first's transaction, in one thread:
    # the thread holds the folder's turn already, so the nested write does not wait for it.
    with MemoryStore(tmp_path / "a.sqlite3", limits=Limits(busy_timeout_ms=300)) as a, \
            MemoryStore(tmp_path / "b.sqlite3", limits=Limits(busy_timeout_ms=300)) as b:
        started = time.monotonic()
        with a.transaction():
            a.put("alice", "s1", "preference", "drink", "tea")
            b.put("alice", "s1", "preference", "drink", "coffee")
        assert time.monotonic() - started < 0.25
        assert (a.get("alice", "preference", "drink")["value"], b.get("alice", "preference", "drink")["value"]) \
            == ("tea", "coffee")


IDLE_AFTER_ONE_WRITE = """
import sys, time
from memkit.store import MemoryStore
with MemoryStore(sys.argv[1]) as store:
    store.put("idle", "s1", "episode", "once", "one write, then nothing")
    print("wrote", flush=True)
    time.sleep(120)
"""


def test_a_process_that_wrote_and_went_idle_lets_go_of_its_slice(tmp_path):
    # A turn is a slice of writes (turns.SLICE): a process that keeps its store open after writing
    # must still hand the turn on when the slice is over, or every other writer waits out the busy timeout.
    path = tmp_path / "memory.sqlite3"
    MemoryStore(path).close()
    idle = subprocess.Popen([sys.executable, "-c", IDLE_AFTER_ONE_WRITE, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert idle.stdout is not None and idle.stdout.readline().strip() == "wrote"
        with MemoryStore(path, limits=Limits(busy_timeout_ms=2000)) as store:
            for n in range(5):
                store.put("alice", "s1", "preference", f"k{n}", "tea")  # LockedError if the turn stayed held
            assert len(store.records("alice")) == 5
    finally:
        idle.kill()
        idle.wait()


FORK_INSIDE_A_WRITE = """
import os, signal, sys, time
from memkit.store import MemoryStore
store = MemoryStore(sys.argv[1])
with store.transaction():
    store.put("forker", "s1", "episode", "inside", "never committed")
    if os.fork() == 0:   # the child inherits the folder's descriptor, and with it the turn's lock
        time.sleep(120)
        os._exit(0)
    print("forked", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_forked_child_does_not_keep_its_dead_parents_turn(tmp_path):
    # flock belongs to the open file, which a fork shares: a child that kept the parent's descriptor
    # would hold the turn after the parent died, and every writer would wait out the busy timeout.
    path = tmp_path / "memory.sqlite3"
    MemoryStore(path).close()
    forker = subprocess.Popen([sys.executable, "-c", FORK_INSIDE_A_WRITE, str(path)], stdout=subprocess.PIPE,
                              text=True, start_new_session=True)
    try:
        assert forker.stdout is not None and forker.stdout.readline().strip() == "forked"
        forker.wait(timeout=30)
        assert forker.returncode == -signal.SIGKILL
        with MemoryStore(path, limits=Limits(busy_timeout_ms=2000)) as store:
            store.put("alice", "s1", "preference", "drink", "tea")
            assert store.get("alice", "preference", "drink")["value"] == "tea"
            assert store.traces("forker")["records"] == 0
    finally:
        os.killpg(forker.pid, signal.SIGKILL)  # the sleeping child, in the forker's session


def test_stores_of_one_folder_in_one_process_share_its_turn(tmp_path):
    # Two stores of one folder in one process take the same turn: writing one after the other, or one
    # inside the other's transaction, never waits for the process itself.
    from memkit.store.turns import WriterTurns
    with MemoryStore(tmp_path / "a.sqlite3") as a, MemoryStore(tmp_path / "b.sqlite3") as b:
        assert a._db._turns is b._db._turns  # type: ignore[attr-defined]
    with MemoryStore(tmp_path / "a.sqlite3") as a:
        assert WriterTurns._open, "the folder's turn is open while a store is"
    assert not WriterTurns._open, "the last store closed the folder's turn"


def test_a_writer_waits_its_grace_only_while_another_process_writes(tmp_path):
    # After its slice a process waits its GRACE before asking again only when it has lately found the
    # turn taken (turns.CONTENDED): a lone writer never sleeps, a writer among others lets them in.
    path = tmp_path / "memory.sqlite3"
    script = WRITER.replace('print("ready", flush=True)', 'print("ready", flush=True)\n    go.touch()')
    with MemoryStore(path, limits=_limits()) as store:
        turns = store._db._turns  # type: ignore[attr-defined]
        for n in range(300):  # several slices, alone
            store.put("alone", "s1", "episode", f"k{n}", "v")
        assert time.monotonic() - turns._contended_at >= turns_module.CONTENDED
        with store.transaction():
            store.put("holder", "s1", "episode", "inside", "held while another waits")
            other = subprocess.Popen([sys.executable, "-c", script, str(path), "other", str(tmp_path / "go"), "0.5"],
                                     stdout=subprocess.PIPE, text=True)
            assert other.stdout is not None and other.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 10
        while time.monotonic() - turns._contended_at >= turns_module.CONTENDED and time.monotonic() < deadline:
            store.put("alone", "s1", "episode", f"late{time.monotonic_ns()}", "v")  # meets the other writer
        assert time.monotonic() - turns._contended_at < turns_module.CONTENDED
    out = other.communicate(timeout=60)[0].split()
    assert int(out[0]) > 0 and out[1] == "0"  # it wrote beside this one, and was refused nothing
