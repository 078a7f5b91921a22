"""Separate processes for the reliability lab (tests/test_reliability.py).

Run as `python tests/_reliability_worker.py MODE`, with one JSON payload line on stdin; the worker
answers with JSON lines on stdout. The tests start it with `sys.executable`, so every run is a real,
fresh interpreter with its own SQLite connection.

Modes:
    stream   Put the payload's `ops` ([kind, key, value] each) for `user` in order, printing
             `ack N REVISION` right after each put returned (after its commit). Prints "ready"
             first; after the last op it waits for stdin to close. The test kills it with SIGKILL.
    race     Open the store, print "ready", wait for "go" on stdin, then put each of `ops`
             ([user, kind, key, value]) and answer with one outcome per op: ok (with the revision),
             quota, busy (the documented "locked" StoreError) or unexplained (anything else).
    write    Try one write (`op`: put, delete or forget) with the given busy timeout and answer with
             its outcome and the time it took.
    dump     Open the store as a restarted session would and answer with everything `user` can
             reach: records, searches, histories, the export bundle, and every model request of
             a `MemoryAgent` asked `tasks` (the fixture model records them).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

# Importable when run as a plain script from any folder: the package sits one level up.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memkit.errors import MemkitError, QuotaError, StoreError  # noqa: E402
from memkit.experiments import _answer  # noqa: E402  (the workers' one-JSON-line reply)
from memkit.experiments import limits_from as _limits  # noqa: E402
from memkit.store import MemoryStore  # noqa: E402


def stream(payload: dict[str, Any]) -> None:
    with MemoryStore(payload["path"], limits=_limits(payload["limits"]), synchronous=payload["synchronous"],
                     check_integrity=False) as store:
        _answer("ready")
        for number, (kind, key, value) in enumerate(payload["ops"]):
            record = store.put(payload["user"], payload["session"], kind, key, value)
            # Only now, after the commit, may the writer tell anyone the write is done.
            sys.stdout.write(f"ack {number} {record['revision']}\n")
            sys.stdout.flush()
        _answer("done")
        sys.stdin.read()  # wait to be killed, so every round ends the same way


def race(payload: dict[str, Any]) -> list[dict[str, Any]]:
    outcomes = []
    with MemoryStore(payload["path"], limits=_limits(payload["limits"]), synchronous="NORMAL",
                     check_integrity=False) as store:
        _answer("ready")
        if sys.stdin.readline().strip() != "go":
            raise SystemExit("no start signal")
        for user, kind, key, value in payload["ops"]:
            try:
                record = store.put(user, payload["session"], kind, key, value)
                outcomes.append({"outcome": "ok", "revision": record["revision"]})
            except QuotaError as exc:
                outcomes.append({"outcome": "quota", "error": str(exc)})
            except StoreError as exc:
                busy = "locked by another writer" in str(exc)
                outcomes.append({"outcome": "busy" if busy else "unexplained", "error": str(exc)})
            except Exception as exc:  # noqa: BLE001 - reported, and the test fails on it
                outcomes.append({"outcome": "unexplained", "error": f"{type(exc).__name__}: {exc}"})
    return outcomes


def write(payload: dict[str, Any]) -> dict[str, Any]:
    started = time.monotonic()
    try:
        with MemoryStore(payload["path"], limits=_limits(payload["limits"])) as store:
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


def dump(payload: dict[str, Any]) -> dict[str, Any]:
    import asyncio

    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]  # see memkit.experiments
    from memkit.agent import MemoryAgent
    from memkit.models import FixtureModel

    user = payload["user"]
    with MemoryStore(payload["path"]) as store:
        records = store.records(user)
        searches = {query: store.search(user, query, limit=50) for query in payload["queries"]}
        histories = [store.history(user, kind, key) for kind, key in payload["keys"]]
        model = FixtureModel()
        agent = MemoryAgent(store, user, "restarted", model)
        for task in payload["tasks"]:
            asyncio.run(agent.ask(task))
        return {"records": records, "searches": searches, "histories": histories,
                "export": store.export_user(user), "requests": model.requests}


MODES = {"stream": stream, "race": race, "write": write, "dump": dump}


def main(argv: list[str]) -> None:
    if len(argv) != 1 or argv[0] not in MODES:
        raise SystemExit(f"usage: python {Path(__file__).name} {{{','.join(MODES)}}} < payload.json")
    result = MODES[argv[0]](json.loads(sys.stdin.readline()))
    if result is not None:
        _answer(result)


if __name__ == "__main__":
    main(sys.argv[1:])
