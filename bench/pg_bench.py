"""PostgreSQL in the benchmark: the store against raw psycopg, the writer curve, and isolation.

    python -m bench postgres         # the store against raw psycopg, and the writer curve (in `make bench`)
    python -m bench pg-isolation     # row locks (what memkit does) against SERIALIZABLE + retry

The store against its limit is `bench.pg_store_bench`. The writer curve is
`memkit.lab.scaling.writer_curve` (the one notebook 09 plots): real writer processes, each with a
store of its own, putting new keys for a user of its own through `MemoryStore.put`, durably (SQLite
`synchronous=FULL`, PostgreSQL `synchronous_commit=on`), with 1, 2, 4 and 8 writers. It is repeated
`rounds` times, each on a fresh SQLite file and a fresh PostgreSQL schema, the two backends in
alternating order; each point is the median over the rounds. After each round the store must hold
exactly as many records as the writers confirmed.

Isolation: `writers` processes write for one user at the per-user quota's edge at the same moment
(random keys out of quota + 16, so creates fill the quota and then are refused, and updates race
for the same keys). Three ways: the store's statements on one raw connection per writer in READ
COMMITTED with the store's row locks (`locks`: the user's counter row, then a free shard of the
store-wide counters as the store settles into one); the same statements in SERIALIZABLE without the
user's lock, retried up to `retries` times on a serialization failure or a deadlock (or a key
another writer created first); and
`PostgresStore.put` itself (`store`). Reported per way: puts per second over all writers, retries
per put, puts that gave up, and whether the quota and every key's revisions held (no lost update).

Every figure comes from a real server: `--url`, else an embedded one (Debian's PostgreSQL 15 where
present, else the pgserver wheel's PostgreSQL 16), started with durable defaults.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import multiprocessing
import os
import random
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memkit.store.postgres import _SETTLE_SQL
from memkit.store.postgres import _BEGIN_SETTLING as BEGIN_SETTLING

from .pg_store_bench import PgStoreConfig, drop_schemas
from .pg_store_bench import run as run_store

DEBIAN_POSTGRES = Path("/usr/lib/postgresql/15/bin")
SQLITE, POSTGRES = "SQLite (WAL)", "PostgreSQL"


def _raw_put(conn: Any, user: str, kind: str, key: str, value: str, limits: Any, now: str,
             serializable: bool, retries: int) -> tuple[str, int]:
    """The store's put, statement for statement, on one raw connection: READ COMMITTED with the
    store's row locks (`serializable=False`), or SERIALIZABLE without them and a bounded retry."""
    import psycopg
    from psycopg import errors

    from memkit.store import PostgresStore
    from memkit.store.pg_connection import PgConnection

    sql, db = PostgresStore.statements(), PgConnection(conn)
    for attempt in range(retries + 1):
        try:
            db.execute("BEGIN ISOLATION LEVEL SERIALIZABLE; SET LOCAL memkit_tx.settles = on" if serializable
                       else BEGIN_SETTLING)
            if not serializable:  # the user's counter row first (made at 0 for a new user), as the store does
                _lock_counter(db, user)
            return _raw_write(db, sql, (user, kind, key, value), limits, now, serializable), attempt
        except (errors.SerializationFailure, errors.DeadlockDetected, errors.UniqueViolation):
            # A key another writer created first is a conflict too: retry, and the retry updates it.
            db.execute("ROLLBACK")
            time.sleep(random.random() * 0.002 * (attempt + 1))  # a little backoff, growing
        except psycopg.Error:
            db.execute("ROLLBACK")
            raise
    return "gave up", retries


def _lock_counter(db: Any, user: str) -> None:
    lock = "SELECT 1 FROM user_counts WHERE user_id = ? FOR UPDATE"
    if db.execute(lock, (user,)).fetchone() is None:
        db.execute("INSERT INTO user_counts VALUES (?, 0) ON CONFLICT (user_id) DO NOTHING", (user,))
        db.execute(lock, (user,))


def _raw_write(db: Any, sql: Any, item: tuple[str, str, str, str], limits: Any, now: str, serializable: bool) -> str:
    """The put's statements after BEGIN, through COMMIT (or ROLLBACK past the quota): "ok" or "quota"."""
    user, kind, key, value = item
    row = db.execute("SELECT id, value, revision FROM memories WHERE user_id = ? AND kind = ? AND memory_key = ?",
                     (user, kind, key)).fetchone()
    if row is not None and row["value"] == value:
        db.execute("COMMIT")
        return "ok"
    seq = db.value(sql.take_sequence, (1,))
    if row is None:
        mine = db.value(sql.user_records, (user,)) or 0
        total = db.value(sql.total_records)  # the store checks the global quota as it settles: not here
        if mine + 1 > limits.max_records_per_user or total + 1 > limits.max_records_total:
            db.execute("ROLLBACK")
            return "quota"
        revision = (db.value(sql.last_revision, (user, kind, key)) or 0) + 1
        db.execute(sql.insert_memory, (user, kind, key, value, "bench", revision, now, now, key, value.casefold(), seq))
        action, old = "create", None
    else:
        revision, action, old = row["revision"] + 1, "update", row["value"]
        db.execute(sql.update_memory, (value, value.casefold(), "bench", revision, now, seq, row["id"]))
    db.execute(sql.insert_event, (user, kind, key, action, revision, "bench", old, value, None, now))
    _settle(db, limits)  # the size check: the counts settled into a free shard
    db.execute("COMMIT")
    return "ok"


def _settle(db: Any, limits: Any) -> None:
    """The store's fast path of settling a write's counts into a shard (postgres.py, `_settle`):
    the same statements and row lock (the global quota and the cap are far here: no rebalance)."""
    db.execute(_SETTLE_SQL, (limits.max_records_total, limits.max_db_bytes // 8192 * 8192, True)).fetchone()


def _isolation_writer(payload: dict[str, Any], barrier: Any, results: Any) -> None:
    try:
        results.put(_isolation_puts(payload, barrier))
    except BaseException as exc:  # the parent reports it instead of waiting for an answer that never comes
        results.put({"error": f"{type(exc).__name__}: {exc}"})
        raise


def _isolation_puts(payload: dict[str, Any], barrier: Any) -> dict[str, Any]:
    from memkit.clock import iso, utc_now
    from memkit.errors import QuotaError
    from memkit.limits import Limits
    from memkit.store import PostgresStore
    from memkit.store.pg_connection import connect

    limits = Limits().replace(**payload["limits"])
    rng = random.Random(payload["seed"])
    keys = [f"k{rng.randrange(payload['keys'])}" for _ in range(payload["puts"])]
    outcomes: dict[str, int] = {"ok": 0, "quota": 0, "gave up": 0, "retries": 0}
    if payload["mode"] == "store":
        store = PostgresStore(payload["url"], schema=payload["schema"], limits=limits)
        barrier.wait()
        started = time.perf_counter()
        for n, key in enumerate(keys):
            try:
                store.put("alice", "bench", "preference", key, f"w{payload['seed']} {n}")
                outcomes["ok"] += 1
            except QuotaError:
                outcomes["quota"] += 1
        elapsed = time.perf_counter() - started
        store.close()
    else:
        conn = connect(payload["url"], options=f"-c search_path={payload['schema']}")
        barrier.wait()
        started = time.perf_counter()
        for n, key in enumerate(keys):
            outcome, retried = _raw_put(conn, "alice", "preference", key, f"w{payload['seed']} {n}", limits,
                                        iso(utc_now()), payload["mode"] == "serializable",
                                        payload["retries"] if payload["mode"] == "serializable" else 0)
            outcomes[outcome] += 1
            outcomes["retries"] += retried
        elapsed = time.perf_counter() - started
        conn.close()
    return {**outcomes, "elapsed": elapsed}


def isolation(url: str, *, writers: int = 4, puts: int = 250, quota: int = 64, retries: int = 10) -> dict[str, Any]:
    """Race `writers` processes of `puts` puts each for one user, in both modes; return the figures."""
    from memkit.store import PostgresStore

    figures: dict[str, Any] = {"writers": writers, "puts": writers * puts, "quota": quota, "retries_allowed": retries}
    context = multiprocessing.get_context("spawn")
    for mode in ("locks", "serializable", "store"):
        schema = f"bench_{mode}_{uuid.uuid4().hex[:8]}"
        # The history bound high enough to keep every event: "revisions hold" checks each key's
        # whole history, 1 to its revision (at the default bound the store prunes the oldest).
        limits = {"max_records_per_user": quota, "max_events_per_user": writers * puts + quota,
                  "busy_timeout_ms": 60_000}
        with PostgresStore(url, schema=schema) as store:  # a first write grants the shards' allowances
            store.put("warmup", "bench", "preference", "k", "v")
        barrier, results = context.Barrier(writers), context.Queue()
        processes = [context.Process(target=_isolation_writer, args=(
            {"url": url, "schema": schema, "mode": mode, "puts": puts, "keys": quota + 16, "seed": w,
             "limits": limits, "retries": retries}, barrier, results)) for w in range(writers)]
        for process in processes:
            process.start()
        rows = [results.get(timeout=600) for _ in processes]
        for process in processes:
            process.join()
        failed = [row["error"] for row in rows if "error" in row]
        if failed:
            raise RuntimeError(f"a {mode} writer failed: {failed[0]}")
        with PostgresStore(url, schema=schema) as store:
            stored = len(store.records("alice"))
            revisions_hold = all([e["revision"] for e in store.history("alice", "preference", r["key"])]
                                 == list(range(1, r["revision"] + 1)) for r in store.records("alice"))
            consistent = store.health()["counters_consistent"]
        ok = sum(r["ok"] for r in rows)
        figures[mode] = {
            "puts_per_s": round(ok / max(r["elapsed"] for r in rows), 1),
            "ok": ok, "quota": sum(r["quota"] for r in rows), "gave_up": sum(r["gave up"] for r in rows),
            "retries_per_put": round(sum(r.get("retries", 0) for r in rows) / (writers * puts), 3),
            "stored": stored, "over_quota": max(0, stored - quota), "revisions_hold": revisions_hold,
            "counters_consistent": consistent,
        }
    return figures


@contextlib.contextmanager
def server(url: str | None) -> Iterator[str]:
    """`url`, else an embedded server's (Debian's PostgreSQL 15 where present), stopped afterwards."""
    if url:
        yield url
        return
    from memkit.store import start_embedded_postgres

    embedded = start_embedded_postgres(bin_dir=DEBIAN_POSTGRES) if (DEBIAN_POSTGRES / "postgres").exists() \
        else start_embedded_postgres()
    try:
        yield embedded.url
    finally:
        embedded.close()


def server_version(url: str) -> str:
    """"PostgreSQL 15.18": the server's version, as the report names it."""
    import psycopg

    with psycopg.connect(url) as conn:
        return "PostgreSQL " + str(conn.execute("SHOW server_version").fetchone()[0]).split()[0]


@dataclasses.dataclass
class WriterCurveConfig:
    """Writer processes per point, seconds of writing, rounds (each point the median over them)."""

    processes: tuple[int, ...] = (1, 2, 4, 8)
    seconds: float = 2.0
    rounds: int = 3


def _stored(target: str, schema: str | None) -> int:
    """How many records the store at `target` holds (all users)."""
    from memkit.store import open_store

    options = {"schema": schema, "create": False} if schema else {}
    with open_store(target, **options) as store:
        return sum(store.users().values())


def _curve_round(url: str, backend: str, target: str, config: WriterCurveConfig) -> tuple[list[dict[str, Any]], int]:
    """One backend's writer curve on a fresh file or schema: its rows, and the confirmed puts not found."""
    from memkit.lab.scaling import writer_curve

    schema = f"bench_writers_{uuid.uuid4().hex[:8]}" if backend == POSTGRES else None
    try:
        rows = writer_curve({backend: target}, writer_counts=config.processes, seconds=config.seconds, schema=schema)
        return rows, sum(row["puts"] for row in rows) - _stored(target, schema)
    finally:
        if schema:
            drop_schemas(url, schema)


def run_curve(url: str, config: WriterCurveConfig, log: Any = print) -> dict[str, Any]:
    """The curve against SQLite files in a temporary folder and schemas of the server at `url`."""
    samples: dict[tuple[str, int], list[float]] = {}
    lost = refused = 0
    workdir = Path(tempfile.mkdtemp(prefix="memkit-pg-writers-"))
    try:
        for r in range(config.rounds):
            for backend in (SQLITE, POSTGRES) if r % 2 == 0 else (POSTGRES, SQLITE):
                target = url if backend == POSTGRES else str(workdir / f"writers-{r}.sqlite3")
                rows, missing = _curve_round(url, backend, target, config)
                lost += missing
                refused += sum(row["busy"] + row["errors"] for row in rows)
                for row in rows:
                    samples.setdefault((backend, row["writers"]), []).append(row["puts_per_s"])
            log(f"    round {r + 1}: " + "  ".join(
                f"{b} " + "/".join(f"{samples[(b, n)][-1]:.0f}" for n in config.processes) for b in (SQLITE, POSTGRES))
                + f" puts/s at {'/'.join(map(str, config.processes))} writers")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    points = [{"backend": backend, "processes": n, "writes_per_s": round(statistics.median(values), 1),
               "min": round(min(values), 1), "max": round(max(values), 1)}
              for (backend, n), values in sorted(samples.items(), key=lambda item: (item[0][1], item[0][0]))]
    return {"points": points, "seconds": config.seconds, "rounds": config.rounds, "lost_writes": lost,
            "refused_writes": refused}


def run(url: str, quick: bool = False, log: Any = print) -> dict[str, Any]:
    """The store against its limit and the writer curve on the server at `url`; their figures."""
    store, curve = PgStoreConfig(), WriterCurveConfig()
    if quick:
        store.sizes, store.rounds, store.read_cap_s = (500,), 2, 0.05
        curve.processes, curve.seconds, curve.rounds = (1, 2), 0.5, 1
    started = time.perf_counter()
    log(f"postgresql, the store against raw psycopg: sizes {list(store.sizes)}, {store.rounds} rounds")
    results: dict[str, Any] = {"store": run_store(url, store, log)}
    log(f"postgresql, writer processes {list(curve.processes)} against SQLite:")
    results["writers"] = run_curve(url, curve, log)
    results["meta"] = {"rounds": store.rounds, "sizes": list(store.sizes), "cores": os.cpu_count(),
                       "date": dt.date.today().isoformat(), "wall_s": round(time.perf_counter() - started, 1),
                       "server": server_version(url)}
    return results
