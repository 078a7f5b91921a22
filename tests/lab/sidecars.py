"""Files that do not belong together: a database's `-wal` and `-shm`, and half-made databases.

SQLite keeps a database's last commits in `NAME-wal` beside it and trusts whatever `-wal` it finds
there. These experiments put the store in the situations an operator or a crash creates: the
database deleted after its writer was killed (its `-wal` stays), a `-wal` copied beside another
database, a write refused by the size cap, creators killed half-way, a clock that steps back.
Every process is real and every kill a real SIGKILL; each function returns its figures as a dict.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import signal
import time
from pathlib import Path
from typing import Any

from memkit.clock import FakeClock
from memkit.errors import QuotaError, StoreError
from memkit.limits import Limits
from memkit.store import MemoryStore, seal_bundle
from .crashes import check_writes, kill_writer
from classroom.lab.refusals import sha256_file
from .workers import ROOMY_LIMITS, WORKER_TIMEOUT_S, PathLike, limits_from, read_answer, start_worker, worker


def folder_state(folder: PathLike) -> dict[str, str]:
    """Name -> SHA-256 of every file in a folder: shows a file changed, made or removed."""
    return {entry.name: sha256_file(entry) for entry in sorted(Path(folder).iterdir()) if entry.is_file()}


def _open_or_refusal(path: Path, user: str) -> tuple[int | None, str]:
    """(records of `user` seen, "") when the store opens; (None, the error) when it is refused."""
    try:
        with MemoryStore(path, limits=limits_from(ROOMY_LIMITS)) as store:
            return len(store.records(user)), ""
    except StoreError as exc:
        return None, str(exc)


def leftover_wal_experiment(folder: PathLike, *, trials: int = 5, seed: int = 0) -> dict[str, Any]:
    """A writer is killed, the operator deletes the database, a new store is opened at its path.

    Returns:
        `trials`, `commits` (acknowledged writes that lived only in the WAL), `refused` (with an
        error naming the leftover `-wal`), `opened`, `resurrected` (old records a new store showed),
        `changed` (refusals after which any file in the folder differed).
    """
    rng = random.Random(seed)
    figures = {"trials": trials, "commits": 0, "refused": 0, "opened": 0, "resurrected": 0, "changed": 0}
    for n in range(trials):
        case = Path(folder) / f"leftover-{n:04d}"
        case.mkdir()
        path = case / "memory.sqlite3"
        written = kill_writer(path, prefix=f"k{n:04d}", kill_after_acks=rng.randint(1, 30), user="alice")
        figures["commits"] += written["acks"]
        path.unlink()  # "reset the memory": the -wal and -shm stay behind
        before = folder_state(case)
        seen, error = _open_or_refusal(path, "alice")
        if seen is None:
            figures["refused"] += "memory.sqlite3-wal" in error
            figures["changed"] += folder_state(case) != before
        else:
            figures["opened"] += 1
            figures["resurrected"] += seen
    return figures


def foreign_wal_experiment(folder: PathLike, *, pairs: int = 5, seed: int = 0) -> dict[str, Any]:
    """The `-wal` of database A (its writer killed) copied beside a closed database B, with or
    without A's `-shm`; and, as the control, each A opened with its own `-wal`.

    Returns:
        `pairs`, `refused` (with an error saying the WAL is another database's), `mixed` (B opened
        and showed A's records), `changed` (refusals after which any file differed), `own_opened`
        (A with its own WAL opened) and `own_lost` (acknowledged writes of A missing after it did).
    """
    rng = random.Random(seed)
    figures = {"pairs": pairs, "refused": 0, "mixed": 0, "changed": 0, "own_opened": 0, "own_lost": 0}
    for n in range(pairs):
        case = Path(folder) / f"pair-{n:04d}"
        case.mkdir()
        a, b = case / "a.sqlite3", case / "b.sqlite3"
        written = kill_writer(a, prefix=f"k{n:04d}", kill_after_acks=rng.randint(1, 30), user="alice")
        with MemoryStore(b, limits=limits_from(ROOMY_LIMITS)) as store:
            for number in range(rng.randint(1, 20)):
                store.put("bob", "s1", "episode", f"b{number}", f"bob's own value {number}")
        shutil.copy(f"{a}-wal", f"{b}-wal")
        if rng.random() < 0.5:
            shutil.copy(f"{a}-shm", f"{b}-shm")
        before = folder_state(case)
        seen, error = _open_or_refusal(b, "alice")
        if seen is None:
            figures["refused"] += "another database" in error
            figures["changed"] += folder_state(case) != before
        else:
            figures["mixed"] += seen > 0
        check = check_writes(a, written["acked"], user="alice")
        figures["own_opened"] += 1
        figures["own_lost"] += check["lost"]
    return figures


def _bundle(user: str, count: int, value_chars: int) -> str:
    at = "2026-01-01T00:00:00.000000Z"
    lines: list[dict[str, Any]] = [{"format": "memkit-export", "format_version": 1, "schema_version": 1,
                                    "user": user, "records": count, "events": 0}]
    lines += [{"type": "record", "kind": "episode", "key": f"e{n}", "value": f"{n} " + "x" * value_chars,
               "source_session": "load", "revision": 1, "created_at": at, "updated_at": at} for n in range(count)]
    return seal_bundle(lines)


def refused_write_experiment(folder: PathLike, *, caps: tuple[int, ...] = (262_144, 1_500_000),
                             factors: tuple[float, ...] = (2, 5), seed: int = 0) -> dict[str, Any]:
    """Fill a store to about half its size cap, then import bundles `factor` times the cap: each is
    refused whole. Measure the files on disk after every refusal.

    Returns:
        `refusals`, `largest_wal` (bytes of the `-wal` after a refusal), `largest_share` (database
        plus WAL after a refusal, as a share of the cap) and `over_cap` (refusals that left more on
        disk than the cap), `writes_after` (a put after each refusal succeeded).
    """
    rng = random.Random(seed)
    figures: dict[str, Any] = {"refusals": 0, "largest_wal": 0, "largest_share": 0.0, "over_cap": 0,
                               "writes_after": 0}
    for cap in caps:
        for factor in factors:
            path = Path(folder) / f"cap-{cap}-{factor}.sqlite3"
            limits = Limits().replace(max_db_bytes=cap, max_records_per_user=1_000_000, max_records_total=1_000_000)
            value_chars = rng.randint(200, 500)
            # the value, its folded copy, its trigram index; past ~1 KB a row keeps its tail on an overflow
            # page of its own (records are clustered by key from schema step 15): ~5.6 KB for 500
            per_record = (12 if value_chars > 450 else 5) * value_chars
            with MemoryStore(path, limits=limits) as store:
                store.import_records(_bundle("alice", cap // 2 // per_record, value_chars))
                with contextlib.suppress(QuotaError):
                    store.import_records(_bundle("bob", int(factor * cap) // per_record, value_chars))
                    continue  # not refused: no figure
                figures["refusals"] += 1
                wal = Path(f"{path}-wal").stat().st_size if Path(f"{path}-wal").exists() else 0
                on_disk = path.stat().st_size + wal
                figures["largest_wal"] = max(figures["largest_wal"], wal)
                figures["largest_share"] = max(figures["largest_share"], round(on_disk / cap, 2))
                figures["over_cap"] += on_disk > cap
                store.put("carol", "s1", "preference", "drink", "tea")
                figures["writes_after"] += 1
    return figures


@worker("create-loop")
def _create_loop_worker(payload: dict[str, Any]) -> None:
    """Create new stores `db-000000.sqlite3`, `db-000001.sqlite3`, ... in `folder` until killed."""
    folder = Path(payload["folder"])
    number = 0
    while True:
        MemoryStore(folder / f"db-{number:06d}.sqlite3").close()
        number += 1


def _partials(folder: Path) -> list[Path]:
    return sorted(entry for entry in folder.iterdir() if ".creating" in entry.name)


def killed_creators_experiment(folder: PathLike, *, kills: int = 10, seed: int = 0) -> dict[str, Any]:
    """Kill processes that are creating stores at random moments; open each database they were
    making again, and see what is left. One half-made file carries the pid of a live process.

    Returns:
        `kills`, `kills_leaving_files` (kills after which a half-made file was found), `found`
        (half-made files), `removed` (gone after the next open of their database), `left` (still
        there), `live_kept` (the live process's file is still there: 1 or 0).
    """
    rng = random.Random(seed)
    folder = Path(folder)
    figures = {"kills": kills, "kills_leaving_files": 0, "found": 0, "removed": 0, "left": 0, "live_kept": 0}
    for n in range(kills):
        case = folder / f"creators-{n:04d}"
        case.mkdir()
        process = start_worker("create-loop", {"folder": str(case)})
        try:
            deadline = time.monotonic() + WORKER_TIMEOUT_S
            while not any(case.glob("*.sqlite3")) and time.monotonic() < deadline:
                time.sleep(0.005)  # started: now land the kill anywhere in the next creations
            time.sleep(rng.uniform(0, 0.05))
        finally:
            process.send_signal(signal.SIGKILL)
            process.communicate()
        partials = _partials(case)
        figures["kills_leaving_files"] += bool(partials)
        figures["found"] += len(partials)
        for name in sorted({p.name.split(".sqlite3.")[0].lstrip(".") for p in partials}):
            MemoryStore(case / f"{name}.sqlite3").close()
        left = _partials(case)
        figures["left"] += len(left)
        figures["removed"] += len(partials) - len(left)
    live_case = folder / "live-creator"
    live_case.mkdir()
    live = start_worker("put", {"path": str(live_case / "other.sqlite3"), "user": "u", "key": "k", "value": "v",
                                "hang": True})
    try:
        read_answer(live)
        planted = live_case / f".memory.sqlite3.{live.pid}.1.creating"
        planted.write_bytes(b"being made by a live process")
        MemoryStore(live_case / "memory.sqlite3").close()
        figures["live_kept"] = int(planted.exists())
    finally:
        live.kill()
        live.communicate()
    return figures


def clock_experiment(folder: PathLike, *, writes: int = 200, seed: int = 0) -> dict[str, Any]:
    """Writes under a clock that jumps back (up to two hours) and forward at random.

    After every write, "newest first" (an empty search, a term search by scan and by the trigram
    index) is compared with the order the writes were committed in, and every record's
    `created_at` with its `updated_at`.

    Returns:
        `writes`, `steps_back`, `largest_step_back_s`, `searches` (compared), `out_of_order`
        (searches whose order was not commit order) and `created_after_updated` (records).
    """
    rng = random.Random(seed)
    clock = FakeClock()
    figures = {"writes": writes, "steps_back": 0, "largest_step_back_s": 0, "searches": 0, "out_of_order": 0,
               "created_after_updated": 0}
    order: list[str] = []  # keys, oldest write first
    with MemoryStore(Path(folder) / "clock.sqlite3", clock=clock) as store:
        for number in range(writes):
            step = rng.choice([-1, 1, 1]) * rng.uniform(0, 7200)
            if step < 0:
                figures["steps_back"] += 1
                figures["largest_step_back_s"] = max(figures["largest_step_back_s"], round(-step))
            clock.advance(seconds=step)
            key = f"k{rng.randrange(40)}"
            if key in order and rng.random() < 0.2:
                store.delete("alice", "episode", key)
                order.remove(key)
            else:
                store.put("alice", "s1", "episode", key, f"tea {number}")
                order = [k for k in order if k != key] + [key]
            newest = list(reversed(order))
            for threshold in (10**9, 0):
                store.fts_min_user_rows = threshold
                for query in ("", "tea"):
                    figures["searches"] += 1
                    found = [r["key"] for r in store.search("alice", query, limit=50)]
                    figures["out_of_order"] += found != newest
            store.fts_min_user_rows = MemoryStore.fts_min_user_rows
        figures["created_after_updated"] = sum(
            r["created_at"] > r["updated_at"] for r in store.records("alice"))
    return figures
