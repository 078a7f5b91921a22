"""The reliability lab: one user's conversation cannot fill the store, and every limit has a range.

Unbounded, 124 archived turns of 2,000 characters filled a 1 MiB store and another user's first
memory was refused; an append to the store's own window that archived nothing never checked the
size cap at all. `Limits.max_archived_turns_per_user` bounds each user's archived turns (oldest
first, inside the write's transaction) and the turns their store windows hold together (the least
recently written sessions retire into the archive). A retried archive write (a window's archiver
killed after its commit) never brings a removed turn back. And a limit out of its range
(memkit/limit_ranges.py) is one error line from `memkit limits --set`, never a traceback.
See `tests/_reliability.py` for the sizes and conftest.py for the `figures` fixture.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from _reliability import FULL, examples, scale
from _store_helpers import snapshot
from memkit import cli
from memkit.errors import QuotaError
from memkit.limit_ranges import UPPER
from memkit.limits import Limits
from memkit.store import MemoryStore, open_store
from memkit.window.store_window import StoreWindow


def _others_first_memories(store, start: int, count: int) -> int:
    """How many of `count` new users' first memories the store refuses."""
    refused = 0
    for other in range(start, start + count):
        try:
            store.put(f"user{other}", "s1", "episode", "trip", "a long story " + "y" * 490)
        except QuotaError:
            refused += 1
    return refused


def test_a_hogs_conversation_in_the_store_window_never_refuses_another_users_first_memory(tmp_path, figures):
    # The default cap and the window's largest turns at full size; a 1 MiB cap, as the attack had it, every day.
    limits = Limits() if FULL else Limits(max_db_bytes=1 << 20)
    messages, chars = scale(400, 2_000), scale(2_000, 19_990)
    path = tmp_path / "memory.sqlite3"
    refused_hog = refused_others = largest = 0
    sent: dict[str, list[dict]] = {}
    with MemoryStore(path, limits=limits, synchronous="NORMAL") as store:
        window = StoreWindow(store, size=16)
        for n in range(1, messages + 1):
            session = f"s{n // 7}" if n % 2 else "long"  # one long conversation, and a new one every 7 messages
            try:
                sent.setdefault(session, []).append(window.append("hog", session, "user", f"{n} " + "x" * chars))
            except QuotaError:
                refused_hog += 1
            if n % 50 == 0:
                refused_others += _others_first_memories(store, n, 2)
                largest = max(largest, os.path.getsize(path))
        archived = store.traces("hog")["transcript"]
        in_windows = store.connection.execute("SELECT count(*) FROM window_turns WHERE user_id = 'hog'").fetchone()[0]
        stored = [t["content"] for s in sent for t in window.load_session("hog", s)]
        windowed = {row[0] for row in store.connection.execute("SELECT content FROM window_turns")}
        before = snapshot(store, ("transcript", "window_turns"))
        # A retry of every archive write (what an archiver killed after its commit does): nothing new.
        rearchived = sum(store.archive_turns("hog", s, [t for t in turns if t["content"] not in windowed])
                         for s, turns in sent.items())
        unchanged = snapshot(store, ("transcript", "window_turns")) == before
        refused_late = _others_first_memories(store, 10**6, 10)
    duplicated = sum(n - 1 for n in Counter(stored).values() if n > 1)
    figures("One user's conversation and the size cap",
            **{"messages appended": messages, "characters each": chars, "cap (bytes)": limits.max_db_bytes,
               "largest file (share of the cap)": round(largest / limits.max_db_bytes, 2),
               "hog's appends refused": refused_hog,
               "other users' first memories refused": refused_others + refused_late,
               "archived turns the hog keeps": archived, "turns in the hog's windows": in_windows,
               "re-archived by a retry": rearchived, "duplicated turns": duplicated})
    assert refused_hog == refused_others == refused_late == 0
    assert archived == limits.max_archived_turns_per_user and in_windows <= limits.max_archived_turns_per_user
    assert rearchived == duplicated == 0 and unchanged and largest <= limits.max_db_bytes


@pytest.mark.parametrize("where", ["sqlite", "postgresql"])
def test_archived_turns_written_as_a_redis_windows_archiver_does_stay_bounded_and_exactly_once(
        where, tmp_path, request, figures):
    limits = Limits(max_db_bytes=1 << 20)
    target = tmp_path / "memory.sqlite3" if where == "sqlite" else request.getfixturevalue("pg_url")
    options = {"schema": f"archive_bound_{os.getpid()}"} if where == "postgresql" else {}
    turns = scale(600, 6_000)
    batches = [[{"turn": n, "role": "user", "content": f"{n} " + "x" * 2000, "at": f"2026-01-01T{n:08d}"}
                for n in range(first, first + 10)] for first in range(1, turns + 1, 10)]
    refused = new = rearchived = 0
    seen: set[int] = set()
    gone: set[int] = set()
    with open_store(target, limits=limits, **options) as store:
        for number, batch in enumerate(batches):
            try:
                new += store.archive_turns("hog", "s1", batch)
                if number % 3 == 0 and number >= 3:  # the archiver's retry: this batch and one already trimmed
                    rearchived += store.archive_turns("hog", "s1", batches[number - 3] + batch)
            except QuotaError:
                refused += 1
            kept = {t["turn"] for t in store.archived_turns("hog", "s1")}
            rearchived += len(kept & gone)  # a turn removed by the bound that is back
            gone |= seen - kept
            seen |= kept
        refused_others = _others_first_memories(store, 0, 10)
        kept_turns = [t["turn"] for t in store.archived_turns("hog", "s1")]
    figures(f"One user's archived turns ({where})",
            **{"turns archived": turns, "new turns counted": new, "archived turns the hog keeps": len(kept_turns),
               "hog's writes refused": refused, "other users' first memories refused": refused_others,
               "re-archived turns": rearchived})
    assert refused == refused_others == rearchived == 0
    assert kept_turns == list(range(turns - limits.max_archived_turns_per_user + 1, turns + 1))
    assert new == turns


OUT_OF_RANGE = st.one_of(
    st.tuples(st.sampled_from(sorted(UPPER)), st.integers(max_value=0)),
    st.sampled_from(sorted(UPPER)).flatmap(lambda name: st.tuples(st.just(name), st.integers(UPPER[name] + 1))),
    st.tuples(st.sampled_from(sorted(UPPER)), st.integers(31, 6000).map(lambda digits: "9" * digits)),
)


def test_a_limit_out_of_range_is_refused_in_one_line_through_the_cli(tmp_path, figures):
    path = tmp_path / "memory.sqlite3"
    with MemoryStore(path) as store:
        store.put("alice", "s1", "preference", "drink", "tea")
    before = path.read_bytes()
    tried = refused = tracebacks = changed = 0

    @given(OUT_OF_RANGE)
    @examples(60, 600)
    def attempt(case):
        nonlocal tried, refused, tracebacks, changed
        name, value = case
        err = io.StringIO()
        tried += 1
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                code = cli.main(["limits", "--db", str(path), "--set", f"{name}={value}", "--confirm"])
        except BaseException:  # what escapes main is a traceback to the user
            tracebacks += 1
            return
        lines = err.getvalue().splitlines()
        refused += code == 2 and len(lines) == 1 and name in lines[0] and f"from 1 to {UPPER[name]}" in lines[0]
        changed += path.read_bytes() != before

    attempt()
    # The outside attack's reproducer, through the real entry point in its own process.
    real = subprocess.run([sys.executable, "-m", "memkit", "limits", "--db", str(path), "--set",
                           "max_db_bytes=99999999999999999999999999", "--confirm"], capture_output=True, text=True)
    figures("Limits out of range through the CLI",
            **{"values tried": tried + 1, "refused in one line (%)": round(100 * (refused + (real.returncode == 2)) /
                                                                           (tried + 1)),
               "tracebacks": tracebacks + ("Traceback" in real.stderr), "stores changed": changed})
    assert refused == tried and tracebacks == changed == 0
    assert real.returncode == 2 and real.stderr.count("\n") == 1 and "Traceback" not in real.stderr
    assert path.read_bytes() == before
