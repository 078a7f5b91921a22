"""SIGKILL in the middle of a stream of confirmed writes, and the check that nothing confirmed was lost.

A writer process puts one value after another and prints `ack N REVISION` right after each `put`
returned, i.e. after its commit: only then may it tell anyone the write is done. The parent kills
it with SIGKILL at a moment of its choosing (often inside the next write, or its commit). The
checker then opens the file the way the next session would and proves that every acknowledged
write is there, whole, and that nothing is half-written.
"""

from __future__ import annotations

import json
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any
from collections.abc import Iterable, Sequence

from memkit.store import MemoryStore, inspect_file
from .workers import ROOMY_LIMITS, WORKER_TIMEOUT_S, PathLike, answer, expect, limits_from, start_worker, worker


def crash_value(key: str, value_chars: int = 64) -> str:
    """The value the crash writer stores under `key`: derived from the key, so a checker can verify it."""
    seed = f"{key}|"
    return (seed * (value_chars // len(seed) + 1))[:value_chars]


def stream_writes(path: PathLike, *, user: str, session: str, kill_after_acks: int,
                  ops: Sequence[Sequence[str]] | None = None, prefix: str | None = None, max_writes: int = 100_000,
                  value_chars: int = 64, synchronous: str = "FULL", delay_s: float = 0.0,
                  wait_when_done: bool = False, limits: dict[str, int] | None = None) -> dict[str, Any]:
    """Start a writer that streams confirmed writes, read `kill_after_acks` acknowledgements, wait
    `delay_s`, and kill it with SIGKILL (unless it has already ended).

    The writes are `ops` ((kind, key, value) each), or, with `prefix`, up to `max_writes` episodes
    `{prefix}-000000`, `{prefix}-000001`, ... with the value `crash_value(key, value_chars)`.
    Acknowledgements that were already in the pipe when the writer died still count: the writer
    said them, so a user could have seen them.

    Args:
        wait_when_done: the writer waits to be killed after its last write instead of exiting,
            so every round ends with a SIGKILL.
        limits: `Limits` fields of the writer's store (default: out of the way).

    Returns:
        `pid`, `acks` (the acknowledged (write number, revision) pairs, in order), `done` (the
        writer had finished every write before the kill), `returncode` (-9 when killed),
        `killed` (bool) and `stderr`.
    """
    payload = {"path": str(Path(path).absolute()), "user": user, "session": session, "synchronous": synchronous,
               "limits": ROOMY_LIMITS if limits is None else limits, "wait": wait_when_done,
               "ops": [list(op) for op in ops] if ops is not None else None,
               "generate": {"prefix": prefix, "count": max_writes, "value_chars": value_chars} if ops is None else None}
    process = start_worker("stream", payload)
    lines: list[str] = []
    assert process.stdout is not None and process.stderr is not None
    try:
        expect(process, "ready")
        while len(lines) < kill_after_acks:
            line = process.stdout.readline()
            if not line.startswith("ack "):
                lines.append(line)
                break
            lines.append(line)
        if delay_s:
            time.sleep(delay_s)  # land the kill anywhere: in a put, a commit, a checkpoint
        killed = process.poll() is None
        if killed:
            process.send_signal(signal.SIGKILL)
        # Read the rest through the same buffered file that readline() used: communicate() reads the
        # pipe directly and would skip acknowledgements readline() had already buffered, leaving them
        # unchecked (a fast writer, e.g. synchronous="NORMAL", puts many lines in one read).
        lines += process.stdout.read().splitlines()
        stderr = process.stderr.read()
        process.wait(timeout=WORKER_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    acks = [(int(line.split()[1]), int(line.split()[2])) for line in lines if line.startswith("ack ")]
    return {"pid": process.pid, "acks": acks, "done": any(line.strip() == '"done"' for line in lines),
            "returncode": process.returncode, "killed": killed and process.returncode == -signal.SIGKILL,
            "stderr": stderr}


@worker("stream")
def _stream_worker(payload: dict[str, Any]) -> None:
    ops: Iterable[Sequence[str]] = payload["ops"] or _generated(**payload["generate"])
    with MemoryStore(payload["path"], limits=limits_from(payload["limits"]), synchronous=payload["synchronous"],
                     check_integrity=False) as store:
        answer("ready")
        for number, (kind, key, value) in enumerate(ops):
            record = store.put(payload["user"], payload["session"], kind, key, value)
            # Only now, after the commit, may the writer tell anyone the write is done.
            sys.stdout.write(f"ack {number} {record['revision']}\n")
            sys.stdout.flush()
        answer("done")
        if payload["wait"]:
            sys.stdin.read()  # wait to be killed, so every round ends the same way


def _generated(prefix: str, count: int, value_chars: int) -> Iterable[tuple[str, str, str]]:
    for number in range(count):
        key = f"{prefix}-{number:06d}"
        yield "episode", key, crash_value(key, value_chars)


def kill_writer(path: PathLike, *, prefix: str, kill_after_acks: int, user: str = "crash",
                synchronous: str = "FULL", value_chars: int = 64, delay_s: float = 0.0,
                max_writes: int = 100_000) -> dict[str, Any]:
    """Start a writer that streams confirmed writes, and kill it with SIGKILL mid-stream.

    The writer puts episodes `{prefix}-000000`, `{prefix}-000001`, ... (value `crash_value(key)`)
    and acknowledges each right after its `put` returned, i.e. after the commit. Once this function
    has read `kill_after_acks` acknowledgements it waits `delay_s` and sends SIGKILL: the writer is
    then busy with its next write (often inside a commit).

    Args:
        path: the database file (created by the writer if missing).
        prefix: names this round's keys and session; use a new one per round.
        kill_after_acks: acknowledgements to read before the kill.
        user: the user written to.
        synchronous: "FULL" or "NORMAL" (both survive a process kill; only FULL survives power loss).
        value_chars: size of each value.
        delay_s: extra time between the last read acknowledgement and the kill.
        max_writes: the writer stops by itself after this many (a safety bound).

    Returns:
        `prefix`, `pid`, `acked` (the acknowledged keys, in order), `acks` (their number),
        `returncode` (-9 when killed) and `killed` (bool; False if the writer finished first).
    """
    stream = stream_writes(path, user=user, session=prefix, prefix=prefix, max_writes=max_writes,
                           value_chars=value_chars, synchronous=synchronous, kill_after_acks=kill_after_acks,
                           delay_s=delay_s)
    acked = [f"{prefix}-{number:06d}" for number, _ in stream["acks"]]
    return {"prefix": prefix, "pid": stream["pid"], "acked": acked, "acks": len(acked),
            "returncode": stream["returncode"], "killed": stream["killed"]}


def check_writes(path: PathLike, acked: Iterable[str], *, user: str = "crash",
                 prefixes: Iterable[str] | None = None, value_chars: int = 64) -> dict[str, Any]:
    """After the crash: is every acknowledged write there, whole, and is the file sound?

    Opens the file the way the next session would (a new `MemoryStore`, which runs `quick_check`),
    then compares the crash writer's records of `user`, and their history (read from the store's
    export bundle), with the acknowledgements.

    Args:
        path: the database file.
        acked: every key the writers acknowledged.
        user: the crash writers' user.
        prefixes: the rounds to look at (default: the prefixes of the acknowledged keys).
        value_chars: the writers' value size, to recompute the expected values.

    Returns:
        `acknowledged`, `present` (acknowledged and found with the right value), `lost`
        (acknowledged but missing or wrong), `unacknowledged_commits` (committed but killed before
        the ack: allowed, at most one per kill), `half_written` (a record without its create event,
        an event without its record, or a value that is not what the writer wrote), `integrity`
        (`PRAGMA integrity_check`) and `counters_consistent`, plus `lost_keys` and `half_written_keys`.
    """
    acked = list(acked)
    rounds = set(prefixes) if prefixes is not None else {key.rsplit("-", 1)[0] for key in acked}

    def in_rounds(key: str) -> bool:
        return key.rsplit("-", 1)[0] in rounds

    with MemoryStore(path, limits=limits_from(ROOMY_LIMITS)) as store:
        records = {r["key"]: r for r in store.records(user, "episode") if in_rounds(r["key"])}
        events: dict[str, int] = {}
        for line in store.export_user(user).splitlines():
            item = json.loads(line)
            if (item.get("type"), item.get("kind"), item.get("action")) == ("event", "episode", "create") \
                    and in_rounds(item["key"]):
                events[item["key"]] = events.get(item["key"], 0) + 1
    lost = [key for key in acked if key not in records or records[key]["value"] != crash_value(key, value_chars)]
    half = sorted(
        {key for key, record in records.items()
         if events.get(key) != 1 or record["value"] != crash_value(key, value_chars)}
        | {key for key in events if key not in records}
    )
    state = inspect_file(path)
    acked_set = set(acked)
    return {
        "acknowledged": len(acked), "present": len(acked) - len(lost), "lost": len(lost),
        "unacknowledged_commits": sum(1 for key in records if key not in acked_set),
        "half_written": len(half), "integrity": state["integrity"],
        "counters_consistent": state["counters_consistent"], "lost_keys": lost, "half_written_keys": half,
    }


def crash_experiment(path: PathLike, *, kills: int = 5, seed: int = 0, min_acks: int = 3, max_acks: int = 30,
                     max_delay_s: float = 0.005, user: str = "crash", synchronous: str = "FULL",
                     value_chars: int = 64) -> dict[str, Any]:
    """Kill a streaming writer `kills` times on the same file, checking the file after every restart.

    Round `i` writes keys `k{i:04d}-NNNNNN` and is killed after a number of acknowledgements drawn
    from [`min_acks`, `max_acks`] plus a delay from [0, `max_delay_s`] (both from `seed`, so a run
    can be repeated; the exact moment the kill lands still depends on the machine).

    Returns:
        A summary: `kills`, `acknowledged`, `lost`, `half_written`, `unacknowledged_commits`,
        `integrity` ("ok" if every check said ok) and `counters_consistent` (all rounds), and
        `rounds`: per round the `kill_writer` result (without the key list) and its `check_writes`
        counts.
    """
    rng = random.Random(seed)
    rounds, all_acked = [], []
    for number in range(kills):
        prefix = f"k{number:04d}"
        crash = kill_writer(path, prefix=prefix, kill_after_acks=rng.randint(min_acks, max_acks), user=user,
                            synchronous=synchronous, value_chars=value_chars, delay_s=rng.uniform(0, max_delay_s))
        all_acked += crash["acked"]
        check = check_writes(path, crash["acked"], user=user, prefixes=[prefix], value_chars=value_chars)
        rounds.append({"round": number + 1, "prefix": prefix, "killed": crash["killed"],
                       "returncode": crash["returncode"], "acks": crash["acks"],
                       **{k: v for k, v in check.items() if not k.endswith("_keys")}})
    final = check_writes(path, all_acked, user=user, prefixes=[r["prefix"] for r in rounds], value_chars=value_chars)
    return {
        "kills": sum(1 for r in rounds if r["killed"]), "acknowledged": final["acknowledged"],
        "lost": final["lost"], "half_written": final["half_written"],
        "unacknowledged_commits": final["unacknowledged_commits"],
        "integrity": "ok" if all(r["integrity"] == "ok" for r in rounds) and final["integrity"] == "ok" else "damaged",
        "counters_consistent": all(r["counters_consistent"] for r in rounds) and final["counters_consistent"],
        "rounds": rounds,
    }
