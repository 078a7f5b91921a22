"""PostgreSQL in the benchmark.

    python -m bench.pg_bench                 # the store against raw psycopg, and the writer curve
    python -m bench.pg_bench --quick         # the same, small (what the test runs, with --out)
    python -m bench.pg_bench --isolation     # row locks (what memkit does) against SERIALIZABLE + retry

`make bench` (python -m bench) runs the first through `run_into`: the figures go into the
"PostgreSQL backend" section of bench/RESULTS.md (`bench.pg_report`), pg_writers.png and
pg_results.json. The store against its limit is `bench.pg_store_bench`, the writer curve
(SQLite and PostgreSQL with 1, 2, 4 and 8 writer processes) `bench.pg_writers`.

Isolation: `writers` processes write for one user at the per-user quota's edge at the same moment
(random keys out of quota + 16, so creates fill the quota and then are refused, and updates race
for the same keys). Three ways: the store's statements on one raw connection per writer in READ
COMMITTED with the store's row locks (`locks`: the user's counter row, the total's, the size
counter's); the same statements in SERIALIZABLE without the locks, retried up to `retries` times
on a serialization failure or a deadlock (or a key another writer created first); and
`PostgresStore.put` itself (`store`). Reported per way: puts per second over all writers, retries per put, puts that gave up,
and whether the quota and every key's revisions held (no lost update).

Every figure comes from a real server: `--url`, else an embedded one (Debian's PostgreSQL 15 where
present, else the pgserver wheel's PostgreSQL 16), started with durable defaults.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import multiprocessing
import os
import random
import time
import uuid
from pathlib import Path
from typing import Any

DEBIAN_POSTGRES = Path("/usr/lib/postgresql/15/bin")
HERE = Path(__file__).resolve().parent


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
            db.execute("BEGIN ISOLATION LEVEL SERIALIZABLE" if serializable else "BEGIN")
            if not serializable:  # the user's counter row first (made at 0 for a new user), as the store does
                if db.execute("SELECT 1 FROM user_counts WHERE user_id = ? FOR UPDATE", (user,)).fetchone() is None:
                    db.execute("INSERT INTO user_counts VALUES (?, 0) ON CONFLICT (user_id) DO NOTHING", (user,))
                    db.execute("SELECT 1 FROM user_counts WHERE user_id = ? FOR UPDATE", (user,))
            row = db.execute("SELECT id, value, revision FROM memories WHERE user_id = ? AND kind = ? AND memory_key = ?",
                             (user, kind, key)).fetchone()
            if row is not None and row["value"] == value:
                db.execute("COMMIT")
                return "ok", attempt
            seq = db.value(sql.take_sequence, (1,))
            if row is None:
                mine = db.value(sql.user_records, (user,)) or 0
                total = db.value(sql.total_records + ("" if serializable else " FOR UPDATE"))
                if mine + 1 > limits.max_records_per_user or total + 1 > limits.max_records_total:
                    db.execute("ROLLBACK")
                    return "quota", attempt
                revision = (db.value(sql.last_revision, (user, kind, key)) or 0) + 1
                db.execute(sql.insert_memory, (user, kind, key, value, "bench", revision, now, now, key, value.casefold(), seq))
                action, old = "create", None
            else:
                revision, action, old = row["revision"] + 1, "update", row["value"]
                db.execute(sql.update_memory, (value, value.casefold(), "bench", revision, now, seq, row["id"]))
            db.execute(sql.insert_event, (user, kind, key, action, revision, "bench", old, value, None, now))
            db.value("SELECT bytes FROM store_size")  # the size check
            db.execute("COMMIT")
            return "ok", attempt
        except (errors.SerializationFailure, errors.DeadlockDetected, errors.UniqueViolation):
            # A key another writer created first is a conflict too: retry, and the retry updates it.
            db.execute("ROLLBACK")
            time.sleep(random.random() * 0.002 * (attempt + 1))  # a little backoff, growing
        except psycopg.Error:
            db.execute("ROLLBACK")
            raise
    return "gave up", retries


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
        limits = {"max_records_per_user": quota, "busy_timeout_ms": 60_000}
        PostgresStore(url, schema=schema).close()
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
            revisions_hold = all(
                [e["revision"] for e in store.history("alice", "preference", r["key"])] == list(range(1, r["revision"] + 1))
                for r in store.records("alice"))
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


def _server(url: str | None) -> tuple[str, Any]:
    if url:
        return url, None
    from memkit.store import start_embedded_postgres

    server = start_embedded_postgres(bin_dir=DEBIAN_POSTGRES) if (DEBIAN_POSTGRES / "postgres").exists() \
        else start_embedded_postgres()
    return server.url, server


def run(url: str, quick: bool = False, log: Any = print) -> dict[str, Any]:
    """The store against its limit and the writer curve on the server at `url`; their figures."""
    from . import pg_store_bench, pg_writers

    store, curve = pg_store_bench.PgStoreConfig(), pg_writers.WriterCurveConfig()
    if quick:
        store.sizes, store.rounds, store.read_cap_s = (500,), 2, 0.05
        curve.processes, curve.seconds, curve.rounds = (1, 2), 0.5, 1
    started = time.perf_counter()
    log(f"postgresql, the store against raw psycopg: sizes {list(store.sizes)}, {store.rounds} rounds")
    results: dict[str, Any] = {"store": pg_store_bench.run(url, store, log)}
    log(f"postgresql, writer processes {list(curve.processes)} against SQLite:")
    results["writers"] = pg_writers.run(url, curve, log)
    results["meta"] = {"rounds": store.rounds, "sizes": list(store.sizes), "cores": os.cpu_count(),
                       "date": dt.date.today().isoformat(), "wall_s": round(time.perf_counter() - started, 1)}
    return results


def run_into(out: Path, quick: bool = False, url: str | None = None, command: str | None = None) -> dict[str, Any]:
    """`run` on `url` (else an embedded server), then its section of `out`/RESULTS.md, the plot
    (pg_writers.png) and pg_results.json. What `python -m bench` calls."""
    from . import pg_report

    url, server = _server(url)
    try:
        results = run(url, quick)
        results["meta"]["server"] = _server_version(url)
    finally:
        if server is not None:
            server.close()
    results["meta"]["command"] = command or "python -m bench" + (" --quick" if quick else "")
    notes = HERE / "pg_notes.md"
    results["notes"] = notes.read_text(encoding="utf-8") if notes.exists() and not quick else ""
    out.mkdir(parents=True, exist_ok=True)
    (out / "pg_results.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    pg_report.plot(results, out / pg_report.PLOT)
    pg_report.write_section(out / "RESULTS.md", pg_report.markdown(results))
    for target in pg_report.targets(results):
        print(f"  {'ok  ' if target['holds'] else 'MISS'} {target['target']}: {target['measured']}")
    return results


def _server_version(url: str) -> str:
    import psycopg

    with psycopg.connect(url) as conn:
        return "PostgreSQL " + str(conn.execute("SHOW server_version").fetchone()[0]).split()[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pg_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a PostgreSQL server to measure (default: an embedded one)")
    parser.add_argument("--isolation", action="store_true", help="row locks against SERIALIZABLE with retry")
    parser.add_argument("--quick", action="store_true", help="a smoke run of the store bench and the writer curve")
    parser.add_argument("--out", type=Path, default=HERE, help="where RESULTS.md's section and the plot go")
    parser.add_argument("--writers", type=int, default=4, help="--isolation: writer processes")
    parser.add_argument("--puts", type=int, default=250, help="--isolation: puts per writer")
    args = parser.parse_args(argv)
    if not args.isolation:
        run_into(args.out, args.quick, args.url, command="python -m bench.pg_bench" + (" --quick" if args.quick else ""))
        return 0
    url, server = _server(args.url)
    try:
        print(json.dumps(isolation(url, writers=args.writers, puts=args.puts), indent=2))
    finally:
        if server is not None:
            server.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
