"""The memory inspector at size: 10,000 records of 500 users, each click's plain method timed.

Every widget control calls a plain method; each is timed alone and with the widget displayed (every
control brought in line), beside a plain store read as the floor. The first Confirm of a new process
is timed apart (it used to compile four JSON-Schema validators on every click). Nothing asserts on it.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from collections.abc import Callable

from memkit import Limits, MemoryStore
from memkit.inspector import MemoryInspector

from .timing import median_time


def build(path: Path, records: int, users: int) -> None:
    """`records` memories over `users` users; one in ten updated, one in twenty deleted; 6 turns a user."""
    per_user = records // users
    limits = Limits(max_records_total=records * 2, max_records_per_user=per_user * 2, max_db_bytes=512 * 1024 * 1024)
    with MemoryStore(path, limits=limits, synchronous="NORMAL") as store, store.transaction():
        for n in range(records):
            user = f"user-{n % users:04d}"
            kind = "preference" if n % 3 else "episode"
            store.put(user, "s0", kind, f"key.{n // users:03d}", f"value {n} of {user}")
            if n % 10 == 0:
                store.put(user, "s1", kind, f"key.{n // users:03d}", f"updated value {n}")
            if n % 20 == 5:
                store.put(user, "s0", "episode", f"gone.{n // users:03d}", "to be deleted")
                store.delete(user, "episode", f"gone.{n // users:03d}", session="s1")
        for u in range(users):
            store.archive_turns(f"user-{u:04d}", "chat-1", [
                {"turn": t, "role": "user" if t % 2 else "assistant", "content": f"turn {t}",
                 "at": f"2026-05-01T10:00:{t:02d}Z"} for t in range(1, 7)])


def median_ms(action: Callable[[], Any], rounds: int) -> float:
    return median_time(action, rounds, warm=False) * 1000


def run(records: int, users: int, rounds: int) -> list[tuple[str, float, float | None]]:
    """(click, median ms of the plain method, median ms with the widget displayed or None)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "big.sqlite3"
        build(path, records, users)
        rows: list[tuple[str, float, float | None]] = []
        opened = median_ms(lambda: MemoryInspector(path).close(), rounds)
        pages_of = max(1, records // users // 2)  # two pages a user
        headless = MemoryInspector(path, page_size=pages_of)
        shown = MemoryInspector(path, page_size=pages_of)
        _ = shown.widget  # displayed: every method now also brings the controls in line
        target = f"user-{users // 2:04d}"
        store = headless.store
        rows.append(("open read-only (and list the users)", opened, None))
        pick = store.records(target, "preference")[0]
        kind, key = pick["kind"], pick["key"]
        floor = median_ms(lambda: store.records(target), rounds)
        rows.append(("floor: MemoryStore.records of one user", floor, None))

        def both(name: str, act: Callable[[MemoryInspector], Any]) -> None:
            rows.append((name, median_ms(lambda: act(headless), rounds), median_ms(lambda: act(shown), rounds)))

        both("find a user by typing (find_users)", lambda i: i.find_users("025"))
        both("select a user", lambda i: i.select_user(target))
        both("sort newest first", lambda i: (i.set_sort("newest"), i.set_sort("kind, key")))
        both("next page", lambda i: (i.set_page(1 if i.page == 0 else 0)))
        both("search text", lambda i: (i.set_query("updated"), i.set_query("")))
        both("select a key (its history)", lambda i: i.select_key(kind, key))
        both("list deleted keys", lambda i: i.set_show_deleted(not i.show_deleted))
        both("a session's turns", lambda i: i.turns("chat-1"))
        headless.close()
        shown.close()

        for wait, name in ((False, "first Confirm in a new process, at once after opening for editing"),
                           (True, "first Confirm in a new process, the person taking a moment (import done)")):
            rows.append((name, statistics.median(fresh_confirm(path, target, kind, key, wait)
                                                 for _ in range(rounds)), None))
        later = MemoryInspector(path, edit=True)
        later.select_user(target)

        def confirm_again() -> None:
            later.select_key(kind, key)
            later.stage_edit(f"value {time.perf_counter_ns()}")
            later.confirm()

        confirm_again()
        rows.append(("a later Confirm (stage and write)", median_ms(confirm_again, rounds), None))
        later.close()
        return rows


FRESH_CONFIRM = """
import sys, time
from memkit.inspector import MemoryInspector
path, user, kind, key, wait = sys.argv[1:6]
inspector = MemoryInspector(path, edit=True)
inspector.select_user(user)
inspector.select_key(kind, key)
inspector.stage_edit("fresh %d" % time.perf_counter_ns())
if wait == "1":
    inspector.warming.join()
started = time.perf_counter()
inspector.confirm()
print((time.perf_counter() - started) * 1000)
"""


def fresh_confirm(path: Path, user: str, kind: str, key: str, wait: bool) -> float:
    """The first Confirm of a new Python process (ms): what a notebook's first click costs."""
    done = subprocess.run([sys.executable, "-c", FRESH_CONFIRM, str(path), user, kind, key, "1" if wait else "0"],
                          capture_output=True, text=True, check=True)
    return float(done.stdout.strip())
