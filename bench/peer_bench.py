"""memkit's store against langgraph's `SqliteStore`: operations, a write's pages, writer processes.

`run`: at FULL and at NORMAL, one data set (10k records, 100 users) in memkit, in memkit keeping the
trigram index and in both `SqliteStore` configurations, the store benchmark's workload alternating in
one process with the sync probes; PRAGMA checked before and after; afterwards the same questions to
every contender and the same records for every user the writes touched. `run_profile` (first: the
own-page probes sync exactly its counts): the WAL frames each write kind adds, by the B-tree owning
each page (`dbstat`). `run_writers`: processes putting new keys into one file each round, the
contenders alternating; each file must hold exactly the keys its processes wrote.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import random
import shutil
import sqlite3
import statistics
import struct
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memkit.errors import LockedError
from memkit.store.schema import has_search_index

from .contenders import BENCH_LIMITS, INDEXED_LIMITS, Kit, build_kit_file
from .data import make_dataset, sentence
from .peers import FsyncProbe, LangGraphStore, PagesProbe, check_durability, make_peers
from .store_bench import StoreConfig, agreement, time_operations, workload, written_users
from .timing import alternate

PEER_OPERATIONS = ("put (new key)", "put (update)", "get", "search (hit)", "search (miss)", "delete")
MEMKIT = "memkit"
MEMKIT_INDEXED = "memkit (trigram index kept)"
WAL_PEER = "SqliteStore (WAL)"
ROLLBACK_PEER = "SqliteStore (rollback journal)"
PEERS = (ROLLBACK_PEER, WAL_PEER)
FSYNC = FsyncProbe.name
WRITE_OPERATIONS = ("put (new key)", "put (update)", "delete")


def own_pages_probe(contender: str) -> str:
    """The name of the probe that syncs exactly the pages `contender`'s writes were measured to add."""
    return f"sync of {contender}'s own pages"


OWN_PAGES = (MEMKIT, WAL_PEER)
"""Whose page counts get a probe of their own (`PagesProbe`), timed in the same rounds as the writes."""


@dataclasses.dataclass
class PeerConfig:
    size: int = 10_000
    synchronous: tuple[str, ...] = ("FULL", "NORMAL")
    rounds: int = 9
    writes_per_round: int = 20
    reads_per_round: int = 300
    read_cap_s: float = 0.2
    seed: int = 1

    def store_config(self) -> StoreConfig:
        return StoreConfig(sizes=(self.size,), rounds=self.rounds, writes_per_round=self.writes_per_round,
                           reads_per_round=self.reads_per_round, read_cap_s=self.read_cap_s, seed=self.seed)


def run(config: PeerConfig, log: Any = print, pages: dict[str, Any] | None = None) -> dict[str, Any]:
    """Time memkit, both `SqliteStore` configurations and the sync probes; return rows, checks, settings.

    `pages`: `run_profile`'s page counts, measured first. With them, a `PagesProbe` for memkit and one
    for `SqliteStore (WAL)` sync exactly the pages each write kind of theirs adds, in the same rounds.
    """
    out: dict[str, Any] = {"rows": [], "checks": [], "settings": [], "loads": [], "fsync_call": None}
    for sync in config.synchronous:
        workdir = Path(tempfile.mkdtemp(prefix="memkit-bench-peers-"))
        contenders: list[Any] = []
        try:
            data, load = make_dataset(config.size, config.seed), {}
            # memkit, and the same store with a per-user quota that lets a user reach fts_min_user_rows:
            # what a deployment that needs the trigram index pays for it on every write.
            for name, limits in ((MEMKIT, BENCH_LIMITS), (MEMKIT_INDEXED, INDEXED_LIMITS)):
                path = workdir / f"{len(contenders)}.sqlite3"
                contenders.append(kit := Kit(path, sync, limits, name=name, data=data))
                load[f"{name} (import_records)"] = kit.load_s
                out["settings"].append({"synchronous_run": sync, "contender": name,
                                        **check_durability(name, kit.conn, "WAL", sync),
                                        "trigram_index": "kept" if has_search_index(kit.conn) else "none"})
            peers, peer_load = make_peers(workdir, data, sync)
            contenders += peers
            load.update(peer_load)
            out["settings"] += [{"synchronous_run": sync, "contender": p.name, **p.durability} for p in peers]
            probe = FsyncProbe(workdir / "fsync.probe")
            out["fsync_call"] = probe.call
            contenders += [probe] + [PagesProbe(workdir / f"pages-{n}.probe", own_pages_probe(name),
                                                {op: counts["total"] for op, counts in pages[name].items()})
                                     for n, name in enumerate(OWN_PAGES) if pages and name in pages]
            out["loads"].append({"synchronous": sync, "size": config.size, "users": len(data.users),
                                 **{k: round(v, 2) for k, v in load.items()}})
            log(f"  synchronous={sync}, {config.size} records, {len(data.users)} users: loaded "
                + ", ".join(f"{k} {v:.1f} s" for k, v in load.items()))
            plan = workload(data, config.store_config())
            timed = time_operations(config.size, contenders, plan, PEER_OPERATIONS, config.store_config(), log)
            out["rows"] += [{**row, "synchronous": sync} for row in timed]
            # Settings again after the run: nothing switched them meanwhile (a checkpoint cannot).
            stores = [c for c in contenders if not isinstance(c, FsyncProbe)]
            for c in stores:
                check_durability(c.name, c.conn, c.journal_mode, sync)
            out["checks"] += [{**check, "synchronous": sync}
                              for check in agreement(data, stores, touched=written_users(plan))]
        finally:
            for contender in contenders:
                contender.close()
            shutil.rmtree(workdir, ignore_errors=True)
    return out


@dataclasses.dataclass
class WritersConfig:
    processes: int = 4
    seconds: float = 2.0
    rounds: int = 5
    size: int = 10_000
    synchronous: str = "FULL"
    seed: int = 1
    solo_rounds: int = 3
    """Rounds of one writer process alone, per contender: the rate the four are measured against."""


def _open(contender: str, path: Path, synchronous: str) -> Any:
    """The contender's store on `path` for one worker process, PRAGMA-checked."""
    store = Kit(path, synchronous) if contender == MEMKIT else LangGraphStore(path, synchronous, wal=True)
    check_durability(contender, store.conn, store.journal_mode, synchronous)
    return store


USER_SHARE = 500
"""A writer moves to a new user every this many writes of a round: within the bench's per-user quota (900)."""


def _worker(contender: str, path: str, synchronous: str, worker: int, round_no: int, seconds: float,
            barrier: Any, results: Any) -> None:
    store = _open(contender, Path(path), synchronous)
    rng = random.Random(worker * 1000 + round_no)
    written = refused = 0
    try:
        barrier.wait()
        started = time.monotonic()
        while time.monotonic() < started + seconds:
            # Users of their own in each round: the rounds write into one file, and a user written to
            # in two rounds could pass the quota. No '.': SqliteStore refuses it in a namespace.
            try:
                store.put(f"writer{worker}-r{round_no}-{written // USER_SHARE}", "episode",
                          f"w.r{round_no}.{written}", sentence(rng))
            except (LockedError, sqlite3.OperationalError):  # waited out the busy timeout: counted, then on
                refused += 1
                continue
            written += 1
        stopped = time.monotonic()
    finally:
        store.close()
    results.put({"worker": worker, "written": written, "refused": refused, "started": started, "stopped": stopped})


def _round(contender: str, path: Path, config: WritersConfig, round_no: int, processes: int | None = None
           ) -> dict[str, Any]:
    processes = processes or config.processes
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(processes), context.Queue()
    procs = [context.Process(target=_worker, args=(contender, str(path), config.synchronous, w, round_no,
                                                   config.seconds, barrier, results))
             for w in range(processes)]
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
    per_worker = sorted(r["written"] for r in reports)
    return {"contender": contender, "round": round_no, "written": written, "wall_s": wall,
            "writes_per_s": written / wall, "per_worker": per_worker,
            "slowest_share": per_worker[0] / statistics.mean(per_worker) if written else 0.0,
            "refused": sum(r["refused"] for r in reports)}


def _keys_written(contender: str, path: Path, config: WritersConfig) -> dict[str, int]:
    """How many `w.*` keys each writer holds in the file afterwards (its users' records, by worker)."""
    store = _open(contender, path, config.synchronous)
    try:
        # memkit's user id, or the peer's namespace text "memkit.writerN-M.episode"
        sql = ("SELECT user_id FROM memories WHERE memory_key LIKE 'w.%'" if contender == MEMKIT else
               "SELECT substr(prefix, 8) FROM store WHERE key LIKE 'w.%'")
        return dict(Counter(owner.split("-")[0] for (owner,) in store.conn.execute(sql)))
    finally:
        store.close()


def run_writers(config: WritersConfig, log: Any = print) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="memkit-bench-writers-"))
    try:
        data = make_dataset(config.size, config.seed)
        paths = {MEMKIT: workdir / "kit.sqlite3", WAL_PEER: workdir / "langgraph.sqlite3"}
        build_kit_file(paths[MEMKIT], data)
        LangGraphStore(paths[WAL_PEER], config.synchronous, wal=True, data=data).close()
        rounds: list[dict[str, Any]] = []

        def one_round(contender: str, r: int) -> float:
            rounds.append(_round(contender, paths[contender], config, r))
            return float(rounds[-1]["writes_per_s"])
        medians = {c: statistics.median(v) for c, v in alternate(config.rounds, list(paths), one_round).items()}
        solo: list[dict[str, Any]] = []  # round numbers after the crowd's: users of their own again

        def solo_round(contender: str, r: int) -> float:
            solo.append(_round(contender, paths[contender], config, config.rounds + r, processes=1))
            return float(solo[-1]["writes_per_s"])
        solo_medians = {c: statistics.median(v)
                        for c, v in alternate(config.solo_rounds, list(paths), solo_round).items()}
        totals = {c: sum(x["written"] for x in rounds + solo if x["contender"] == c) for c in paths}
        found = {c: _keys_written(c, paths[c], config) for c in paths}
        checks = {c: sum(found[c].values()) == totals[c] for c in paths}
        log(f"    {config.processes} writers, {config.seconds:g} s x {config.rounds} rounds: "
            + ", ".join(f"{c} {m:.0f} writes/s, slowest/mean "
                        + " ".join(f"{r['slowest_share']:.2f}" for r in rounds if r["contender"] == c)
                        + f", refused {sum(r['refused'] for r in rounds if r['contender'] == c)}"
                        for c, m in medians.items())
            + "; one writer alone: " + ", ".join(f"{c} {m:.0f}" for c, m in solo_medians.items())
            + ("" if all(checks.values()) else f"  KEYS MISSING {found} vs {totals}"))
        return {"processes": config.processes, "seconds": config.seconds, "rounds": rounds,
                "solo_rounds": solo, "solo_writes_per_s": solo_medians,
                "synchronous": config.synchronous, "median_writes_per_s": medians,
                "written": totals, "found": found, "all_found": all(checks.values())}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@dataclasses.dataclass
class ProfileConfig:
    size: int = 10_000
    writes: int = 60
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
    for op in WRITE_OPERATIONS:
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


def run_profile(config: ProfileConfig, log: Any = print) -> dict[str, Any]:
    """WAL pages per write of memkit (with and without the trigram index) and of `SqliteStore (WAL)`."""
    workdir = Path(tempfile.mkdtemp(prefix="memkit-bench-profile-"))
    try:
        data = make_dataset(config.size, config.seed)
        rng = random.Random(config.seed)
        pages: dict[str, Any] = {}
        for name, limits in ((MEMKIT, BENCH_LIMITS), (MEMKIT_INDEXED, INDEXED_LIMITS)):
            path = workdir / f"{len(pages)}.sqlite3"
            build_kit_file(path, data, limits)
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
        log("    pages per write: " + "; ".join(
            f"{name} " + ", ".join(f"{op} {p['total']:.1f}" for op, p in ops.items()) for name, ops in pages.items()))
        return {"pages": pages, "size": config.size, "writes": config.writes}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
