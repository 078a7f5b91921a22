"""A separate process for the store tests: racing writers, a lock holder, restarts.

Run as `python tests/_store_worker.py MODE ARGS...`; it prints one JSON line on stdout. The tests
start it with `sys.executable`, so each run is a real, fresh interpreter with its own connection.

Modes:
    race PATH USER PREFIX COUNT PER_USER TOTAL GO
        Wait until the file GO exists (so all racers start together), then put COUNT new keys
        `PREFIX0`, `PREFIX1`, ... for USER under the given quotas. Prints the outcome of each:
        "ok" or "quota".
    put PATH USER KEY VALUE
        Put one preference and print the record.
    put-and-hang PATH USER KEY VALUE
        Put one preference, print the record, then sleep until killed (the store is never closed,
        so the write is only in the -wal file, not checkpointed).
    get PATH USER KEY
        Print the preference, or null.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

# Importable when run as a plain script from any folder: the package sits one level up.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memkit.errors import QuotaError  # noqa: E402
from memkit.limits import Limits  # noqa: E402
from memkit.store import MemoryStore  # noqa: E402


def race(path: str, user: str, prefix: str, count: str, per_user: str, total: str, go: str) -> list[str]:
    limits = Limits().replace(max_records_per_user=int(per_user), max_records_total=int(total),
                              busy_timeout_ms=30_000)
    outcomes = []
    with MemoryStore(path, limits=limits, synchronous="NORMAL", check_integrity=False) as store:
        deadline = time.monotonic() + 30
        while not os.path.exists(go):
            if time.monotonic() > deadline:
                raise SystemExit("the start signal never came")
            time.sleep(0.002)
        for number in range(int(count)):
            try:
                store.put(user, "race", "preference", f"{prefix}{number}", f"value {number}")
                outcomes.append("ok")
            except QuotaError:
                outcomes.append("quota")
    return outcomes


def main(argv: list[str]) -> None:
    mode, args = argv[0], argv[1:]
    if mode == "race":
        print(json.dumps(race(*args)))
    elif mode == "put":
        path, user, key, value = args
        with MemoryStore(path) as store:
            print(json.dumps(store.put(user, "first-process", "preference", key, value)))
    elif mode == "put-and-hang":
        path, user, key, value = args
        store = MemoryStore(path)
        print(json.dumps(store.put(user, "first-process", "preference", key, value)), flush=True)
        time.sleep(60)
    elif mode == "get":
        path, user, key = args
        with MemoryStore(path) as store:
            print(json.dumps(store.get(user, "preference", key)))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
