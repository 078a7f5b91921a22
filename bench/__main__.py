"""`python -m bench` (what `make bench` runs): the whole suite, then RESULTS.md, results.png, results.json.

    python -m bench                 # 1k, 10k, 100k records, 7 rounds, window and notebooks: a few minutes
    python -m bench --quick         # a smoke run: 1k records, 2 rounds, small peers, no window script, no notebooks
    python -m bench --sizes 200 --rounds 1 --no-notebooks --no-window --out /tmp/b   # what the test runs

Timings are never asserted anywhere: they go into the table, and the targets are judged there.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sqlite3
import sys
import time
from pathlib import Path

from . import budget_bench, pg_bench, report, store_bench, suite_extras
from .peers import peers_available

HERE = Path(__file__).resolve().parent


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 1k records, 2 rounds, no window, no notebooks")
    parser.add_argument("--sizes", type=lambda s: tuple(int(x) for x in s.split(",")),
                        help="comma-separated record counts (default 1000,10000,100000)")
    parser.add_argument("--rounds", type=int, help="rounds per operation (default 7; --quick 2)")
    parser.add_argument("--synchronous", choices=("FULL", "NORMAL"), default="FULL",
                        help="durability for every contender (default FULL, memkit's default)")
    parser.add_argument("--notebooks", action=argparse.BooleanOptionalAction, default=None,
                        help="time the nbval run of the notebook suite (default: on, off with --quick)")
    parser.add_argument("--window", action=argparse.BooleanOptionalAction, default=None,
                        help="run bench/bench_window.py if present (default: on, off with --quick)")
    parser.add_argument("--peers", action=argparse.BooleanOptionalAction, default=True,
                        help="langgraph SqliteStore and openai-agents sessions beside memkit (the bench extra)")
    parser.add_argument("--peer-size", type=int, help="records for the peer comparison (default 10000; --quick 1000)")
    parser.add_argument("--out", type=Path, default=HERE,
                        help="where RESULTS.md, results.png and results.json go (default: bench/)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    quick = args.quick
    store_config = store_bench.StoreConfig(synchronous=args.synchronous)
    budget_config = budget_bench.BudgetConfig()
    if quick:
        store_config.sizes, store_config.rounds = (1_000,), 2
        store_config.read_cap_s = 0.05
        budget_config.rounds, budget_config.requests_per_round = 2, 50
    if args.sizes:
        store_config.sizes = args.sizes
    if args.rounds:
        store_config.rounds = budget_config.rounds = args.rounds
    notebooks = (not quick) if args.notebooks is None else args.notebooks
    window = (not quick) if args.window is None else args.window
    args.out.mkdir(parents=True, exist_ok=True)

    started = time.perf_counter()
    command = "python -m bench" + ("".join(f" {a}" for a in (argv if argv is not None else sys.argv[1:])))
    results: dict = {"meta": {
        "command": command.replace(str(args.out), "OUT") if args.out != HERE else command,
        "date": dt.date.today().isoformat(),
        "cores": os.cpu_count(), "platform": f"{platform.system()} {platform.machine()}",
        "python": platform.python_version(), "sqlite": sqlite3.sqlite_version,
        "rounds": store_config.rounds, "synchronous": store_config.synchronous,
        "sizes": list(store_config.sizes),
    }}
    print(f"store: sizes {list(store_config.sizes)}, {store_config.rounds} rounds, synchronous={args.synchronous}")
    results["store"] = store_bench.run(store_config)
    print("budget wrapper:")
    results["budget"] = budget_bench.run(budget_config)
    if args.peers:
        run_peers(results, quick, args.peer_size, args.rounds)
    if window:
        print("short-term window:")
        results["window"] = suite_extras.run_window()
    if notebooks:
        print("notebook suite (nbval):")
        results["notebooks"] = suite_extras.run_notebooks()
    results["meta"]["wall_s"] = round(time.perf_counter() - started, 1)

    notes = (HERE / "NOTES.md").read_text(encoding="utf-8") if (HERE / "NOTES.md").exists() else ""
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    report.plot(results, args.out / "results.png")
    (args.out / "RESULTS.md").write_text(report.markdown(results, notes), encoding="utf-8")
    pg_bench.run_into(args.out, quick)  # the PostgreSQL backend's section of RESULTS.md (issue 14)
    print(f"\ntargets ({results['meta']['wall_s']} s in all):")
    for t in report.targets(results):
        print(f"  {'ok  ' if t['holds'] else 'MISS'} {t['target']}: {t['measured']}")
    print(f"wrote {args.out / 'RESULTS.md'}, {args.out / 'results.png'}, {args.out / 'results.json'}")
    return 0


def run_peers(results: dict, quick: bool, size: int | None, rounds: int | None) -> None:
    """The peers (issue 15) into `results`, or why they were left out when the bench extra is missing."""
    missing = peers_available()
    if missing:
        print(f"peers: skipped, {missing}")
        results["peers_status"] = missing
        return
    from . import peer_bench, window_peers, write_profile, writers

    store = peer_bench.PeerConfig()
    crowd = writers.WritersConfig()
    window = window_peers.WindowPeerConfig()
    if quick:
        store.size, store.rounds, store.read_cap_s = 1_000, 2, 0.05
        crowd.size, crowd.rounds, crowd.seconds = 1_000, 1, 0.3
        window.rounds, window.reads, window.appends, window.histories = 2, 20, 10, (10, 100)
    if size:
        store.size = crowd.size = size
    if rounds:
        store.rounds = crowd.rounds = window.rounds = rounds
    print(f"peers, store: {store.size} records, synchronous {' and '.join(store.synchronous)}, {store.rounds} rounds")
    results["peers"] = peer_bench.run(store)
    profile = write_profile.ProfileConfig(size=store.size)
    if quick:
        profile.writes, profile.puts = 10, 30
    print("peers, where a write's cost goes:")
    results["write_profile"] = write_profile.run(profile)
    print(f"peers, {crowd.processes} writer processes:")
    results["writers"] = writers.run(crowd)
    print("peers, short-term window:")
    results["window_peers"] = window_peers.run(window)


if __name__ == "__main__":
    raise SystemExit(main())
