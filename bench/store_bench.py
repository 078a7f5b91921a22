"""The store benchmark: every operation at every size, three contenders alternating in one process.

For each size the three databases are built from the same data set (see `contenders`), then each
operation runs for `rounds` rounds. Writes run a fixed batch per round (a prefix would leave the
contenders with different data); reads may stop early after a time cap. After timing, a few
checks confirm the contenders still agree: the same search results, values and retrieved context.
"""

from __future__ import annotations

import dataclasses
import tempfile
import shutil
from pathlib import Path
from typing import Any

from .contenders import make_contenders
from .data import MISS_QUERY_STEM, DataSet, hit_query, make_dataset, sentence, task_text
from .timing import rotated, run_batch, summarize

OPERATIONS = ("put (new key)", "put (update)", "get", "search (hit)", "search (miss)",
              "retrieval context", "delete")
WRITES = {"put (new key)", "put (update)", "delete"}
CONTENDERS = ("raw sqlite3", "naive", "memkit")


@dataclasses.dataclass
class StoreConfig:
    sizes: tuple[int, ...] = (1_000, 10_000, 100_000)
    rounds: int = 7
    writes_per_round: int = 12
    reads_per_round: int = 300
    retrievals_per_round: int = 20
    read_cap_s: float = 0.25
    synchronous: str = "FULL"
    seed: int = 1


def _workload(data: DataSet, config: StoreConfig) -> dict[str, list[list[tuple[Any, ...]]]]:
    """The items of every operation for every round, drawn once so all contenders get the same."""
    rng = data.rng
    mine = data.by_user()
    plan: dict[str, list[list[tuple[Any, ...]]]] = {op: [] for op in OPERATIONS}
    for r in range(config.rounds):
        users = data.pick_users(config.writes_per_round)
        new = [(u, "episode", f"bench.r{r}.{i}", sentence(rng)) for i, u in enumerate(users)]
        plan["put (new key)"].append(new)
        plan["delete"].append([(u, kind, key) for u, kind, key, _ in new])
        updates = []
        for i, u in enumerate(data.pick_users(config.writes_per_round)):
            record = rng.choice(mine[u])
            updates.append((u, record.kind, record.key, f"{sentence(rng)} (round {r}, {i})"))
        plan["put (update)"].append(updates)
        gets, hits, misses = [], [], []
        for i, u in enumerate(data.pick_users(config.reads_per_round)):
            record = rng.choice(mine[u])
            gets.append((u, record.kind, record.key))
            hits.append((u, hit_query(rng, mine[u])))
            misses.append((u, f"{MISS_QUERY_STEM}{'abcdefgh'[i % 8]}"))
        plan["get"].append(gets)
        plan["search (hit)"].append(hits)
        plan["search (miss)"].append(misses)
        plan["retrieval context"].append([(u, task_text(rng)) for u in data.pick_users(config.retrievals_per_round)])
    return plan


_METHOD = {"put (new key)": "put", "put (update)": "put", "get": "get", "search (hit)": "search",
           "search (miss)": "search", "retrieval context": "retrieve", "delete": "delete"}


def _agreement(data: DataSet, contenders: list[Any], samples: int = 25) -> list[dict[str, Any]]:
    """Ask every contender the same questions; the answers must be identical."""
    rng = data.rng
    mine = data.by_user()
    checks = []
    questions: list[tuple[str, str, tuple[Any, ...]]] = []
    for u in data.pick_users(samples):
        record = rng.choice(mine[u])
        questions.append(("get", "get", (u, record.kind, record.key)))
        questions.append(("search (hit)", "search", (u, hit_query(rng, mine[u]), 10)))
        questions.append(("search (miss)", "search", (u, MISS_QUERY_STEM, 10)))
        questions.append(("retrieval context", "retrieve", (u, task_text(rng))))
    for op in dict.fromkeys(q[0] for q in questions):
        asked = [q for q in questions if q[0] == op]
        disagreements = 0
        nonempty = 0
        for _, method, args in asked:
            answers = [getattr(c, method)(*args) for c in contenders]
            disagreements += any(a != answers[0] for a in answers[1:])
            nonempty += bool(answers[-1])
        checks.append({"size": data.size, "operation": op, "questions": len(asked),
                       "non_empty": nonempty, "disagreements": disagreements})
    return checks


def run(config: StoreConfig, log: Any = print) -> dict[str, Any]:
    """Run the store benchmark; return rows of timings, agreement checks and load times."""
    rows: list[dict[str, Any]] = []
    checks: list[dict[str, Any]] = []
    loads: list[dict[str, Any]] = []
    for size in config.sizes:
        workdir = Path(tempfile.mkdtemp(prefix="memkit-bench-"))
        try:
            data = make_dataset(size, config.seed)
            contenders, load = make_contenders(workdir, data, config.synchronous)
            loads.append({"size": size, "users": len(data.users), **{k: round(v, 2) for k, v in load.items()}})
            log(f"  {size:>7} records, {len(data.users)} users: loaded "
                + ", ".join(f"{k} {v:.1f} s" for k, v in load.items()))
            plan = _workload(data, config)
            try:
                for op in OPERATIONS:
                    samples: dict[str, list[float]] = {c.name: [] for c in contenders}
                    calls: dict[str, int] = {c.name: 0 for c in contenders}
                    cap = None if op in WRITES else config.read_cap_s
                    for r in range(config.rounds):
                        for contender in rotated(contenders, r):
                            method = getattr(contender, _METHOD[op])
                            per_call, done = run_batch(method, plan[op][r], cap)
                            samples[contender.name].append(per_call)
                            calls[contender.name] += done
                    for name, times in samples.items():
                        rows.append({"size": size, "operation": op, "contender": name,
                                     "calls": calls[name], **summarize(times)})
                    medians = {name: summarize(t)["median_s"] for name, t in samples.items()}
                    log(f"    {op:<18} " + "  ".join(f"{n} {m * 1e6:9.1f} us" for n, m in medians.items()))
                checks.extend(_agreement(data, contenders))
            finally:
                for contender in contenders:
                    contender.close()
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    return {"rows": rows, "checks": checks, "loads": loads}
