"""The writer curve: write throughput of SQLite and PostgreSQL with 1, 2, 4 and 8 writer processes.

The measurement is `memkit.lab.scaling.writer_curve` (the one notebook 09 plots): real writer
processes, each with a store of its own, putting new keys for a user of its own through
`MemoryStore.put`, durably (SQLite `synchronous=FULL`, PostgreSQL `synchronous_commit=on`).
This module repeats it: `rounds` rounds, each on a fresh SQLite file and a fresh PostgreSQL schema
(a writer's keys start again at `e0`, and a put of a value already stored writes nothing), the
two backends in alternating order; each point is the median over the rounds. After each round
the store must hold exactly as many records as the writers confirmed.
"""

from __future__ import annotations

import dataclasses
import shutil
import statistics
import tempfile
import uuid
from pathlib import Path
from typing import Any

SQLITE, POSTGRES = "SQLite (WAL)", "PostgreSQL"


@dataclasses.dataclass
class WriterCurveConfig:
    processes: tuple[int, ...] = (1, 2, 4, 8)
    seconds: float = 2.0
    rounds: int = 3


def _stored(target: str, schema: str | None) -> int:
    """How many records the store at `target` holds (all users)."""
    from memkit.store import open_store

    options = {"schema": schema, "create": False} if schema else {}
    with open_store(target, **options) as store:
        return sum(store.users().values())


def _drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def run(url: str, config: WriterCurveConfig, log: Any = print) -> dict[str, Any]:
    """The curve against SQLite files in a temporary folder and schemas of the server at `url`."""
    from memkit.lab.scaling import writer_curve

    samples: dict[tuple[str, int], list[float]] = {}
    lost = refused = 0
    workdir = Path(tempfile.mkdtemp(prefix="memkit-pg-writers-"))
    try:
        for r in range(config.rounds):
            order = (SQLITE, POSTGRES) if r % 2 == 0 else (POSTGRES, SQLITE)
            for backend in order:
                schema = f"bench_writers_{uuid.uuid4().hex[:8]}" if backend == POSTGRES else None
                target = url if backend == POSTGRES else str(workdir / f"writers-{r}.sqlite3")
                try:
                    rows = writer_curve({backend: target}, writer_counts=config.processes,
                                        seconds=config.seconds, schema=schema)
                    lost += sum(row["puts"] for row in rows) - _stored(target, schema)
                    refused += sum(row["busy"] + row["errors"] for row in rows)
                finally:
                    if schema:
                        _drop_schema(url, schema)
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
