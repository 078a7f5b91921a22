"""memkit's store against its peer, langgraph's `SqliteStore`, at FULL and at NORMAL, with the fsync floor.

For each `synchronous` setting, one data set (10k records, 100 users, as the store benchmark) is
loaded into memkit and into both `SqliteStore` configurations (`peers`), and the store benchmark's
workload runs on all of them, alternating in one process (`store_bench.time_operations`). The
disk's fsync latency (`disk.FsyncProbe`) is timed in the same rounds of every write. Every SQLite
contender's journal mode and `synchronous` are read back with PRAGMA before timing; after it, the
same questions go to every contender and every user the writes touched must hold the same records.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from pathlib import Path
from typing import Any

from .contenders import INDEXED_LIMITS, Kit, build_kit_file
from .data import make_dataset
from .disk import FsyncProbe
from memkit.store.schema import has_search_index

from .peers import check_durability, make_peers
from .store_bench import StoreConfig, agreement, time_operations, workload, written_users

PEER_OPERATIONS = ("put (new key)", "put (update)", "get", "search (hit)", "search (miss)", "delete")
MEMKIT = "memkit"
MEMKIT_INDEXED = "memkit (trigram index kept)"
WAL_PEER = "SqliteStore (WAL)"
ROLLBACK_PEER = "SqliteStore (rollback journal)"
PEERS = (ROLLBACK_PEER, WAL_PEER)
FSYNC = FsyncProbe.name
FRAME_PROBES = (4, 8)
"""WAL frames per commit the frame probes write: about `SqliteStore`'s and memkit's pages per write."""


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


def run(config: PeerConfig, log: Any = print) -> dict[str, Any]:
    """Time memkit, both `SqliteStore` configurations and the fsync probe; return rows, checks, settings."""
    rows: list[dict[str, Any]] = []
    checks: list[dict[str, Any]] = []
    settings: list[dict[str, Any]] = []
    loads: list[dict[str, Any]] = []
    fsync_call = None
    for synchronous in config.synchronous:
        workdir = Path(tempfile.mkdtemp(prefix="memkit-bench-peers-"))
        contenders: list[Any] = []
        try:
            data = make_dataset(config.size, config.seed)
            kit_path = workdir / "kit.sqlite3"
            load = {"memkit (import_records)": build_kit_file(kit_path, data)}
            kit = Kit(kit_path, synchronous)
            contenders.append(kit)
            # The same store with a per-user quota that lets a user reach fts_min_user_rows: what a
            # deployment that needs the trigram index pays for it on every write.
            indexed_path = workdir / "kit-indexed.sqlite3"
            load[f"{MEMKIT_INDEXED} (import_records)"] = build_kit_file(indexed_path, data, INDEXED_LIMITS)
            indexed = Kit(indexed_path, synchronous, INDEXED_LIMITS, name=MEMKIT_INDEXED)
            contenders.append(indexed)
            for k in (kit, indexed):
                settings.append({"synchronous_run": synchronous, "contender": k.name,
                                 **check_durability(k.name, k.store.connection, "WAL", synchronous),
                                 "trigram_index": "kept" if has_search_index(k.store.connection) else "none"})
            peers, peer_load = make_peers(workdir, data, synchronous)
            contenders += peers
            load.update(peer_load)
            settings += [{"synchronous_run": synchronous, "contender": p.name, **p.durability} for p in peers]
            probe = FsyncProbe(workdir / "fsync.probe")
            fsync_call = probe.call
            # And the sync of as many WAL frames as the peer's and memkit's writes add (the page table).
            probes = [probe] + [FsyncProbe(workdir / f"frames-{n}.probe", frames=n) for n in FRAME_PROBES]
            contenders += probes
            loads.append({"synchronous": synchronous, "size": config.size, "users": len(data.users),
                          **{k: round(v, 2) for k, v in load.items()}})
            log(f"  synchronous={synchronous}, {config.size} records, {len(data.users)} users: loaded "
                + ", ".join(f"{k} {v:.1f} s" for k, v in load.items()))
            plan = workload(data, config.store_config())
            timed = time_operations(config.size, contenders, plan, PEER_OPERATIONS, config.store_config(), log)
            rows += [{**row, "synchronous": synchronous} for row in timed]
            # Settings again after the run: nothing switched them meanwhile (a checkpoint cannot).
            stores = [c for c in contenders if not isinstance(c, FsyncProbe)]
            for contender in stores:
                mine = isinstance(contender, Kit)
                check_durability(contender.name, contender.store.connection if mine else contender.conn,
                                 "WAL" if mine else contender.journal_mode, synchronous)
            found = agreement(data, stores, touched=written_users(plan))
            checks += [{**check, "synchronous": synchronous} for check in found]
        finally:
            for contender in contenders:
                contender.close()
            shutil.rmtree(workdir, ignore_errors=True)
    return {"rows": rows, "checks": checks, "settings": settings, "loads": loads, "fsync_call": fsync_call}
