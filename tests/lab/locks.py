"""Another process holds the database's write lock: what waits, what is refused, what goes on.

The holder takes the lock the way the kit itself writes, through `MemoryStore.transaction()`
(`BEGIN IMMEDIATE`), writes through the store's API and never commits; it dies holding the lock,
like a crashed writer. In WAL mode readers go on meanwhile; writers wait up to their busy timeout
and are then refused with a `LockedError`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Any
from collections.abc import Iterator

from memkit.errors import MemkitError, StoreError
from memkit.store import MemoryStore
from .workers import ROOMY_LIMITS, PathLike, answer, expect, limits_from, start_worker, worker

HOLDER = "holder"
"""The user the lock holder writes for (its record is never committed)."""


@contextlib.contextmanager
def holding_write_lock(path: PathLike, *, seconds: float = 60.0,
                       overwrite_user: str | None = None) -> Iterator[dict[str, Any]]:
    """While the `with` block runs, another process holds the write lock of the database at `path`.

    The holder opens the store, enters `store.transaction()`, puts one record it never commits
    (user `holder`, key `half-written`) and, with `overwrite_user`, overwrites each of that user's
    values without committing either. It keeps the lock for `seconds` (then exits without
    committing) or until the block ends, when it is killed with SIGKILL, like a crashed writer.

    (In WAL mode `BEGIN EXCLUSIVE` takes the same lock as `BEGIN IMMEDIATE`: readers go on either way.)

    Yields:
        `{"pid": ...}` of the holder. `info["exited"]` is set afterwards.
    """
    process = start_worker("hold", {"path": str(Path(path).absolute()), "seconds": seconds,
                                    "overwrite_user": overwrite_user})
    info: dict[str, Any] = {"pid": process.pid}
    try:
        expect(process, "locked")
        yield info
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
        process.communicate()
        info["exited"] = process.returncode


@worker("hold")
def _hold_worker(payload: dict[str, Any]) -> None:
    store = MemoryStore(payload["path"], limits=limits_from(ROOMY_LIMITS), check_integrity=False)
    with store.transaction():
        store.put(HOLDER, "hold", "preference", "half-written", "never committed")
        if payload.get("overwrite_user"):
            user = payload["overwrite_user"]
            for record in store.records(user):
                store.put(user, "hold", record["kind"], record["key"], "overwritten, never committed")
        answer("locked")
        time.sleep(payload["seconds"])
        os._exit(0)  # no commit, no rollback, no close: the way a process dies holding a lock


@worker("write")
def _write_worker(payload: dict[str, Any]) -> dict[str, Any]:
    """One write of alice's preference `drink` (`op`: put, delete or forget) with the payload's
    limits (its busy timeout): `outcome` ("written", or the documented family of the memkit error:
    StoreError for a LockedError), `class` (the error's exact class), `error` and `seconds` (how long
    the attempt took, opening included)."""
    started = time.monotonic()
    try:
        with MemoryStore(payload["path"], limits=limits_from(payload["limits"])) as store:
            if payload["op"] == "put":
                store.put("alice", "other-process", "preference", "drink", "written while locked")
            elif payload["op"] == "delete":
                store.delete("alice", "preference", "drink")
            else:
                store.forget_user("alice")
        outcome, error, kind = "written", "", ""
    except MemkitError as exc:
        # The documented family (a LockedError is a StoreError), and the exact class beside it.
        family = StoreError if isinstance(exc, StoreError) else type(exc)
        outcome, error, kind = family.__name__, str(exc), type(exc).__name__
    return {"outcome": outcome, "error": error, "class": kind, "seconds": time.monotonic() - started}
