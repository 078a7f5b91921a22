"""Scaling out, the writes: write throughput of SQLite and PostgreSQL with several writer processes
(the writer curve), and writer processes racing one user at its quota on either backend.

A writer is a `python -m classroom.lab scaling-writer` process with its own store (its own SQLite
connection to the file, or its own PostgreSQL connection pool); `_Writers` runs them in rounds.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any
from collections.abc import Mapping, Sequence

from memkit.errors import LockedError, QuotaError, StoreError, ValidationError
from memkit.store import Store, is_database_url, open_store
from .workers import (ROOMY_LIMITS, WORKER_TIMEOUT_S, PathLike, answer, expect, limits_from, read_answer, send,
                      start_worker, stop, worker)

WRITER_COUNTS = (1, 2, 4, 8)
"""The writer curve's process counts."""

DEFAULT_SECONDS = 2.0
"""How long each writer writes when neither `seconds` nor `puts` is given."""

def backend_of(target: PathLike) -> str:
    """"PostgreSQL" for a `postgresql://` URL, "SQLite" for a path."""
    return "PostgreSQL" if is_database_url(target) else "SQLite"


def store_options(target: str, schema: str | None, limits: Mapping[str, int] | None,
                  pool_size: int) -> dict[str, Any]:
    """`open_store` options for `target`: the limits, and for a URL the pool size and the schema."""
    options: dict[str, Any] = {"limits": limits_from(dict(limits or {}))}
    if is_database_url(target):
        options["pool_size"] = pool_size
        if schema is not None:
            options["schema"] = schema
    return options


def open_target(payload: Mapping[str, Any]) -> Store:
    """A worker's store: `open_store(payload["target"])` with the payload's schema, limits and pool size."""
    target = payload["target"]
    return open_store(target, **store_options(target, payload.get("schema"), payload.get("limits"),
                                               payload.get("pool_size", 1)))


def prepare_store(target: PathLike, *, schema: str | None = None, limits: Mapping[str, int] | None = None) -> None:
    """Create the store's tables at `target` once, before processes race to open it."""
    target = os.fspath(target)
    open_store(target, **store_options(target, schema, limits, 1)).close()


# -- writer processes: quotas racing, and the writer curve ----------------------------------------------


class _Writers:
    """Writer processes with a store each, ready; each round starts some of them together.

    A round sends its writers one JSON line each (their work) as close together as the pipes
    allow, then collects one answer from each. Started once, writers serve many rounds, so the
    writer curve does not pay an interpreter start per point.
    """

    def __init__(self, payloads: Sequence[dict[str, Any]], *, wait: bool = True) -> None:
        self.processes = [start_worker("scaling-writer", payload) for payload in payloads]
        if wait:
            self.wait_ready()

    def wait_ready(self) -> None:
        """Wait until every writer has opened its store and said "ready" (all are stopped on a failure)."""
        try:
            for process in self.processes:
                expect(process, "ready")
        except BaseException:
            self.close()
            raise

    def round(self, work: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Give writer i `work[i]` (the first len(work) writers), all at once; their answers."""
        chosen = self.processes[:len(work)]
        for process, job in zip(chosen, work, strict=False):
            send(process, json.dumps(job))
        answers: list[dict[str, Any]] = [read_answer(process) for process in chosen]
        failed = [a["failed"] for a in answers if "failed" in a]
        if failed:
            raise RuntimeError(f"a scaling writer failed: {failed[0]}")
        return answers

    def close(self) -> None:
        """End every writer (EOF on stdin ends its loop) and reap it."""
        for process in self.processes:
            if process.poll() is None and process.stdin is not None:
                try:
                    process.stdin.close()
                    process.wait(timeout=WORKER_TIMEOUT_S)
                except (OSError, subprocess.TimeoutExpired):
                    pass
            stop(process)

    def __enter__(self) -> _Writers:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _outcome(store: Store, user: str, kind: str, key: str, value: str) -> dict[str, Any]:
    try:
        return {"outcome": "ok", "revision": store.put(user, "scaling", kind, key, value)["revision"]}
    except QuotaError:
        return {"outcome": "quota"}
    except LockedError:
        return {"outcome": "busy"}
    except StoreError as exc:
        return {"outcome": "error", "error": str(exc)}


def _write_for(store: Store, user: str, first: int, seconds: float | None, count: int | None) -> dict[str, Any]:
    """Put new episodes `e{first}`, `e{first+1}`, ... for `user` until `seconds` pass or `count` are confirmed."""
    done = busy = errors = 0
    start = time.monotonic()  # CLOCK_MONOTONIC: one clock for every process of the machine
    deadline = start + seconds if seconds is not None else None
    while (deadline is None or time.monotonic() < deadline) and (count is None or done < count):
        number = first + done + busy + errors
        result = _outcome(store, user, "episode", f"e{number}", f"episode {number} of {user}")
        if result["outcome"] == "ok":
            done += 1
        elif result["outcome"] == "busy":
            busy += 1
        else:
            errors += 1
    return {"puts": done, "busy": busy, "errors": errors, "start": start, "end": time.monotonic(),
            "next": first + done + busy + errors}


@worker("scaling-writer")
def _writer_worker(payload: dict[str, Any]) -> None:
    """Open the store, say "ready", then do each JSON line of work from stdin until EOF."""
    next_key = 0
    with open_target(payload) as store:
        answer("ready")
        for line in sys.stdin:
            job = json.loads(line)
            try:
                if "ops" in job:
                    answer({"outcomes": [_outcome(store, *op) for op in job["ops"]]})
                else:
                    result = _write_for(store, payload["user"], next_key, job.get("seconds"), job.get("puts"))
                    next_key = result["next"]
                    answer(result)
            except Exception as exc:
                answer({"failed": f"{type(exc).__name__}: {exc}"})


def _writers_for(target: str, count: int, schema: str | None, *, wait: bool = True) -> _Writers:
    limits = {**ROOMY_LIMITS, "busy_timeout_ms": 60_000}
    prepare_store(target, schema=schema, limits=limits)
    return _Writers([{"target": target, "schema": schema, "limits": limits, "user": f"writer-{n}"}
                     for n in range(1, count + 1)], wait=wait)


def _throughput(target: str, writers: _Writers, count: int, seconds: float | None, puts: int | None) -> dict[str, Any]:
    results = writers.round([{"seconds": seconds, "puts": puts}] * count)
    done = sum(r["puts"] for r in results)
    span = max(r["end"] for r in results) - min(r["start"] for r in results)
    per_put = [1000 * (r["end"] - r["start"]) / r["puts"] for r in results if r["puts"]]
    return {"backend": backend_of(target), "writers": count, "puts": done, "seconds": round(span, 3),
            "puts_per_s": round(done / span, 1) if span > 0 else 0.0,
            "ms_per_put": round(statistics.mean(per_put), 2) if per_put else None,
            "busy": sum(r["busy"] for r in results), "errors": sum(r["errors"] for r in results)}


def _check_run(writers: object, seconds: float | None, puts: int | None) -> float | None:
    """Refuse a run that cannot be measured; return the seconds to write (2 when neither is given)."""
    if not isinstance(writers, int) or isinstance(writers, bool) or writers < 1:
        raise ValidationError(f"writers is {writers!r}; use 1 or more writer processes")
    if seconds is not None and puts is not None:
        raise ValidationError(f"seconds={seconds!r} and puts={puts!r} were both given; give one of them")
    if (seconds is not None and not seconds > 0) or (puts is not None and puts < 1):
        raise ValidationError(f"seconds={seconds!r}, puts={puts!r}; use a positive duration or count")
    return DEFAULT_SECONDS if seconds is None and puts is None else seconds


def writer_throughput(target: PathLike, writers: int, *, seconds: float | None = None, puts: int | None = None,
                      schema: str | None = None) -> dict[str, Any]:
    """Measure confirmed puts per second into one store from `writers` writer processes at once.

    Each writer is a fresh process with its own store: its own SQLite connection to the file, or
    its own PostgreSQL connection. All open their store first, then start together; each puts new
    episode records (`e0`, `e1`, ...) for a user of its own (`writer-1`, `writer-2`, ...) through
    `Store.put`, the kit's real write (quota check, revision, event history, one durable
    commit each: SQLite `synchronous=FULL`, PostgreSQL `synchronous_commit=on`), and counts the
    puts that returned. A SQLite file takes one writer at a time (the others wait on its lock).
    On PostgreSQL the writers' statements run side by side, each a round trip to the server, but
    every put also updates the store-wide counter rows (total records, store size) and holds their
    row locks until it commits, so commits still go one at a time. Used by notebook 09 and by
    `make bench`; time is measured, never asserted.

    Args:
        target: a SQLite file path, or a `postgresql://` URL (the tables are created if missing).
        writers: how many writer processes (1 or more).
        seconds: how long each writer writes (its own clock, from its start signal; 2 s when
            neither this nor `puts` is given).
        puts: instead of `seconds`, the number of confirmed puts of each writer.
        schema: the PostgreSQL schema to write into (URL only; default the store's).

    Returns:
        `backend`, `writers`, `puts` (confirmed), `seconds` (from the first writer's start to the
        last one's end), `puts_per_s`, `ms_per_put` (the mean time one writer spent per confirmed
        put), `busy` and `errors` (writes refused: a lock wait past 60 s, anything else).

    Raises:
        ValidationError: `writers` below 1, `seconds` or `puts` not positive, or both given.
        RuntimeError: a writer process failed.

    Example:
        >>> writer_throughput("bench.sqlite3", 4, seconds=1.0)["puts_per_s"]      # doctest: +SKIP
        412.7
    """
    seconds = _check_run(writers, seconds, puts)
    target = os.fspath(target)
    with _writers_for(target, writers, schema) as started:
        return _throughput(target, started, writers, seconds, puts)


def writer_curve(targets: Mapping[str, PathLike], *, writer_counts: Sequence[int] = WRITER_COUNTS,
                 seconds: float | None = None, puts: int | None = None,
                 schema: str | None = None) -> list[dict[str, Any]]:
    """`writer_throughput` for each target and each writer count, one row each (with its `label`).

    The same measurement, but the writer processes of a target are started once (as many as the
    largest count) and reused for every count, which saves an interpreter start per point; the
    writers of every target are started and ready before the first point is measured.

    Args:
        targets: label -> SQLite path or `postgresql://` URL.
        writer_counts: the numbers of writers (each 1 or more).
        seconds, puts, schema: as in `writer_throughput`.
    """
    if not writer_counts:
        raise ValidationError("writer_counts is empty; give at least one number of writers")
    for count in writer_counts:
        seconds = _check_run(count, seconds, puts)
    rows = []
    with contextlib.ExitStack() as stack:
        # Every target's writers start (and import, and open their store) before any measurement: a
        # writer waiting for its work uses no CPU, and the curve does not wait for each start in turn.
        started = {label: (os.fspath(target), stack.enter_context(
                       _writers_for(os.fspath(target), max(writer_counts), schema, wait=False)))
                   for label, target in targets.items()}
        for _, writers in started.values():
            writers.wait_ready()
        for label, (target, writers) in started.items():
            rows += [{"label": label, **_throughput(target, writers, count, seconds, puts)} for count in writer_counts]
    return rows


def quota_race(target: PathLike, *, writers: int = 3, quota: int = 6, creates_per_writer: int = 3,
               updates_per_writer: int = 5, schema: str | None = None) -> dict[str, Any]:
    """Several processes write one user at the quota's edge at the same moment; count what got in.

    The user (`racer`) is filled to `quota - 1` records first (one of them `shared`), so one free
    slot is left; then each writer process creates `creates_per_writer` keys of its own and updates
    `shared` `updates_per_writer` times, interleaved, all writers starting together.

    Returns:
        Figures: creates accepted and refused by the quota, records stored, `over quota` (how far
        above it: must be 0), updates confirmed, the final revision of `shared`, and `lost updates`:
        confirmed updates that left no revision (must be 0), and `repeated revisions` (two confirmed
        updates given the same revision: must be 0).
    """
    if quota < 2:
        raise ValidationError(f"quota is {quota!r}; the race needs a quota of at least 2")
    target, user = os.fspath(target), "racer"
    limits = {"max_records_per_user": quota, "max_records_total": 1_000_000, "busy_timeout_ms": 60_000}
    prepare_store(target, schema=schema, limits=limits)
    with open_store(target, **store_options(target, schema, limits, 1)) as store:
        store.put(user, "prefill", "preference", "shared", "revision 1")
        for number in range(quota - 2):
            store.put(user, "prefill", "preference", f"base-{number}", f"prefilled {number}")
    plans = []
    for index in range(writers):
        ops = [[user, "preference", f"w{index}-{n}", f"writer {index} key {n}"] for n in range(creates_per_writer)]
        shared = [[user, "preference", "shared", f"writer {index} update {n}"] for n in range(updates_per_writer)]
        plans.append([op for n in range(max(len(ops), len(shared))) for op in shared[n:n + 1] + ops[n:n + 1]])
    with _Writers([{"target": target, "schema": schema, "limits": limits} for _ in plans]) as racers:
        results = racers.round([{"ops": plan} for plan in plans])
    flat = [(op, o) for plan, r in zip(plans, results, strict=False)
            for op, o in zip(plan, r["outcomes"], strict=False)]
    creates = [o for op, o in flat if op[2] != "shared"]
    updates = [o for op, o in flat if op[2] == "shared" and o["outcome"] == "ok"]
    with open_store(target, **store_options(target, schema, limits, 1)) as store:
        stored = store.users().get(user, 0)
        final = store.get(user, "preference", "shared")
    final_revision = final["revision"] if final else 0
    revisions = [o["revision"] for o in updates]
    return {"backend": backend_of(target), "writers": writers, "quota": quota,
            "creates accepted": sum(o["outcome"] == "ok" for o in creates),
            "creates refused (quota)": sum(o["outcome"] == "quota" for o in creates),
            "records stored": stored, "over quota": max(0, stored - quota),
            "updates confirmed": len(updates), "final revision": final_revision,
            "lost updates": max(0, 1 + len(updates) - final_revision),
            "repeated revisions": len(revisions) - len(set(revisions)),
            "errors": sum(o["outcome"] not in ("ok", "quota") for _, o in flat)}
