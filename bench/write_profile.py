"""Where a durable write's cost goes: WAL pages per operation by B-tree, and time per part of a put.

Pages: each store (memkit, memkit keeping the trigram index, `SqliteStore` in WAL) is loaded with
the store benchmark's data set, checkpointed, and then runs puts, updates and deletes with the
automatic checkpoint off, so the WAL only grows; every frame it gained is attributed to the B-tree
that owns its page (SQLite's `dbstat`; a page the file did not have before is "new page"). A
commit writes every one of these pages, and a checkpoint later copies them into the database.

Time: memkit's own `put` (the real code path, not a copy) runs at NORMAL with the checkpoint off,
with SQLite's trace callback noting when each statement starts (the triggers' statements too); a
part's time is from its start to the next one's, so it includes the Python between them. Before
the first statement: the argument checks and the lock; from COMMIT on: the commit and the record
built for the caller. The trace costs about a microsecond a statement (in the total too).
"""

from __future__ import annotations

import dataclasses
import random
import shutil
import statistics
import struct
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any
from collections.abc import Callable

from memkit.store import MemoryStore

from .contenders import BENCH_LIMITS, INDEXED_LIMITS, Kit, build_kit_file
from .data import make_dataset, sentence
from .peers import LangGraphStore

_SQL = MemoryStore.statements()
PARTS = [  # (how the statement starts, its part), in the order a put runs them
    ("BEGIN IMMEDIATE", "BEGIN IMMEDIATE (the write lock), the clock"),
    (_SQL.select_for_put.split("?")[0], "read: current row, both quota counters, last revision"),
    (_SQL.take_sequence.split("?")[0], "take the next number of the sequence (store_meta)"),
    (_SQL.insert_memory.split("?")[0], "insert the memory (its 2 indexes, the counter triggers)"),
    (_SQL.insert_event.split("?")[0], "insert the event (history, 1 index)"),
    ("PRAGMA page_count", "size cap check"),
    ("COMMIT", "COMMIT (the WAL frames), the record for the caller"),
]
BEFORE = "argument checks, lock (Python)"


@dataclasses.dataclass
class ProfileConfig:
    size: int = 10_000
    writes: int = 60
    puts: int = 400
    seed: int = 1


def _wal_pages(wal: Path, page_size: int) -> list[int]:
    """The page number of every frame in a WAL file, in order."""
    data = wal.read_bytes() if wal.exists() else b""
    return [struct.unpack(">I", data[at:at + 4])[0] for at in range(32, len(data) - 24, page_size + 24)]


def _pages_by_tree(conn: Any, path: Path, run: Callable[[str, int], None], writes: int) -> dict[str, dict[str, float]]:
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    owner = {pageno: name for name, pageno in conn.execute("SELECT name, pageno FROM dbstat")}
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    wal = Path(f"{path}-wal")
    out = {}
    for op in ("put (new key)", "put (update)", "delete"):
        before = len(_wal_pages(wal, page_size))
        for i in range(writes):
            run(op, i)
        frames = _wal_pages(wal, page_size)[before:]
        trees = Counter(owner.get(p, "new page") for p in frames)
        out[op] = {"total": len(frames) / writes, **{t: n / writes for t, n in trees.most_common()}}
    return out


def _writer(contender: Any, data: Any, rng: random.Random) -> Callable[[str, int], None]:
    def run(op: str, i: int) -> None:
        user = data.users[i % len(data.users)]
        if op == "delete":
            contender.delete(user, "episode", f"profile.{i}")
        else:
            contender.put(user, "episode", f"profile.{i}", sentence(rng) + ("!" if op == "put (update)" else ""))
    return run


def _part(sql: str) -> str:
    """The part a traced statement belongs to (the trace shows it with its values filled in)."""
    sql = sql.strip()
    return next((part for start, part in PARTS if sql.startswith(start)), sql[:40])


def _parts(store: MemoryStore, data: Any, rng: random.Random, puts: int) -> dict[str, float]:
    conn = store.connection
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    marks: list[tuple[float, str]] = []
    conn.set_trace_callback(lambda sql: marks.append((time.perf_counter(), sql)))
    spans: dict[str, list[float]] = {}
    try:
        for i in range(puts):
            user, value = data.users[i % len(data.users)], sentence(rng)
            marks.clear()
            started = time.perf_counter()
            store.put(user, "profile", "episode", f"parts.{i}", value)
            ended = time.perf_counter()
            points = [(started, BEFORE)] + [(at, _part(sql)) for at, sql in marks]
            points.append((ended, ""))
            for (at, name), (then, _) in zip(points, points[1:]):
                spans.setdefault(name, []).append(then - at)
            spans.setdefault("whole put", []).append(ended - started)
    finally:
        conn.set_trace_callback(None)
    return {name: statistics.median(times) for name, times in spans.items()}


def run(config: ProfileConfig, log: Any = print) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="memkit-bench-profile-"))
    try:
        data = make_dataset(config.size, config.seed)
        rng = random.Random(config.seed)
        pages: dict[str, Any] = {}
        build_kit_file(workdir / "kit.sqlite3", data)
        build_kit_file(workdir / "indexed.sqlite3", data, INDEXED_LIMITS)
        for name, path, limits in (("memkit", workdir / "kit.sqlite3", BENCH_LIMITS),
                                   ("memkit (trigram index kept)", workdir / "indexed.sqlite3", INDEXED_LIMITS)):
            kit = Kit(path, "NORMAL", limits)
            try:
                pages[name] = _pages_by_tree(kit.store.connection, path, _writer(kit, data, rng), config.writes)
            finally:
                kit.close()
        peer = LangGraphStore(workdir / "peer.sqlite3", "NORMAL", wal=True, data=data)
        try:
            pages[peer.name] = _pages_by_tree(peer.conn, workdir / "peer.sqlite3", _writer(peer, data, rng),
                                              config.writes)
        finally:
            peer.close()
        kit = Kit(workdir / "kit.sqlite3", "NORMAL")
        try:
            parts = _parts(kit.store, data, rng, config.puts)
        finally:
            kit.close()
        log("    pages per write: " + "; ".join(
            f"{name} " + ", ".join(f"{op} {p['total']:.1f}" for op, p in ops.items()) for name, ops in pages.items()))
        log("    memkit put at NORMAL, by part: " + ", ".join(f"{k} {v * 1e6:.1f} us" for k, v in parts.items()))
        return {"pages": pages, "parts_s": parts, "size": config.size, "writes": config.writes, "puts": config.puts}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
