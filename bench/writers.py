"""Four writer processes on one file: memkit against langgraph `SqliteStore` in WAL, in writes per second.

Each contender has its own file, loaded once with the store benchmark's data set. In each round,
`processes` fresh processes open that file (memkit through `MemoryStore`, the peer as `peers`
opens it), wait at a barrier, then put new keys, each process for its own users, for `seconds`;
the figure is all their writes divided by the time from the first start to the last stop. Rounds
alternate the contenders (first one, then the other, rotating), and each contender's result is the
median over rounds. Both run in WAL at the same `synchronous`, read back with PRAGMA in every
process. Afterwards each file must hold exactly the keys the processes said they wrote.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from .contenders import BENCH_LIMITS, build_kit_file
from .data import make_dataset, sentence
from .peers import LangGraphStore, check_durability

MEMKIT = "memkit"
PEER = "SqliteStore (WAL)"


@dataclasses.dataclass
class WritersConfig:
    processes: int = 4
    seconds: float = 2.0
    rounds: int = 5
    size: int = 10_000
    synchronous: str = "FULL"
    seed: int = 1


def _open(contender: str, path: Path, synchronous: str) -> tuple[Any, Any]:
    """(a put(user, key, value) function, the object to close) for one worker process."""
    if contender == MEMKIT:
        from memkit.store import MemoryStore

        store = MemoryStore(path, limits=BENCH_LIMITS, synchronous=synchronous, check_integrity=False)
        check_durability(MEMKIT, store.connection, "WAL", synchronous)
        return (lambda user, key, value: store.put(user, "writers", "episode", key, value)), store
    peer = LangGraphStore(path, synchronous, wal=True)
    return (lambda user, key, value: peer.put(user, "episode", key, value)), peer


USER_SHARE = 500
"""A writer moves to a new user every this many writes: within the bench's per-user quota (900)."""


def _user(worker: int, written: int) -> str:
    return f"writer{worker}-{written // USER_SHARE}"  # no '.': SqliteStore refuses it in a namespace


def _worker(contender: str, path: str, synchronous: str, worker: int, round_no: int, seconds: float,
            barrier: Any, results: Any) -> None:
    import random

    put, handle = _open(contender, Path(path), synchronous)
    rng = random.Random(worker * 1000 + round_no)
    written = 0
    try:
        barrier.wait()
        started = time.monotonic()
        deadline = started + seconds
        while time.monotonic() < deadline:
            put(_user(worker, written), f"w.r{round_no}.{written}", sentence(rng))
            written += 1
        stopped = time.monotonic()
    finally:
        handle.close()
    results.put({"worker": worker, "written": written, "started": started, "stopped": stopped})


def _round(contender: str, path: Path, config: WritersConfig, round_no: int) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(config.processes)
    results = context.Queue()
    procs = [context.Process(target=_worker, args=(contender, str(path), config.synchronous, w, round_no,
                                                   config.seconds, barrier, results))
             for w in range(config.processes)]
    for proc in procs:
        proc.start()
    reports = [results.get(timeout=120 + config.seconds) for _ in procs]
    for proc in procs:
        proc.join(timeout=30)
    failed = [p.exitcode for p in procs if p.exitcode != 0]
    if failed:
        raise RuntimeError(f"{contender}: a writer process exited with {failed}")
    wall = max(r["stopped"] for r in reports) - min(r["started"] for r in reports)
    written = sum(r["written"] for r in reports)
    return {"contender": contender, "round": round_no, "written": written, "wall_s": wall,
            "writes_per_s": written / wall, "per_worker": sorted(r["written"] for r in reports)}


def _keys_written(contender: str, path: Path, config: WritersConfig) -> dict[str, int]:
    """How many `w.*` keys each writer user holds in the file afterwards."""
    put, handle = _open(contender, path, config.synchronous)
    try:
        conn = handle.connection if contender == MEMKIT else handle.conn
        if contender == MEMKIT:
            rows = conn.execute("SELECT user_id FROM memories WHERE memory_key LIKE 'w.%'").fetchall()
        else:
            rows = conn.execute("SELECT prefix FROM store WHERE key LIKE 'w.%'").fetchall()
        out: dict[str, int] = {}
        for (owner,) in rows:  # memkit's user id, or the peer's namespace text "memkit.writerN-M.episode"
            worker = (owner.split(".")[1] if contender != MEMKIT else owner).split("-")[0]
            out[worker] = out.get(worker, 0) + 1
        return out
    finally:
        handle.close()


def run(config: WritersConfig, log: Any = print) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="memkit-bench-writers-"))
    try:
        data = make_dataset(config.size, config.seed)
        paths = {MEMKIT: workdir / "kit.sqlite3", PEER: workdir / "langgraph.sqlite3"}
        build_kit_file(paths[MEMKIT], data)
        LangGraphStore(paths[PEER], config.synchronous, wal=True, data=data).close()
        rounds: list[dict[str, Any]] = []
        order = [MEMKIT, PEER]
        for r in range(config.rounds):
            for contender in order[r % 2:] + order[:r % 2]:
                rounds.append(_round(contender, paths[contender], config, r))
        totals = {c: sum(x["written"] for x in rounds if x["contender"] == c) for c in order}
        found = {c: _keys_written(c, paths[c], config) for c in order}
        checks = {c: sum(found[c].values()) == totals[c] for c in order}
        medians = {c: statistics.median(x["writes_per_s"] for x in rounds if x["contender"] == c) for c in order}
        log(f"    {config.processes} writers, {config.seconds:g} s x {config.rounds} rounds: "
            + ", ".join(f"{c} {m:.0f} writes/s" for c, m in medians.items())
            + ("" if all(checks.values()) else f"  KEYS MISSING {found} vs {totals}"))
        return {"processes": config.processes, "seconds": config.seconds, "rounds": rounds,
                "synchronous": config.synchronous, "median_writes_per_s": medians,
                "written": totals, "found": found, "all_found": all(checks.values())}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
