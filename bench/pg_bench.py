"""PostgreSQL in the benchmark (`python -m bench postgres`): the store against raw psycopg
(`pg_store_bench`), and the writer curve: `classroom.lab.scaling.writer_curve` (the one notebook 09
plots), 1, 2, 4 and 8 real processes putting new keys durably, `rounds` times on a fresh SQLite file
and PostgreSQL schema, the backends alternating; each point the median, and every confirmed put must
be found. The server is `--url`, else an embedded one (Debian's PostgreSQL 15 where present).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import os
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import pg_store_bench
from .pg_store_bench import drop_schemas
from .timing import rotated

DEBIAN_POSTGRES = Path("/usr/lib/postgresql/15/bin")
SQLITE, POSTGRES = "SQLite (WAL)", "PostgreSQL"


@contextlib.contextmanager
def server(url: str | None) -> Iterator[str]:
    """`url`, else an embedded server's (Debian's PostgreSQL 15 where present), stopped afterwards."""
    if url:
        yield url
        return
    from memkit.store.postgres import start_embedded_postgres

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
    from classroom.lab.scaling import writer_curve

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
            for backend in rotated((SQLITE, POSTGRES), r):
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
    store, curve = pg_store_bench.config(), WriterCurveConfig()
    if quick:
        store.sizes, store.rounds, store.read_cap_s = (500,), 2, 0.05
        curve.processes, curve.seconds, curve.rounds = (1, 2), 0.5, 1
    started = time.perf_counter()
    log(f"postgresql, the store against raw psycopg: sizes {list(store.sizes)}, {store.rounds} rounds")
    results: dict[str, Any] = {"store": pg_store_bench.run(url, store, log)}
    log(f"postgresql, writer processes {list(curve.processes)} against SQLite:")
    results["writers"] = run_curve(url, curve, log)
    results["meta"] = {"rounds": store.rounds, "sizes": list(store.sizes), "cores": os.cpu_count(),
                       "date": dt.date.today().isoformat(), "wall_s": round(time.perf_counter() - started, 1),
                       "server": server_version(url)}
    return results
