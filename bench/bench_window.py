"""Short-term window latency: append a turn, read the window. Redis vs in-process vs SQLite only.

Run from the repository root:  python bench/bench_window.py  [--rounds 7] [--batch 200]

Contenders, each holding a 10-turn window of a session of its own:
  in-process       memkit.window.InProcessWindow without a store (a deque; the baseline)
  in-process+arch  the same with a store: what falls out is archived to SQLite inside append
  redis            memkit.window.RedisWindow on REDIS_URL, else an embedded redis-server on a
                   unix socket (persistence "none"); the archiver runs in its background thread
  sqlite FULL      every turn a row in SQLite, the window a `ORDER BY turn DESC LIMIT 10` query;
                   one BEGIN IMMEDIATE transaction per append, synchronous=FULL (fsync per commit)
  sqlite NORMAL    the same with synchronous=NORMAL (no fsync per commit in WAL mode)

Each round runs every contender once, in an order that rotates from round to round; a
contender's time for a round is the mean over its batch, its figure the median over rounds.
Prints a markdown table (medians and ratios to in-process) and writes bench/results_window.md.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from collections.abc import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from a checkout

from memkit.clock import iso, utc_now
from memkit.limits import Limits
from memkit.store import MemoryStore
from memkit.window import InProcessWindow, RedisWindow, connect_redis

SIZE = 10


class SQLiteOnlyWindow:
    """The window as a query over a table of every turn: no second tier, one commit per append."""

    def __init__(self, path: Path, synchronous: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute(f"PRAGMA synchronous = {synchronous}")
        self.conn.execute(
            "CREATE TABLE turns (user_id TEXT, session_id TEXT, turn INTEGER, role TEXT, content TEXT, at TEXT,"
            " PRIMARY KEY (user_id, session_id, turn)) WITHOUT ROWID"
        )

    def append(self, user: str, session: str, role: str, content: str) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute(
            "INSERT INTO turns SELECT ?, ?, coalesce(max(turn), 0) + 1, ?, ?, ? FROM turns"
            " WHERE user_id = ? AND session_id = ?",
            (user, session, role, content, iso(utc_now()), user, session),
        )
        self.conn.execute("COMMIT")

    def recent(self, user: str, session: str) -> list[tuple[Any, ...]]:
        rows = self.conn.execute(
            "SELECT turn, role, content, at FROM turns WHERE user_id = ? AND session_id = ?"
            " ORDER BY turn DESC LIMIT ?", (user, session, SIZE),
        ).fetchall()
        return rows[::-1]

    def close(self) -> None:
        self.conn.close()


def timed_batch(call: Callable[[int], Any], batch: int) -> float:
    """Seconds per call over one batch, with the garbage collector paused (as timeit does)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        started = time.perf_counter()
        for i in range(batch):
            call(i)
        return (time.perf_counter() - started) / batch
    finally:
        if enabled:
            gc.enable()


def run(rounds: int, batch: int) -> tuple[str, dict[str, dict[str, float]]]:
    folder = Path(tempfile.mkdtemp(prefix="memkit-bench-window-"))
    limits = Limits(max_db_bytes=1 << 30)
    store = MemoryStore(folder / "archive.sqlite3", limits=limits)
    handle = connect_redis(persistence="none")
    contenders: dict[str, Any] = {
        "in-process": InProcessWindow(SIZE),
        "in-process+arch": InProcessWindow(SIZE, store=store),
        "redis": RedisWindow(store, handle.client, size=SIZE, prefix="memkit-bench", background=True),
        "sqlite FULL": SQLiteOnlyWindow(folder / "full.sqlite3", "FULL"),
        "sqlite NORMAL": SQLiteOnlyWindow(folder / "normal.sqlite3", "NORMAL"),
    }
    names = list(contenders)
    # A session of its own per contender: the two that archive share one store, which refuses a
    # turn number already archived with other content (store.archive.refuse_conflicts).
    sessions = {name: f"bench{number}" for number, name in enumerate(names)}
    samples: dict[str, dict[str, list[float]]] = {n: {"append": [], "read": []} for n in names}
    text = "a short turn of about sixty characters, as a chat message is"
    try:
        for name, window in contenders.items():  # warm up: a full window in every contender
            for i in range(SIZE * 2):
                window.append("alice", sessions[name], "user", f"{text} {i}")
        for round_no in range(rounds):
            order = names[round_no % len(names):] + names[: round_no % len(names)]
            for name in order:
                window, session = contenders[name], sessions[name]
                samples[name]["append"].append(timed_batch(
                    lambda i: window.append("alice", session, "user" if i % 2 else "assistant", f"{text} {i}"), batch))
                samples[name]["read"].append(timed_batch(lambda i: window.recent("alice", session), batch))
        contenders["redis"].flush()
    finally:
        for window in contenders.values():
            window.close()
        handle_url = handle.url
        embedded = handle.embedded
        server_version = handle.client.info("server")["redis_version"]
        handle.close()
        store.close()
        shutil.rmtree(folder, ignore_errors=True)
    medians = {n: {op: statistics.median(v) for op, v in ops.items()} for n, ops in samples.items()}
    where = "embedded redis-server (unix socket, persistence none)" if embedded else "REDIS_URL (scheme " + \
        handle_url.split(":", 1)[0] + ")"
    header = (
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, Redis {server_version} "
        f"({where}), {os.cpu_count()} CPUs, {platform.system()} {platform.machine()}; "
        f"{rounds} rounds x {batch} calls per contender and operation, window of {SIZE} turns."
    )
    return header, medians


def table(header: str, medians: dict[str, dict[str, float]]) -> str:
    base = medians["in-process"]
    redis = medians["redis"]
    lines = [
        "**Short-term window latency (median per call)**",
        "",
        header,
        "",
        "| contender | append (µs) | read window (µs) | append / in-process | read / in-process "
        "| append / redis | read / redis |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, m in medians.items():
        lines.append(
            f"| {name} | {m['append'] * 1e6:.1f} | {m['read'] * 1e6:.1f} | {m['append'] / base['append']:.1f}x "
            f"| {m['read'] / base['read']:.1f}x | {m['append'] / redis['append']:.2f}x | {m['read'] / redis['read']:.2f}x |"
        )
    lines += [
        "",
        "Ratios from one run on one machine; absolute times vary between machines, the ordering is "
        "what to read. Redis pays a round trip per call (a Lua script each time) and archives in a "
        "background thread; in-process pays no round trip, and with `+arch` archives (one SQLite commit "
        "with fsync) inside each append; SQLite-only pays a transaction (and with FULL an fsync) per "
        "append, and a query per read.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results_window.md"))
    opts = parser.parse_args(argv)
    started = time.perf_counter()
    header, medians = run(opts.rounds, opts.batch)
    report = table(header, medians)
    print(report)
    Path(opts.out).write_text(report, encoding="utf-8")
    print(f"wrote {Path(opts.out).name} in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
