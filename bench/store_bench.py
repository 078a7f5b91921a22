"""The store benchmark: every operation at every size, three contenders alternating in one process.

For each size the three databases are built from the same data set (see `contenders`), then each
operation runs for `rounds` rounds. Writes run a fixed batch per round (a prefix would leave the
contenders with different data); reads may stop early after a time cap. After timing, a few
checks confirm the contenders still agree: the same search results, values and retrieved context.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memkit.limits import Limits

from .contenders import BareSearch, KitSearch, build_kit_file, make_contenders
from .data import MISS_QUERY_STEM, DataSet, even_dataset, hit_query, make_dataset, sentence, task_text
from .timing import alternate, run_batch, summarize

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


def workload(data: DataSet, config: StoreConfig) -> dict[str, list[list[tuple[Any, ...]]]]:
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


METHOD = {"put (new key)": "put", "put (update)": "put", "get": "get", "search (hit)": "search",
           "search (miss)": "search", "retrieval context": "retrieve", "delete": "delete"}


def agreement(data: DataSet, contenders: list[Any], samples: int = 25,
              touched: set[str] | None = None) -> list[dict[str, Any]]:
    """Ask every contender the same questions; the answers must be identical.

    A contender without an operation (a peer has no retrieval) is left out of that one. With
    `touched` (the users the timed writes went to), every contender that can list a user's records
    is also asked for all of theirs: after the same writes, the same records must be found.
    """
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
    if touched:
        questions += [("records (after the timed writes)", "records", (u,)) for u in sorted(touched)]
    for op in dict.fromkeys(q[0] for q in questions):
        asked = [q for q in questions if q[0] == op]
        able = [c for c in contenders if hasattr(c, asked[0][1])]
        if len(able) < 2:
            continue
        disagreements = 0
        nonempty = 0
        for _, method, args in asked:
            answers = [getattr(c, method)(*args) for c in able]
            disagreements += any(a != answers[0] for a in answers[1:])
            nonempty += bool(answers[0])
        checks.append({"size": data.size, "operation": op, "questions": len(asked), "contenders": len(able),
                       "non_empty": nonempty, "disagreements": disagreements})
    return checks


def written_users(plan: dict[str, list[list[tuple[Any, ...]]]]) -> set[str]:
    """Every user that a timed write of `plan` went to."""
    return {item[0] for op in WRITES for batch in plan[op] for item in batch}


def time_operations(size: int, contenders: list[Any], plan: dict[str, list[list[tuple[Any, ...]]]],
                    operations: tuple[str, ...], config: StoreConfig, log: Any) -> list[dict[str, Any]]:
    """Time every operation: `rounds` rounds, each running every contender that has the method, in
    rotating order, on the same items; one row per (operation, contender) with median and spread."""
    rows: list[dict[str, Any]] = []
    for op in operations:
        able = [c for c in contenders if hasattr(c, METHOD[op])]
        calls = dict.fromkeys((c.name for c in able), 0)
        cap = None if op in WRITES else config.read_cap_s
        for contender in able:  # a probe that writes a page count per write kind (peers.PagesProbe)
            if hasattr(contender, "start_operation"):
                contender.start_operation(op)

        def measure(contender: Any, r: int, op: str = op, cap: float | None = cap,
                    calls: dict[str, int] = calls) -> float:
            seconds, done = run_batch(getattr(contender, METHOD[op]), plan[op][r], cap)
            calls[contender.name] += done
            return seconds
        samples = alternate(config.rounds, able, measure)
        rows += [{"size": size, "operation": op, "contender": name, "calls": calls[name], **summarize(times)}
                 for name, times in samples.items()]
        log(f"    {op:<18} " + "  ".join(f"{r['contender']} {r['median_s'] * 1e6:9.1f} us" for r in rows[-len(able):]))
    return rows


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
            plan = workload(data, config)
            try:
                rows += time_operations(size, contenders, plan, OPERATIONS, config, log)
                checks.extend(agreement(data, contenders))
            finally:
                for contender in contenders:
                    contender.close()
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    return {"rows": rows, "checks": checks, "loads": loads}


# -- search on a small store (issue 36 item 5) ----------------------------------------------------

SMALL_OPERATIONS = ("search (hit)", "search (miss)")
SMALL_TARGET = 0.5
"""Issue 36 item 5: on a small store, memkit's search at least half as fast as the statement it runs."""


@dataclasses.dataclass
class SmallSearchConfig:
    """A class's store (every user under the teaching quota of 64 records), searched with a small limit."""

    users: int = 15
    records_per_user: int = 60
    limit: int = 5
    rounds: int = 31
    calls_per_round: int = 300
    synchronous: str = "FULL"
    seed: int = 1


def small_contenders(workdir: Path, data: DataSet, config: SmallSearchConfig) -> list[Any]:
    """memkit's store at the teaching limits, loaded through its bulk path, and the bare statement on a
    copy of its file (closed, so checkpointed: the copy holds everything)."""
    build_kit_file(workdir / "kit.sqlite3", data, Limits())
    shutil.copyfile(workdir / "kit.sqlite3", workdir / "bare.sqlite3")
    return [BareSearch(workdir / "bare.sqlite3", config.synchronous),
            KitSearch(workdir / "kit.sqlite3", config.synchronous, Limits())]


def small_agreement(contenders: list[Any], questions: dict[str, list[tuple[str, str]]],
                    limit: int) -> list[dict[str, Any]]:
    """Every distinct question the timed calls asked, to every contender: the same rows, in the same
    order, must come back. The SQL each call ran is traced: memkit's must be the bare statement's,
    the same text with the same values, and only it (else the bare one is not what memkit runs)."""
    checks = []
    for op, asked in questions.items():
        disagreements = nonempty = same_sql = 0
        for user, query in dict.fromkeys(asked):
            answers, ran = [], []
            for contender in contenders:
                traced: list[str] = []
                contender.conn.set_trace_callback(traced.append)
                try:
                    answers.append(contender.answer(user, query, limit))
                finally:
                    contender.conn.set_trace_callback(None)
                ran.append(traced)
            disagreements += any(a != answers[0] for a in answers[1:])
            nonempty += bool(answers[0])
            same_sql += all(r == ran[0] and len(r) == 1 for r in ran[1:])
        distinct = len(dict.fromkeys(asked))
        checks.append({"operation": op, "questions": distinct, "non_empty": nonempty,
                       "disagreements": disagreements, "same_statement": same_sql})
    return checks


def run_small_search(config: SmallSearchConfig, log: Any = print,
                     contenders: Callable[[Path, DataSet, SmallSearchConfig], list[Any]] = small_contenders,
                     ) -> dict[str, Any]:
    """Time `search(user, query, limit)` on a small store: memkit against the statement it runs.

    Both contenders alternate in rotating order on the same (user, query) items, `rounds` rounds of
    `calls_per_round` calls for hits and misses; then every distinct question is asked again and the
    answers compared (`small_agreement`). Returns the rows (wall and CPU time per call), each round's
    bare ÷ memkit ratio (the two ran within milliseconds of each other), the checks and the load
    average before and after.
    """
    data = even_dataset(config.users, config.records_per_user, config.seed)
    rng, mine = data.rng, data.by_user()
    plan: dict[str, list[list[tuple[Any, ...]]]] = {op: [] for op in SMALL_OPERATIONS}
    for _ in range(config.rounds):
        users = data.pick_users(config.calls_per_round)
        plan["search (hit)"].append([(u, hit_query(rng, mine[u]), config.limit) for u in users])
        plan["search (miss)"].append([(u, f"{MISS_QUERY_STEM}{'abcdefgh'[i % 8]}", config.limit)
                                      for i, u in enumerate(users)])
    load = [round(os.getloadavg()[0], 2)]
    workdir = Path(tempfile.mkdtemp(prefix="memkit-bench-small-"))
    rows: list[dict[str, Any]] = []
    round_ratios: dict[str, list[float]] = {}
    try:
        able = contenders(workdir, data, config)
        try:
            for op in SMALL_OPERATIONS:
                for contender in able:  # the statement prepared, the pages read: no round pays for it
                    contender.search(*plan[op][0][0])
                cpu: dict[str, list[float]] = {c.name: [] for c in able}

                def measure(contender: Any, r: int, op: str = op, cpu: dict[str, list[float]] = cpu) -> float:
                    # The thread's CPU time beside the wall time: on a shared machine a batch may wait
                    # for a core, which the wall time counts and the CPU time does not.
                    started = time.thread_time()
                    seconds, done = run_batch(contender.search, plan[op][r])
                    cpu[contender.name].append((time.thread_time() - started) / done)
                    return seconds
                samples = alternate(config.rounds, able, measure)
                rows += [{"operation": op, "contender": name, "calls": config.rounds * config.calls_per_round,
                          **summarize(times), "cpu_median_s": statistics.median(cpu[name])}
                         for name, times in samples.items()]
                bare, kit = samples[able[0].name], samples[able[1].name]
                round_ratios[op] = [b / k for b, k in zip(bare, kit, strict=True)]
                log(f"    {op:<14} " + "  ".join(f"{r['contender']} {r['median_s'] * 1e6:7.1f} us"
                                              for r in rows[-len(able):])
                    + f"  memkit/limit {statistics.median(bare) / statistics.median(kit):.2f}")
            checks = small_agreement(able, {op: [item[:2] for batch in plan[op] for item in batch]
                                            for op in SMALL_OPERATIONS}, config.limit)
        finally:
            for contender in able:
                contender.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    load.append(round(os.getloadavg()[0], 2))
    return {"users": config.users, "records_per_user": config.records_per_user, "limit": config.limit,
            "rounds": config.rounds, "calls_per_round": config.calls_per_round,
            "synchronous": config.synchronous, "contenders": [c.name for c in able],
            "date": dt.date.today().isoformat(), "load": load, "rows": rows,
            "round_ratios": round_ratios, "checks": checks}
