"""Racing writers: several processes write to one file at the same moment, at the quota's edge.

`run_racers` is the one harness: each writer process opens the store, says "ready", waits until
every writer is ready, and then puts its own list of writes, answering with one outcome per write.
`race_writers` is the classroom race built on it: the kit's writer against a naive one.

The kit's writer calls `MemoryStore.put`, whose quota check and insert share one `BEGIN IMMEDIATE`
transaction. The naive writer checks the count in one read, sleeps, then inserts in a separate
write (through a store whose own quota is out of the way): the check-then-insert race.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any
from collections.abc import Sequence

from memkit.errors import LockedError, QuotaError, StoreError
from memkit.store import MemoryStore, inspect_file
from .workers import PathLike, answer, limits_from, run_together, start_worker, wait_for_go, worker

Op = Sequence[str]
"""One write of a racer: (user, kind, key, value)."""

OUTCOMES = ("ok", "quota", "busy", "unexplained")
"""What a racer's write can come to: stored, refused by a quota, refused because the file stayed
locked past the busy timeout (`LockedError`), or anything else (a bug: reported with its error)."""


def run_racers(path: PathLike, plans: Sequence[Sequence[Op]], *, limits: dict[str, int] | None = None,
               naive: bool = False, pause_s: float = 0.0, session: str = "race") -> list[list[dict[str, Any]]]:
    """Start one writer process per plan on the store at `path` and let them all go at once.

    Args:
        path: the database file (the writers create it if missing, racing each other at that too).
        plans: per writer, its writes in order: (user, kind, key, value) each.
        limits: `Limits` fields of the writers' stores (the quotas being raced for).
        naive: race the naive check-then-insert writer instead of the kit's.
        pause_s: each writer's pause before each write (for the naive writer: between its check and
            its insert, which makes the race show up reliably instead of now and then).
        session: the writers' session is `{session}{writer number}`.

    Returns:
        Per writer, per write: `outcome` (one of `OUTCOMES`), and `revision` (ok) or `error`.

    Raises:
        RuntimeError: a writer failed or did not answer.
    """
    processes = [
        start_worker("race", {"path": str(Path(path).absolute()), "ops": [list(op) for op in ops], "limits": limits,
                              "naive": naive, "pause_s": pause_s, "session": f"{session}{number}"})
        for number, ops in enumerate(plans)
    ]
    return run_together(processes, "race writer")


@worker("race")
def _race_worker(payload: dict[str, Any]) -> list[dict[str, Any]]:
    limits, naive, pause = limits_from(payload["limits"]), payload["naive"], payload["pause_s"]
    # The naive writer's store has its quota out of the way: the naive check below is the only guard.
    store_limits = limits.replace(max_records_per_user=10**6, max_records_total=10**6) if naive else limits
    outcomes: list[dict[str, Any]] = []
    with MemoryStore(payload["path"], limits=store_limits, synchronous="NORMAL", check_integrity=False) as store:
        answer("ready")
        wait_for_go()
        for user, kind, key, value in payload["ops"]:
            try:
                if naive:
                    # Check (one read) ... then write (another transaction): the classic race.
                    exists = store.get(user, kind, key) is not None
                    counts = store.users()
                    full = (counts.get(user, 0) >= limits.max_records_per_user
                            or sum(counts.values()) >= limits.max_records_total)
                    time.sleep(pause)
                    if full and not exists:
                        raise QuotaError(f"user {user!r} is at the quota")
                elif pause:
                    time.sleep(pause)
                record = store.put(user, payload["session"], kind, key, value)
                outcomes.append({"outcome": "ok", "revision": record["revision"]})
            except QuotaError as exc:
                outcomes.append({"outcome": "quota", "error": str(exc)})
            except LockedError as exc:
                outcomes.append({"outcome": "busy", "error": str(exc)})
            except StoreError as exc:
                outcomes.append({"outcome": "unexplained", "error": str(exc)})
            except Exception as exc:
                outcomes.append({"outcome": "unexplained", "error": f"{type(exc).__name__}: {exc}"})
    return outcomes


def race_writers(path: PathLike, *, naive: bool, writers: int = 4, new_keys_per_writer: int = 2,
                 updates_per_writer: int = 0, quota: int = 8, total_quota: int = 1024,
                 prefill: int | None = None, pause_s: float = 0.05, user: str = "racer",
                 seed: int = 0) -> dict[str, Any]:
    """Start `writers` processes that write for one user at the same moment, and count what got in.

    Before the race the user is filled to `prefill` records (`base-0`, `base-1`, ...), by default
    `quota - 1`: one free slot, many writers. Each writer then does `new_keys_per_writer` creates
    of its own keys (`w{i}-{n}`) and `updates_per_writer` updates of prefilled keys, in an order
    shuffled by `seed`, pausing `pause_s` before each write.

    The kit's writer (`naive=False`) calls `MemoryStore.put`, whose quota check and insert share
    one `BEGIN IMMEDIATE` transaction. The naive writer checks the count in one read, sleeps
    `pause_s`, then inserts in a separate write (through a store whose own quota is out of the way).
    The sleep widens the gap between check and insert: the gap exists in any check-then-insert,
    the sleep only makes the race show up reliably instead of now and then.

    All writers open their store, report ready, and start only when every one of them is ready.

    Args:
        path: the database file; created if missing. Use a fresh file per race.
        naive: which writer to race.
        writers: how many processes.
        new_keys_per_writer: creates per writer.
        updates_per_writer: updates of existing (prefilled) keys per writer; needs `prefill >= 1`.
        quota: the per-user record quota. total_quota: the global one.
        prefill: records the user holds before the race (default `quota - 1`).
        pause_s: the pause before each write (for the naive writer: between check and insert).
        user: the racing user. seed: orders each writer's creates and updates.

    Returns:
        A dict: `writer` ("naive" or "kit"), the parameters, `accepted_creates`,
        `refused_creates`, `accepted_updates`, `refused_updates`, `errors` (busy or failed
        writes), `stored` (records the user holds afterwards), `over_quota` (how far above the
        quota), `exceeded` (bool), `counters_consistent` and `integrity` (from the file
        afterwards), and `outcomes` (per writer, per write: op, key, outcome).
    """
    prefill = quota - 1 if prefill is None else prefill
    if updates_per_writer and prefill < 1:
        raise ValueError("updates need existing keys: set prefill >= 1")
    path = Path(path).absolute()
    limits = {"max_records_per_user": quota, "max_records_total": total_quota, "busy_timeout_ms": 30_000}
    with MemoryStore(path, limits=limits_from(limits).replace(max_records_per_user=max(quota, prefill),
                                                                 max_records_total=max(total_quota, prefill))) as store:
        for number in range(prefill):
            store.put(user, "prefill", "preference", f"base-{number}", f"prefilled {number}")
    rng = random.Random(seed)
    plans = []
    for index in range(writers):
        ops = [["create", f"w{index}-{n}"] for n in range(new_keys_per_writer)]
        ops += [["update", f"base-{rng.randrange(prefill)}"] for _ in range(updates_per_writer)]
        rng.shuffle(ops)
        plans.append(ops)
    results = run_racers(path, [[(user, "preference", key, f"writer {index} {op} {key}") for op, key in ops]
                                for index, ops in enumerate(plans)],
                         limits=limits, naive=naive, pause_s=pause_s, session="w")
    outcomes = [[{"op": op, "key": key, "outcome": result["outcome"]}
                 for (op, key), result in zip(ops, writer, strict=False)]
                for ops, writer in zip(plans, results, strict=False)]
    flat = [o for writer_outcomes in outcomes for o in writer_outcomes]

    def count(op: str, outcome: str) -> int:
        return sum(1 for o in flat if o["op"] == op and o["outcome"] == outcome)

    state = inspect_file(path)
    with MemoryStore(path, limits=limits_from({"max_records_per_user": 10**6, "max_records_total": 10**6})) as store:
        stored = store.users().get(user, 0)
    return {
        "writer": "naive" if naive else "kit", "writers": writers, "quota": quota, "total_quota": total_quota,
        "prefill": prefill, "new_keys_per_writer": new_keys_per_writer, "updates_per_writer": updates_per_writer,
        "pause_s": pause_s, "seed": seed,
        "accepted_creates": count("create", "ok"), "refused_creates": count("create", "quota"),
        "accepted_updates": count("update", "ok"), "refused_updates": count("update", "quota"),
        "errors": sum(1 for o in flat if o["outcome"] not in ("ok", "quota")),
        "stored": stored, "over_quota": max(0, stored - quota), "exceeded": stored > quota,
        "counters_consistent": state["counters_consistent"], "integrity": state["integrity"],
        "outcomes": outcomes,
    }
